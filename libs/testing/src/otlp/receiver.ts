/**
 * An OTLP receiver for tests: what an OpenTelemetry collector would receive from the services,
 * decoded with the OpenTelemetry protocol's own definitions (./proto). It listens for OTLP over
 * HTTP (`POST /v1/traces`, `POST /v1/metrics`; protobuf or JSON bodies) and over gRPC (the
 * TraceService and MetricsService `Export` methods), and keeps every span and metric point.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';

const PROTO_DIR = join(dirname(fileURLToPath(import.meta.url)), 'proto');

export type AttributeValue = string | number | boolean | AttributeValue[] | { [key: string]: AttributeValue } | null;
export type Attributes = Record<string, AttributeValue>;

export interface ReceivedSpan {
  /** `service.name` of the span's resource. */
  service: string;
  resource: Attributes;
  scope: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: Attributes;
  links: { traceId: string; spanId: string; attributes: Attributes }[];
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
}

export interface ReceivedPoint {
  service: string;
  resource: Attributes;
  scope: string;
  /** The instrument name, e.g. `http.server.request.duration`. */
  name: string;
  unit: string;
  type: 'sum' | 'gauge' | 'histogram' | 'exponentialHistogram' | 'summary';
  isMonotonic?: boolean;
  attributes: Attributes;
  timeUnixNano: bigint;
  /** Sums and gauges. */
  value?: number;
  /** Histograms. */
  count?: number;
  sum?: number;
  bucketCounts?: number[];
  explicitBounds?: number[];
}

export interface ReceivedRequest {
  transport: 'http' | 'grpc';
  signal: 'traces' | 'metrics';
  /** `application/x-protobuf`, `application/json` or `application/grpc`. */
  contentType: string;
}

export interface OtlpReceiver {
  /** Base URL for OTLP over HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT` with http/protobuf or http/json). */
  httpEndpoint: string;
  /** URL for OTLP over gRPC (`OTEL_EXPORTER_OTLP_ENDPOINT` with grpc). */
  grpcEndpoint: string;
  spans: ReceivedSpan[];
  points: ReceivedPoint[];
  requests: ReceivedRequest[];
  /** Requests that could not be decoded (each answered 400). */
  rejected: string[];
  stop(): Promise<void>;
}

let root: protobuf.Root | undefined;
function types(): { traces: protobuf.Type; metrics: protobuf.Type } {
  root ??= (() => {
    const r = new protobuf.Root();
    // Imports in the .proto files are relative to the proto directory.
    r.resolvePath = (_origin, target) => (target.startsWith(PROTO_DIR) ? target : join(PROTO_DIR, target));
    r.loadSync(['opentelemetry/proto/collector/trace/v1/trace_service.proto', 'opentelemetry/proto/collector/metrics/v1/metrics_service.proto']);
    r.resolveAll();
    return r;
  })();
  const loaded = root;
  return {
    traces: loaded.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest'),
    metrics: loaded.lookupType('opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest'),
  };
}

/* eslint-disable @typescript-eslint/no-explicit-any -- decoded OTLP messages are walked field by field */
const hex = (bytes: unknown): string =>
  typeof bytes === 'string' ? bytes : bytes instanceof Uint8Array ? Buffer.from(bytes).toString('hex') : '';
const big = (value: unknown): bigint => (value === undefined || value === null || value === '' ? 0n : BigInt(String(value)));
const num = (value: unknown): number => (value === undefined || value === null ? 0 : Number(value));

function anyValue(v: any): AttributeValue {
  if (!v) return null;
  if (v.stringValue !== undefined && v.stringValue !== null) return v.stringValue;
  if (v.boolValue !== undefined && v.boolValue !== null) return v.boolValue;
  if (v.intValue !== undefined && v.intValue !== null) return Number(v.intValue);
  if (v.doubleValue !== undefined && v.doubleValue !== null) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(anyValue);
  if (v.kvlistValue) return attributes(v.kvlistValue.values);
  if (v.bytesValue) return hex(v.bytesValue);
  return null;
}

function attributes(list: any[] | undefined): Attributes {
  const out: Attributes = {};
  for (const kv of list ?? []) out[kv.key] = anyValue(kv.value);
  return out;
}

