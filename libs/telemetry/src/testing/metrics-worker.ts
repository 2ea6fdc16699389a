/**
 * A worker thread for the metrics bridge test: starts telemetry in the worker, records what the
 * main thread asks for, and shuts down on request.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { recordClaimRefused, recordHttpServerRequest } from '../instruments.js';
import { startTelemetry } from '../telemetry.js';

const telemetry = startTelemetry({ serviceName: 'worker-thread', env: {} });
const { requests, refusals } = workerData as { requests: number; refusals: number };
for (let i = 0; i < requests; i++) recordHttpServerRequest({ method: 'GET', route: '/api/things', statusCode: 200, seconds: 0.02 });
for (let i = 0; i < refusals; i++) recordClaimRefused('agent-busy');
parentPort?.on('message', (message) => {
  if (message === 'stop') void telemetry.shutdown().then(() => parentPort?.close());
});
parentPort?.postMessage('ready');
