export * from './binaries.js';
export * from './nats-server.js';
export * from './redis-server.js';
export { startMongoWireServer, type MongoWireServer, type MongoWireServerOptions } from './mongo-wire/server.js';
