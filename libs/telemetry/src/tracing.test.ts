import { ROOT_CONTEXT, SpanKind, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { withMcpSpan } from './mcp.js';
import { injectTraceHeaders, withConsumerSpan, withProducerSpan } from './propagation.js';
import { startTelemetry, type Telemetry } from './telemetry.js';
import { traceIfWorked } from './tentative.js';

const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
beforeAll(() => {
  telemetry = startTelemetry({ serviceName: 'tracing-test', env: {}, spanProcessors: [new SimpleSpanProcessor({ exporter })] });
});
afterAll(async () => {
  await telemetry.shutdown();
});
beforeEach(() => exporter.reset());

const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
const byName = (name: string) => spans().find((s) => s.name === name);
const parentOf = (span: ReadableSpan | undefined) => span?.parentSpanContext?.spanId;

describe('tentative traces (the claim sweeper)', () => {
  const child = async (name: string) => trace.getTracer('t').startActiveSpan(name, async (span) => span.end());

  it('tentative: a run that did nothing leaves no spans, not even its children', async () => {
    await traceIfWorked('sweep', async () => {
      await child('look');
      return { changed: 0 };
    }, (r) => r.changed > 0);
    expect(spans()).toEqual([]);
  });

  it('tentative: a run that worked is exported whole, root and children', async () => {
    await traceIfWorked('sweep', async () => {
      await child('expire');
      return { changed: 2 };
    }, (r) => r.changed > 0);
    const root = byName('sweep');
    expect(root).toBeDefined();
    expect(parentOf(byName('expire'))).toBe(root!.spanContext().spanId);
    expect(byName('expire')!.spanContext().traceId).toBe(root!.spanContext().traceId);
  });

  it('tentative: a run that failed is exported, with the error', async () => {
    await expect(
      traceIfWorked('sweep', async () => {
        await child('expire');
        throw new Error('issues unreachable');
      }, () => false),
    ).rejects.toThrow('issues unreachable');
    expect(spans().map((s) => s.name).sort()).toEqual(['expire', 'sweep']);
    expect(byName('sweep')!.status.code).toBe(2);
  });

  it('tentative: calls made during the run carry its context as not sampled; other calls as sampled', async () => {
    let inside: Record<string, string> = {};
    await traceIfWorked('sweep', async () => {
      inside = injectTraceHeaders();
    }, () => false);
    expect(inside.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    const outside = trace.getTracer('t').startActiveSpan('request', (span) => {
      const headers = injectTraceHeaders();
      span.end();
      return headers;
    });
    expect(outside.traceparent).toMatch(/-01$/);
  });
});

describe('messaging spans', () => {
  it('messaging: the producer span continues the trace stored with the event; the consumer span continues the producer', async () => {
    // The outbox stored the request's context when the event was recorded.
    const request = trace.getTracer('t').startSpan('POST /api/workspaces', { kind: SpanKind.SERVER });
    const stored = injectTraceHeaders(trace.setSpan(ROOT_CONTEXT, request));
    request.end();

    let sent: Record<string, string> = {};
    // Later, outside the request, the relay publishes.
    await context.with(ROOT_CONTEXT, () =>
      withProducerSpan({ system: 'nats', subject: 'planning.issues.workspace.created', messageId: 'evt_1' }, { ...stored, 'x-other': 'kept' }, async (headers) => {
        sent = headers;
      }),
    );
    const producer = byName('send planning.issues.workspace.created')!;
    expect(producer.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(producer)).toBe(request.spanContext().spanId);
    expect(producer.attributes).toMatchObject({
      'messaging.system': 'nats',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'planning.issues.workspace.created',
      'messaging.message.id': 'evt_1',
    });
    expect(sent['x-other']).toBe('kept');
    expect(sent.traceparent).toContain(producer.spanContext().spanId);

    await withConsumerSpan(
      { system: 'nats', subject: 'planning.issues.workspace.created', messageId: 'evt_1', consumerGroup: 'audit', deliveryCount: 1 },
      sent,
      async () => trace.getTracer('t').startSpan('store audit record').end(),
    );
    const consumer = byName('process planning.issues.workspace.created')!;
    expect(consumer.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(consumer)).toBe(producer.spanContext().spanId);
    expect(consumer.links.map((l) => l.context.spanId)).toEqual([producer.spanContext().spanId]);
    expect(consumer.attributes).toMatchObject({ 'messaging.consumer.group.name': 'audit', 'messaging.operation.type': 'process' });
    // Work done by the handler belongs to the consumer span.
    expect(parentOf(byName('store audit record'))).toBe(consumer.spanContext().spanId);
    expect(new Set(spans().map((s) => s.spanContext().traceId))).toEqual(new Set([request.spanContext().traceId]));
  });

  it('messaging: without stored context the producer span is a child of the active span', async () => {
    await trace.getTracer('t').startActiveSpan('job', async (job) => {
      await withProducerSpan({ system: 'in-process', subject: 'planning.x.y', messageId: 'evt_2' }, {}, async () => undefined);
      job.end();
    });
    expect(parentOf(byName('send planning.x.y'))).toBe(byName('job')!.spanContext().spanId);
  });
});

describe('MCP spans', () => {
  it('mcp: a tools/call span is named by method and tool, with the conventions’ attributes', async () => {
    await withMcpSpan({ method: 'tools/call', toolName: 'create_task', requestId: 7, protocolVersion: '2025-06-18' }, async () => ({ isError: false }));
    const span = byName('tools/call create_task')!;
    expect(span.kind).toBe(SpanKind.SERVER);
    expect(span.attributes).toEqual({
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'create_task',
      'gen_ai.operation.name': 'execute_tool',
      'jsonrpc.request.id': '7',
      'mcp.protocol.version': '2025-06-18',
    });
  });

  it('mcp: a tool result flagged isError marks the span as a tool error', async () => {
    await withMcpSpan({ method: 'tools/call', toolName: 'claim_task' }, async () => ({ isError: true }), (r) => (r.isError ? { errorType: 'tool_error' } : {}));
    const span = byName('tools/call claim_task')!;
    expect(span.attributes['error.type']).toBe('tool_error');
    expect(span.status.code).toBe(2);
  });

  it('mcp: methods without a tool are named by the method alone', async () => {
    await withMcpSpan({ method: 'tools/list' }, async () => undefined);
    expect(byName('tools/list')?.attributes).toEqual({ 'mcp.method.name': 'tools/list' });
  });
});
