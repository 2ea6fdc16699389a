import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request } from '../support/http.js';
import { startOtlpCollector, type CollectedSpan } from '../support/otlp-collector.js';

/**
 * Operators follow one request through every layer: the caller's trace context enters at the
 * gateway, travels in gRPC metadata to the issues service, and in the event's message headers
 * (NATS in distributed mode) to the audit consumer.
 */
describe.each<Mode>(['all-in-one', 'distributed'])('telemetry (%s)', (mode) => {
  let cluster: Cluster;
  let collector: Awaited<ReturnType<typeof startOtlpCollector>>;
  let cookie: string;

  beforeAll(async () => {
    collector = await startOtlpCollector();
    cluster = await startCluster(mode, {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
    });
    cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await collector?.stop();
  });

  it('telemetry: one trace runs from the HTTP request through gRPC to the audit consumer', async () => {
    const traceId = randomBytes(16).toString('hex');
    const parentSpanId = randomBytes(8).toString('hex');
    const res = await request(cluster.baseUrl, 'POST', '/api/workspaces', {
      cookie,
      body: { name: `Traced ${mode}` },
      headers: { traceparent: `00-${traceId}-${parentSpanId}-01` },
    });
    expect(res.status).toBe(201);

    const inTrace = (): CollectedSpan[] => collector.spans.filter((s) => s.traceId === traceId);
    const spans = await eventually(
      async () => {
        const found = inTrace();
        return found.some((s) => s.name.endsWith('workspace.created process')) ? found : undefined;
      },
      30_000,
      'the audit consumer span in the caller trace',
    );

    const http = spans.find((s) => s.name === 'POST /api/workspaces');
    const rpcServer = spans.find((s) => s.name.includes('WorkspaceService/CreateWorkspace') && s.kind === 2);
    const consumer = spans.find((s) => s.name.endsWith('workspace.created process'));
    expect(http).toBeDefined();
    expect(http?.parentSpanId).toBe(parentSpanId);
    expect(rpcServer).toBeDefined();
    expect(consumer).toBeDefined();
    // Each hop is a child of something in the same trace: nothing started a trace of its own.
    const ids = new Set([parentSpanId, ...spans.map((s) => s.spanId)]);
    for (const span of spans) expect(ids.has(span.parentSpanId ?? '')).toBe(true);

    if (mode === 'distributed') {
      expect(http?.service).toBe('planning-gateway');
      expect(rpcServer?.service).toBe('planning-issues');
      expect(consumer?.service).toBe('planning-audit');
    } else {
      expect(new Set(spans.map((s) => s.service))).toEqual(new Set(['planning-service']));
    }
  });

  it('telemetry: health probes are not traced', async () => {
    const before = collector.spans.length;
    await request(cluster.baseUrl, 'GET', '/ready');
    await request(cluster.baseUrl, 'GET', '/live');
    await new Promise((r) => setTimeout(r, 500));
    const probeSpans = collector.spans.slice(before).filter((s) => s.name.includes('/ready') || s.name.includes('/live'));
    expect(probeSpans).toHaveLength(0);
  });
});
