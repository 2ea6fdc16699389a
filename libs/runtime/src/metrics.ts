import { startMetricsServer, type MetricsServer } from '@planning/telemetry';
import type { ModuleDefinition } from './registry.js';

/**
 * The Prometheus scrape endpoint, `GET /metrics` on METRICS_HOST:METRICS_PORT, in every process
 * whatever its target. It starts first and stops last, so a scrape during shutdown still answers.
 */
export const metricsModule: ModuleDefinition<undefined, undefined> = {
  name: 'metrics',
  deps: [],
  async init(ctx) {
    let server: MetricsServer | undefined;
    return {
      async start() {
        server = await startMetricsServer({ host: ctx.config.METRICS_HOST, port: ctx.config.METRICS_PORT });
        if (server) ctx.logger.info({ address: server.address }, 'metrics listening');
        else ctx.logger.info({}, 'metrics endpoint off: OTEL_METRICS_EXPORTER does not list prometheus');
      },
      async stop() {
        await server?.close();
      },
    };
  },
};
