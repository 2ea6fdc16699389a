/**
 * A round-robin HTTP load balancer for tests: each request goes to the next target in turn, so
 * consecutive steps of one flow land on different replicas. It records which target served what.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Balancer {
  url: string;
  /** Targets' base URLs; set (or change) them once the replicas run. */
  targets: string[];
  /** `<target index> <METHOD> <path>` per request, in order. */
  served: string[];
  close(): Promise<void>;
}

export async function startBalancer(): Promise<Balancer> {
  let next = 0;
  const balancer: Balancer = { url: '', targets: [], served: [], close: async () => undefined };
  const server: Server = createServer((req, res) => {
    if (balancer.targets.length === 0) {
      res.writeHead(503).end();
      return;
    }
    const index = next++ % balancer.targets.length;
    const target = new URL(balancer.targets[index]!);
    balancer.served.push(`${index} ${req.method} ${(req.url ?? '/').split('?')[0]}`);
    const upstream = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (response) => {
        res.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  balancer.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  balancer.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return balancer;
}
