import { randomUUID } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { injectTraceHeaders, startMetricsServer, startTelemetry, type MetricsServer, type Telemetry } from '@planning/telemetry';
import { parsePrometheusText, startNatsServer, type NatsServerHandle } from '@planning/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBus } from './index.js';
import { createInProcessBus } from './in-process/in-process-bus.js';
import { createNatsBus } from './nats/nats-bus.js';
import type { Delivery, EventBus, EventEnvelope } from './port.js';
import { PUBLISHED_AT_HEADER, withTelemetry } from './traced.js';

const exporter = new InMemorySpanExporter();
let telemetry: Telemetry;
let metrics: MetricsServer;
let nats: NatsServerHandle;

beforeAll(async () => {
  telemetry = startTelemetry({ serviceName: 'bus-test', env: {}, spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  metrics = (await startMetricsServer({ host: '127.0.0.1', port: 0 }))!;
  nats = await startNatsServer();
});
afterAll(async () => {
  await metrics?.close();
  await telemetry?.shutdown();
  await nats?.stop();
});

describe.each([
  ['in-process', () => createInProcessBus()],
  ['nats', () => createNatsBus({ servers: nats.url, pullExpiresMs: 1_000, onError: () => undefined })],
] as const)('bus telemetry (%s)', (kind, open) => {
  let bus: EventBus;
  beforeAll(async () => {
    bus = withTelemetry(await open());
  });
  afterAll(async () => {
    await bus?.close();
  });

  it('bus telemetry: publish and handling are a producer and a consumer span in the trace of the request that recorded the event', async () => {
    exporter.reset();
    const subject = `planning.test.thing-${kind}.created`;
    const durable = `traced-${kind}-${randomUUID().slice(0, 8)}`;
    const received: Delivery[] = [];
    let handlerSpan: string | undefined;
    const consumer = await bus.consume({ durable, filterSubjects: [subject] }, async (delivery) => {
      handlerSpan = trace.getActiveSpan()?.spanContext().spanId;
      received.push(delivery);
    });

    const request = trace.getTracer('t').startSpan('POST /api/things', { kind: SpanKind.SERVER });
    const stored = injectTraceHeaders(trace.setSpan(ROOT_CONTEXT, request));
    request.end();
    const event: EventEnvelope = {
      id: randomUUID(),
      type: 'thing.created',
      subject,
      source: 'test',
      occurredAt: new Date(Date.now() - 250).toISOString(),
      data: {},
    };
    await bus.publish(event, stored);
    for (let i = 0; i < 100 && !exporter.getFinishedSpans().some((s) => s.kind === SpanKind.CONSUMER); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await consumer.stop();

    const spans = exporter.getFinishedSpans();
    const producer = spans.find((s) => s.kind === SpanKind.PRODUCER) as ReadableSpan;
    const consumed = spans.find((s) => s.kind === SpanKind.CONSUMER) as ReadableSpan;
    expect(producer.name).toBe(`send ${subject}`);
    expect(producer.attributes['messaging.system']).toBe(kind);
    expect(producer.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(consumed.name).toBe(`process ${subject}`);
    expect(consumed.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
    expect(consumed.links.map((l) => l.context.spanId)).toEqual([producer.spanContext().spanId]);
    expect(consumed.attributes['messaging.consumer.group.name']).toBe(durable);
    expect(consumed.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(handlerSpan).toBe(consumed.spanContext().spanId);
    // The handler sees when the bus accepted the message, for the consume lag.
    expect(Number(received[0]?.headers[PUBLISHED_AT_HEADER])).toBeGreaterThan(Date.now() - 60_000);

    const families = parsePrometheusText(await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text());
    const publishLag = families.get('planning_bus_publish_lag')?.samples.find((s) => s.labels['messaging_destination_name'] === subject);
    expect(publishLag?.count).toBe(1);
    // The event was recorded 250 ms before it was published.
    expect(publishLag?.sum).toBeGreaterThanOrEqual(0.25);
    const consumeLag = families.get('planning_bus_consume_lag')?.samples.find((s) => s.labels['messaging_consumer_group_name'] === durable);
    expect(consumeLag?.count).toBe(1);
    const processed = families.get('messaging_process_duration')?.samples.find((s) => s.labels['messaging_consumer_group_name'] === durable);
    expect(processed?.count).toBe(1);
  });

  it('bus telemetry: the wrapped bus still shows the adapter’s own properties', () => {
    expect(bus.kind).toBe(kind);
    if (kind === 'nats') expect((bus as unknown as { stream: string }).stream).toBe('PLANNING');
  });
});

describe('in-process bus drops (createBus)', () => {
  it('bus drops: an event a cap drops before its consumer had it is counted on /metrics and warned about, at most once a minute', async () => {
    const warnings: { obj: Record<string, unknown>; msg: string | undefined }[] = [];
    const logger = { debug: () => undefined, warn: (obj: object, msg?: string) => warnings.push({ obj: obj as Record<string, unknown>, msg }) };
    const bus = await createBus({ kind: 'in-process', maxMessages: 1, logger });
    const subject = `planning.test.dropped-${randomUUID().slice(0, 8)}.created`;
    let release!: () => void;
    const hang = new Promise<void>((r) => (release = r));
    const consumer = await bus.consume({ durable: 'stuck', filterSubjects: [subject], concurrency: 1 }, () => hang);
    const publish = () =>
      bus.publish({ id: randomUUID(), type: 'thing.created', subject, source: 'test', occurredAt: new Date().toISOString(), data: {} });
    // The first is in flight at the stuck consumer; each further one pushes an unhandled one out.
    for (let i = 0; i < 5; i++) {
      await publish();
      await new Promise((r) => setImmediate(r));
    }
    const families = parsePrometheusText(await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text());
    const dropped = families.get('planning_bus_dropped_total')?.samples.find((s) => s.labels['messaging_destination_name'] === subject);
    expect(dropped?.value).toBe(4);
    expect(dropped?.labels['planning_bus_drop_reason']).toBe('max-messages');
    // One warning for the burst (the next may come a minute later), naming the consumer.
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.obj).toMatchObject({ dropped: 1, reason: 'max-messages', subject, consumers: ['stuck'] });
    release();
    await consumer.stop();
    await bus.close();
  });
});
