import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT_CONTEXT, context, propagation, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveTraceExportSettings, startTelemetry, type Telemetry } from './telemetry.js';

interface Received {
  url: string;
  body: Buffer;
}

async function startCollector(): Promise<{ server: Server; endpoint: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ url: req.url ?? '', body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, endpoint: `http://127.0.0.1:${port}`, received };
}

describe('resolveTraceExportSettings', () => {
  it('settings: no variables means no exporter', () => {
    expect(resolveTraceExportSettings('svc', {})).toEqual({
      disabled: false,
      serviceName: 'svc',
      exporters: [],
      protocol: 'http/protobuf',
      url: undefined,
      otlpTracesUrl: undefined,
    });
  });

  it('settings: OTEL_EXPORTER_OTLP_PROTOCOL picks the protocol; grpc uses the endpoint as given', () => {
    const grpc = resolveTraceExportSettings('svc', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' });
    expect(grpc).toMatchObject({ exporters: ['otlp'], protocol: 'grpc', url: 'http://collector:4317' });
    const json = resolveTraceExportSettings('svc', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    expect(json).toMatchObject({ protocol: 'http/json', url: 'http://collector:4318/v1/traces' });
    // The signal's own variable wins; an unknown protocol falls back to the default.
    expect(
      resolveTraceExportSettings('svc', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }).protocol,
    ).toBe('http/protobuf');
    expect(resolveTraceExportSettings('svc', { OTEL_EXPORTER_OTLP_PROTOCOL: 'carrier-pigeon' }).protocol).toBe('http/protobuf');
  });

  it('settings: an OTLP endpoint turns on the OTLP exporter at /v1/traces', () => {
    const settings = resolveTraceExportSettings('svc', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' });
    expect(settings.exporters).toEqual(['otlp']);
    expect(settings.otlpTracesUrl).toBe('http://collector:4318/v1/traces');
  });

  it('settings: the traces endpoint is used as given and wins over the base endpoint', () => {
    const settings = resolveTraceExportSettings('svc', {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom',
    });
    expect(settings.exporters).toEqual(['otlp']);
    expect(settings.otlpTracesUrl).toBe('http://traces:4318/custom');
  });

  it('settings: OTEL_TRACES_EXPORTER=none wins over an endpoint', () => {
    const settings = resolveTraceExportSettings('svc', {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_TRACES_EXPORTER: 'none',
    });
    expect(settings.exporters).toEqual([]);
  });

  it('settings: OTEL_TRACES_EXPORTER lists exporters and drops unknown ones', () => {
    const settings = resolveTraceExportSettings('svc', { OTEL_TRACES_EXPORTER: 'console, otlp,zipkin,console' });
    expect(settings.exporters).toEqual(['console', 'otlp']);
    expect(settings.otlpTracesUrl).toBeUndefined();
  });

  it('settings: OTEL_SDK_DISABLED=true disables every exporter', () => {
    const settings = resolveTraceExportSettings('svc', {
      OTEL_SDK_DISABLED: 'true',
      OTEL_TRACES_EXPORTER: 'console',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
    });
    expect(settings.disabled).toBe(true);
    expect(settings.exporters).toEqual([]);
  });

  it('settings: OTEL_SERVICE_NAME overrides the given service name', () => {
    expect(resolveTraceExportSettings('svc', { OTEL_SERVICE_NAME: 'from-env' }).serviceName).toBe('from-env');
  });
});

describe('startTelemetry', () => {
  let telemetry: Telemetry | undefined;
  let collector: Awaited<ReturnType<typeof startCollector>> | undefined;

  afterEach(async () => {
    await telemetry?.shutdown();
    telemetry = undefined;
    if (collector) await new Promise((resolve) => collector?.server.close(resolve));
    collector = undefined;
  });

  it('telemetry: without an exporter it is quiet but still propagates W3C trace context', () => {
    telemetry = startTelemetry({ serviceName: 'quiet', env: {} });
    expect(telemetry.enabled).toBe(false);
    expect(telemetry.exporters).toEqual([]);

    const span = trace.getTracer('test').startSpan('not recorded');
    expect(span.isRecording()).toBe(false);
    span.end();

    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const parent = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: 'b7ad6b7169203331', traceFlags: 1 });
    const carrier: Record<string, string> = {};
    propagation.inject(parent, carrier);
    expect(carrier.traceparent).toBe(`00-${traceId}-b7ad6b7169203331-01`);
    // The context manager is installed: context.with makes the context active.
    expect(context.with(parent, () => trace.getSpanContext(context.active())?.traceId)).toBe(traceId);
  });

  it('telemetry: a second start without shutdown is refused', () => {
    telemetry = startTelemetry({ serviceName: 'once', env: {} });
    expect(() => startTelemetry({ serviceName: 'twice', env: {} })).toThrow(/already started/);
  });

  it('telemetry: can start again after shutdown', async () => {
    const first = startTelemetry({ serviceName: 'first', env: {} });
    await first.shutdown();
    await first.shutdown();
    telemetry = startTelemetry({ serviceName: 'second', env: {} });
    expect(telemetry.enabled).toBe(false);
  });

  it('telemetry: with an OTLP endpoint spans are exported to it on shutdown', async () => {
    collector = await startCollector();
    telemetry = startTelemetry({
      serviceName: 'ignored',
      serviceVersion: '1.2.3',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_SERVICE_NAME: 'otlp-test-service' },
    });
    expect(telemetry.enabled).toBe(true);
    expect(telemetry.exporters).toEqual(['otlp']);

    const span = trace.getTracer('test').startSpan('exported-span');
    expect(span.isRecording()).toBe(true);
    span.end();
    await telemetry.shutdown();

    expect(collector.received.length).toBeGreaterThan(0);
    const request = collector.received[0];
    expect(request?.url).toBe('/v1/traces');
    const body = request?.body.toString('utf8') ?? '';
    expect(body).toContain('exported-span');
    expect(body).toContain('otlp-test-service');
    expect(body).toContain('1.2.3');
  });

  it('telemetry: OTEL_TRACES_SAMPLER picks the sampler (always_off records nothing; a ratio of 1 everything)', async () => {
    collector = await startCollector();
    telemetry = startTelemetry({
      serviceName: 'sampled',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_TRACES_SAMPLER: 'always_off' },
    });
    expect(telemetry.enabled).toBe(true);
    const dropped = trace.getTracer('test').startSpan('not-sampled');
    expect(dropped.isRecording()).toBe(false);
    dropped.end();
    await telemetry.shutdown();
    expect(collector.received).toEqual([]);

    telemetry = startTelemetry({
      serviceName: 'sampled',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '1', OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT: '4' },
    });
    const kept = trace.getTracer('test').startSpan('sampled-span', { attributes: { long: 'abcdefgh' } });
    expect(kept.isRecording()).toBe(true);
    kept.end();
    await telemetry.shutdown();
    const body = collector.received.map((r) => r.body.toString('utf8')).join('');
    expect(body).toContain('sampled-span');
    // The span limit of the environment applies: the attribute value is cut to 4 characters.
    expect(body).toContain('abcd');
    expect(body).not.toContain('abcdefgh');
  });

  it('telemetry: OTEL_SDK_DISABLED=true exports nothing even with an endpoint', async () => {
    collector = await startCollector();
    telemetry = startTelemetry({
      serviceName: 'disabled',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_SDK_DISABLED: 'true' },
    });
    expect(telemetry.enabled).toBe(false);
    const span = trace.getTracer('test').startSpan('dropped');
    expect(span.isRecording()).toBe(false);
    span.end();
    await telemetry.shutdown();
    expect(collector.received).toEqual([]);
  });
});
