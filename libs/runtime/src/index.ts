export * from './registry.js';
export * from './runtime.js';
export * from './process-config.js';
// The HTTP server (fastify, ajv) is its own entry, `@planning/runtime/http`: a thread without an
// HTTP server (the services' thread) then never evaluates fastify. Its types stay here.
export type { HttpAppOptions, HttpExports } from './http.js';
export * from './infra.js';
export * from './metrics.js';
export { configureFailpoints, failpoint, FailpointError } from './failpoints.js';
export * from './services-thread.js';
export { compactWhenQuiet, fullCollection, newSpaceCommittedBytes, type QuietCompactionOptions } from './quiet-compaction.js';
export type { ReadyReport as ThreadReadyReport } from './thread-port.js';
