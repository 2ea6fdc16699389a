import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { activeTelemetry } from './telemetry.js';

export interface MetricsServer {
  /** Where it listens, e.g. `0.0.0.0:9464`. */
  readonly address: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (Prometheus text format) for the telemetry this process started, on a
 * port of its own: the port the public Services never expose. Resolves undefined when there is
 * nothing to serve (the Prometheus exporter is off); rejects when the port cannot be bound.
 */
export async function startMetricsServer(options: { host: string; port: number }): Promise<MetricsServer | undefined> {
  const handler = activeTelemetry()?.metricsHandler;
  if (!handler) return undefined;
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?', 1)[0];
    if (path === '/metrics' && (request.method === 'GET' || request.method === 'HEAD')) {
      handler(request, response);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found: metrics are served at GET /metrics\n');
  });
  // Scrapers keep connections open; never let them hold the process or its shutdown.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(`METRICS_PORT ${options.port} on ${options.host} is already in use; choose another port with METRICS_PORT`, { cause: err })
          : err,
      );
    };
    server.once('error', onError);
    server.listen(options.port, options.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  return {
    address: `${options.host.includes(':') ? `[${options.host}]` : options.host}:${bound.port}`,
    port: bound.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
