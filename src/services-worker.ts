/**
 * The services' worker thread of an all-in-one process (SERVICES_THREAD): issues, agents-claims,
 * imports-exports and audit with their stores, bus and gRPC server. The main thread starts it
 * (`services-thread` module) and reaches it through the port it hands over.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { RuntimeLogger, ServicesThreadData as Data } from '@planning/runtime';
import { startTelemetry } from '@planning/telemetry';

// Spans of this thread are exported by its own SDK, under the process's service name.
const telemetry = startTelemetry({ serviceName: process.env.OTEL_SERVICE_NAME?.trim() || 'planning-service' });

const { compactWhenQuiet, configureFailpoints, createRuntime } = await import('@planning/runtime');
const { createLogger } = await import('@planning/telemetry');
const { SERVICES_THREAD_ROOTS, servicesThreadModules } = await import('./services-thread-modules.js');

const { config, settings, port, logLevel } = workerData as Data;
const lifecycle = parentPort!;
const logger = createLogger({ name: 'planning-service', level: logLevel }).child({ thread: 'services' });
configureFailpoints(config.SERVICE_FAILPOINTS);
let grpcAddress = `127.0.0.1:${config.GRPC_PORT}`;
const definitions = servicesThreadModules(port, (address) => (grpcAddress = address));
const roots = [...SERVICES_THREAD_ROOTS, 'thread-port'];
// The settings come parsed and checked from the main thread (it read the environment, with the
// modules' schemas, before starting this thread).
const runtime = createRuntime({
  definitions,
  target: config.target,
  roots,
  config,
  settings: new Map(Object.entries(settings)),
  logger: logger as unknown as RuntimeLogger,
});
lifecycle.on('message', (message: { t: string }) => {
  if (message.t !== 'shutdown') return;
  void runtime
    .shutdown(0)
    .catch((err: unknown) => logger.error({ err }, 'services thread shutdown failed'))
    .then(() => telemetry.shutdown())
    .finally(() => {
      lifecycle.postMessage({ t: 'stopped' });
      lifecycle.close();
    });
});
try {
  await runtime.start();
  // This thread's start-up nursery back to the system once it idles (quiet-compaction.ts).
  compactWhenQuiet({ onCollected: (report) => logger.debug(report, 'start-up memory compacted') });
  lifecycle.postMessage({ t: 'started', grpcPort: Number(/:(\d+)$/.exec(grpcAddress)?.[1] ?? config.GRPC_PORT) });
} catch (err) {
  lifecycle.postMessage({ t: 'failed', message: err instanceof Error ? err.message : String(err) });
}