/** Spans of an export request (decoded protobuf, or OTLP/JSON whose ids are hex already). */
function collectSpans(request: any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributes(rs.resource?.attributes);
    const service = typeof resource['service.name'] === 'string' ? resource['service.name'] : 'unknown';
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        const parent = hex(s.parentSpanId);
        out.push({
          service,
          resource,
          scope: ss.scope?.name ?? '',
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          ...(parent ? { parentSpanId: parent } : {}),
          name: s.name,
          kind: num(s.kind),
          startTimeUnixNano: big(s.startTimeUnixNano),
          endTimeUnixNano: big(s.endTimeUnixNano),
          attributes: attributes(s.attributes),
          links: (s.links ?? []).map((l: any) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId), attributes: attributes(l.attributes) })),
          statusCode: num(s.status?.code),
        });
      }
    }
  }
  return out;
}

function collectPoints(request: any): ReceivedPoint[] {
  const out: ReceivedPoint[] = [];
  for (const rm of request.resourceMetrics ?? []) {
    const resource = attributes(rm.resource?.attributes);
    const service = typeof resource['service.name'] === 'string' ? resource['service.name'] : 'unknown';
    for (const sm of rm.scopeMetrics ?? []) {
      for (const m of sm.metrics ?? []) {
        const base = { service, resource, scope: sm.scope?.name ?? '', name: m.name, unit: m.unit ?? '' };
        const type = (['sum', 'gauge', 'histogram', 'exponentialHistogram', 'summary'] as const).find((t) => m[t]);
        if (!type) continue;
        for (const p of m[type].dataPoints ?? []) {
          const point: ReceivedPoint = { ...base, type, attributes: attributes(p.attributes), timeUnixNano: big(p.timeUnixNano) };
          if (type === 'sum') point.isMonotonic = Boolean(m.sum.isMonotonic);
          if (type === 'sum' || type === 'gauge') point.value = p.asDouble !== undefined && p.asDouble !== null ? p.asDouble : num(p.asInt);
          if (type === 'histogram') {
            point.count = num(p.count);
            point.sum = num(p.sum);
            point.bucketCounts = (p.bucketCounts ?? []).map(num);
            point.explicitBounds = p.explicitBounds ?? [];
          }
          out.push(point);
        }
      }
    }
  }
  return out;
}
/* eslint-enable @typescript-eslint/no-explicit-any */

function decode(signal: 'traces' | 'metrics', body: Buffer, json: boolean): unknown {
  if (json) return JSON.parse(body.toString('utf8'));
  const type = types()[signal];
  // Bytes stay Uint8Array (ids are hex-encoded from them); 64-bit integers become strings.
  return type.toObject(type.decode(body), { longs: String, enums: Number });
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const points: ReceivedPoint[] = [];
  const requests: ReceivedRequest[] = [];
  const rejected: string[] = [];

  const accept = (signal: 'traces' | 'metrics', decoded: unknown): void => {
    if (signal === 'traces') spans.push(...collectSpans(decoded));
    else points.push(...collectPoints(decoded));
  };

  const http: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const signal = req.url === '/v1/traces' ? 'traces' : req.url === '/v1/metrics' ? 'metrics' : undefined;
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      const json = contentType === 'application/json';
      if (req.method !== 'POST' || !signal) {
        res.writeHead(404).end();
        return;
      }
      try {
        accept(signal, decode(signal, Buffer.concat(chunks), json));
        requests.push({ transport: 'http', signal, contentType });
        // An empty Export*ServiceResponse: full success.
        if (json) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      } catch (err) {
        rejected.push(`${req.url} ${contentType}: ${err instanceof Error ? err.message : String(err)}`);
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));

  const grpcServer = new grpc.Server();
  const exportMethod = (signal: 'traces' | 'metrics', service: string): grpc.ServiceDefinition => ({
    Export: {
      path: `/opentelemetry.proto.collector.${signal === 'traces' ? 'trace' : 'metrics'}.v1.${service}/Export`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: () => Buffer.alloc(0),
      responseDeserialize: (b: Buffer) => b,
    },
  });
  for (const [signal, service] of [
    ['traces', 'TraceService'],
    ['metrics', 'MetricsService'],
  ] as const) {
    grpcServer.addService(exportMethod(signal, service), {
      Export(call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
        try {
          accept(signal, decode(signal, call.request, false));
          requests.push({ transport: 'grpc', signal, contentType: 'application/grpc' });
          callback(null, Buffer.alloc(0));
        } catch (err) {
          rejected.push(`grpc ${signal}: ${err instanceof Error ? err.message : String(err)}`);
          callback({ code: grpc.status.INVALID_ARGUMENT, details: 'undecodable' });
        }
      },
    });
  }
  const grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
  );

  return {
    httpEndpoint: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    grpcEndpoint: `http://127.0.0.1:${grpcPort}`,
    spans,
    points,
    requests,
    rejected,
    async stop() {
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await new Promise<void>((resolve) => grpcServer.tryShutdown(() => resolve()));
    },
  };
}
