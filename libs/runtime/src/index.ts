export * from './registry.js';
export * from './runtime.js';
export * from './process-config.js';
export * from './http.js';
export * from './infra.js';
export * from './metrics.js';
export { configureFailpoints, failpoint, FailpointError } from './failpoints.js';
export * from './services-thread.js';
export type { ReadyReport as ThreadReadyReport } from './thread-port.js';
