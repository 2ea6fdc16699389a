/**
 * Import this module first in a process entry point (`import '@planning/telemetry/register';`),
 * before any application code, so the context manager and propagator exist before the first
 * request arrives. It starts telemetry from the `OTEL_*` variables and flushes spans on exit.
 *
 * Shutdown: when the event loop drains (`beforeExit`) spans are flushed. On SIGTERM/SIGINT the
 * process's own handler (the runtime's graceful drain) owns the exit; only when nobody else
 * listens for the signal does this module flush and then re-raise it with its default action.
 * Code that ends with `process.exit()` should `await telemetry.shutdown()` first.
 */
import { startTelemetry, type Telemetry } from './telemetry.js';

export const telemetry: Telemetry = startTelemetry({
  serviceName: process.env.OTEL_SERVICE_NAME?.trim() || 'planning-service',
});

process.once('beforeExit', () => {
  void telemetry.shutdown();
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    // Our once-listener is already removed here, so any remaining listener belongs to the app.
    if (process.listenerCount(signal) > 0) return;
    void telemetry.shutdown().finally(() => process.kill(process.pid, signal));
  });
}
