export * from './binaries.js';
export * from './nats-server.js';
export * from './redis-server.js';
