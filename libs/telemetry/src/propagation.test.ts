import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectTraceHeaders, withExtractedContext } from './propagation.js';
import { startTelemetry, type Telemetry } from './telemetry.js';

const spanContext = { traceId: '5bd66ef5095369c7b0d1f8f4bd33716a', spanId: 'c532cb4098ac3dd2', traceFlags: 1 };
const activeTraceId = (): string | undefined => trace.getSpanContext(context.active())?.traceId;

describe('trace headers', () => {
  let telemetry: Telemetry;
  beforeAll(() => {
    telemetry = startTelemetry({ serviceName: 'propagation-test', env: {} });
  });
  afterAll(async () => {
    await telemetry.shutdown();
  });

  it('propagation: headers injected from the active context carry its trace id back out', () => {
    const headers = context.with(trace.setSpanContext(ROOT_CONTEXT, spanContext), () => injectTraceHeaders());
    expect(headers.traceparent).toBe(`00-${spanContext.traceId}-${spanContext.spanId}-01`);
    expect(withExtractedContext(headers, activeTraceId)).toBe(spanContext.traceId);
    // The extracted span is the remote parent: a child started here continues the same trace.
    const child = withExtractedContext(headers, () => trace.getTracer('t').startSpan('child'));
    expect(child.spanContext().traceId).toBe(spanContext.traceId);
    child.end();
  });

  it('propagation: reads get/keys carriers such as NATS headers', () => {
    const headers = injectTraceHeaders(trace.setSpanContext(ROOT_CONTEXT, spanContext));
    const natsLike = {
      get: (key: string) => headers[key] ?? '',
      keys: () => Object.keys(headers),
    };
    expect(withExtractedContext(natsLike, activeTraceId)).toBe(spanContext.traceId);
    expect(withExtractedContext(new Map(Object.entries(headers)), activeTraceId)).toBe(spanContext.traceId);
  });

  it('propagation: header names match case-insensitively in records', () => {
    const headers = injectTraceHeaders(trace.setSpanContext(ROOT_CONTEXT, spanContext));
    expect(withExtractedContext({ Traceparent: headers.traceparent }, activeTraceId)).toBe(spanContext.traceId);
  });

  it('propagation: without trace headers fn runs in a fresh root context, not the caller’s', () => {
    const seen = context.with(trace.setSpanContext(ROOT_CONTEXT, spanContext), () => [
      withExtractedContext({}, activeTraceId),
      withExtractedContext(undefined, activeTraceId),
    ]);
    expect(seen).toEqual([undefined, undefined]);
  });

  it('propagation: with no active span nothing is injected', () => {
    expect(injectTraceHeaders(ROOT_CONTEXT)).toEqual({});
  });

  it('propagation: returns what fn returns, including promises', async () => {
    await expect(withExtractedContext({}, async () => 42)).resolves.toBe(42);
  });
});
