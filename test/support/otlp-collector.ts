import { createServer, type Server } from 'node:http';
import { getFreePort } from '@planning/testing';

/** One span as an OTLP/HTTP JSON export carries it, with its resource's service name. */
export interface CollectedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
}

interface OtlpValue {
  stringValue?: string;
}

interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: OtlpValue }[] };
    scopeSpans?: { spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number }[] }[];
  }[];
}

/** A minimal OTLP/HTTP (JSON) trace collector for tests: records what the services export. */
export async function startOtlpCollector(): Promise<{ endpoint: string; spans: CollectedSpan[]; stop(): Promise<void> }> {
  const spans: CollectedSpan[] = [];
  const port = await getFreePort();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport;
          for (const rs of body.resourceSpans ?? []) {
            const service =
              rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? 'unknown';
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                spans.push({
                  service,
                  traceId: s.traceId,
                  spanId: s.spanId,
                  ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
                  name: s.name,
                  kind: s.kind,
                });
              }
            }
          }
        } catch {
          // a protobuf export or garbage: not what this collector understands
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
