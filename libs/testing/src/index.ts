export * from './binaries.js';
