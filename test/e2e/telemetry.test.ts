import { randomBytes } from 'node:crypto';
import { parsePrometheusText, startOtlpReceiver, type OtlpReceiver, type ReceivedPoint, type ReceivedSpan } from '@planning/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createWorkspace, type TestKey } from '../support/auth.js';
import { ADMIN_EMAIL, SERVICES, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request } from '../support/http.js';

const SPAN_KIND = { server: 2, client: 3, producer: 4, consumer: 5 } as const;
const AGENT_SCOPES = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];

/**
 * Operators follow one request through every layer and read every process's metrics: an
 * OpenTelemetry collector stand-in (a real OTLP/HTTP protobuf endpoint decoding with the
 * OpenTelemetry proto definitions) receives the spans and metrics the processes export, and each
 * process's /metrics is scraped and parsed as Prometheus text.
 */
describe.each<Mode>(['all-in-one', 'distributed'])('telemetry (%s)', (mode) => {
  let cluster: Cluster;
  let receiver: OtlpReceiver;
  let cookie: string;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    cluster = await startCluster(mode, {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.httpEndpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_METRIC_EXPORT_INTERVAL: '500',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=e2e',
        CLAIM_SWEEP_INTERVAL_MS: '250',
        // Debug: each service writes a line per gRPC call and per event it handles.
        LOG_LEVEL: 'debug',
      },
    });
    cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await receiver?.stop();
  });

  const inTrace = (traceId: string): ReceivedSpan[] => receiver.spans.filter((s) => s.traceId === traceId);

  it('telemetry: one trace runs from the HTTP request through gRPC to the audit consumer', async () => {
    const traceId = randomBytes(16).toString('hex');
    const parentSpanId = randomBytes(8).toString('hex');
    const res = await request(cluster.baseUrl, 'POST', '/api/workspaces', {
      cookie,
      body: { name: `Traced ${mode}` },
      headers: { traceparent: `00-${traceId}-${parentSpanId}-01` },
    });
    expect(res.status).toBe(201);

    const spans = await eventually(
      async () => {
        const found = inTrace(traceId);
        // In all-in-one the gateway's thread and the services' thread export their spans separately, in either order.
        const ends =
          found.some((s) => s.name === 'process planning.issues.workspace.created' && s.service.endsWith(mode === 'all-in-one' ? 'service' : 'audit')) &&
          found.some((s) => s.name === 'POST /api/workspaces') &&
          found.some((s) => s.name.includes('WorkspaceService/CreateWorkspace') && s.kind === 2);
        return ends ? found : undefined;
      },
      30_000,
      'the audit consumer span in the caller trace',
    );

    const http = spans.find((s) => s.name === 'POST /api/workspaces');
    const rpcServer = spans.find((s) => s.name.includes('WorkspaceService/CreateWorkspace') && s.kind === SPAN_KIND.server);
    const producer = spans.find((s) => s.name === 'send planning.issues.workspace.created');
    const consumer = spans.find((s) => s.name === 'process planning.issues.workspace.created' && s.attributes['messaging.consumer.group.name'] === 'audit');
    expect(http?.parentSpanId).toBe(parentSpanId);
    expect(rpcServer).toBeDefined();
    expect(producer?.kind).toBe(SPAN_KIND.producer);
    expect(consumer?.kind).toBe(SPAN_KIND.consumer);
    expect(consumer?.parentSpanId).toBe(producer?.spanId);
    // Each hop is a child of something in the same trace: nothing started a trace of its own.
    const ids = new Set([parentSpanId, ...spans.map((s) => s.spanId)]);
    for (const span of spans) expect(ids.has(span.parentSpanId ?? '')).toBe(true);

    if (mode === 'distributed') {
      expect(http?.service).toBe('planning-gateway');
      expect(rpcServer?.service).toBe('planning-issues');
      expect(producer?.service).toBe('planning-issues');
      expect(consumer?.service).toBe('planning-audit');
    } else {
      expect(new Set(spans.map((s) => s.service))).toEqual(new Set(['planning-service']));
    }
    for (const span of spans) {
      expect(span.resource).toMatchObject({ 'service.version': expect.any(String), 'deployment.environment.name': 'e2e', 'deployment.environment': 'e2e' });
    }
  });

  it('telemetry: health probes are not traced', async () => {
    const before = receiver.spans.length;
    await request(cluster.baseUrl, 'GET', '/ready');
    await request(cluster.baseUrl, 'GET', '/live');
    await new Promise((r) => setTimeout(r, 500));
    const probeSpans = receiver.spans.slice(before).filter((s) => s.name.includes('/ready') || s.name.includes('/live'));
    expect(probeSpans).toHaveLength(0);
  });

  it('telemetry: the claim sweeper leaves no trace while it has nothing to do', async () => {
    // Several sweeps (every 250 ms) run in this second; none of them may show up.
    const before = receiver.spans.length;
    await new Promise((r) => setTimeout(r, 1_500));
    const sweeps = receiver.spans.slice(before).filter((s) => s.name === 'claims.sweep' || s.name.includes('ReleaseExpiredClaims'));
    expect(sweeps).toEqual([]);
  });

  it('telemetry: every process serves /metrics as Prometheus text, off the public port', async () => {
    for (const proc of cluster.processes.values()) {
      const res = await fetch(proc.metricsUrl);
      expect(res.status).toBe(200);
      const families = parsePrometheusText(await res.text());
      expect(families.get('target_info')?.samples[0]?.labels).toMatchObject({
        service_name: mode === 'all-in-one' ? 'planning-service' : `planning-${proc.name}`,
        deployment_environment_name: 'e2e',
      });
      // The public HTTP port does not serve metrics.
      expect((await fetch(`${proc.baseUrl}/metrics`)).status).toBe(404);
    }
  });

  it('telemetry: every service writes the trace and span ids on the lines of the work it does for a request', async () => {
    const traced = async (method: string, path: string, body?: unknown) => {
      const traceId = randomBytes(16).toString('hex');
      const res = await request(cluster.baseUrl, method, path, { cookie, ...(body ? { body } : {}), headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } });
      expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
      return traceId;
    };
    // Between them these reach every service: issues and audit (an event), imports-exports, agents-claims.
    const ws = (await createWorkspace(cluster.baseUrl, cookie, `Logged ${mode}`, 'pro')).id as string;
    const traces = [
      await traced('POST', '/api/projects', { workspaceId: ws, name: 'Logged' }),
      await traced('GET', `/api/issues/export?workspaceId=${ws}&format=json`),
      await traced('GET', `/api/agents/claims?workspaceId=${ws}`),
    ];
    for (const proc of cluster.processes.values()) {
      const lines = await eventually(
        async () => {
          const found = proc.output
            .filter((line) => line.startsWith('{'))
            .map((line) => JSON.parse(line) as Record<string, unknown>)
            .filter((line) => traces.includes(line.trace_id as string));
          return found.length > 0 ? found : undefined;
        },
        10_000,
        `${proc.name}: a log line in one of the request traces`,
      );
      for (const line of lines) expect(line.span_id).toMatch(/^[0-9a-f]{16}$/);
    }
  });

  if (mode !== 'distributed') return;

  describe('a claim over REST (distributed)', () => {
    let key: TestKey;
    let ws: string;
    let projectId: string;
    let claimTrace: string;
    let claimedIssue: string;

    const newIssue = async (title: string) => {
      const res = await request(cluster.baseUrl, 'POST', '/api/issues', { cookie, body: { projectId, title, status: 'ready' } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.data.id as string;
    };

    beforeAll(async () => {
      ws = (await createWorkspace(cluster.baseUrl, cookie, `Telemetry ${randomBytes(3).toString('hex')}`, 'pro')).id;
      const project = await request(cluster.baseUrl, 'POST', '/api/projects', { cookie, body: { workspaceId: ws, name: 'Observed' } });
      projectId = project.body.data.id;
      key = await createKey(cluster.baseUrl, cookie, ws, 'pro', AGENT_SCOPES, `observer-${randomBytes(3).toString('hex')}`);
    });

    it('telemetry: one trace runs gateway → agents-claims → issues → NATS → audit, producer and consumer linked', async () => {
      const issueId = await newIssue('Claimed under observation');
      claimedIssue = issueId;
      claimTrace = randomBytes(16).toString('hex');
      const res = await request(cluster.baseUrl, 'POST', '/api/agents/claim', {
        token: key.token,
        body: { issueId },
        headers: { traceparent: `00-${claimTrace}-${randomBytes(8).toString('hex')}-01` },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);

      const spans = await eventually(
        async () => {
          // Each process exports on its own schedule: wait for both ends of the trace.
          const found = inTrace(claimTrace);
          const ends = found.some((s) => s.service === 'planning-audit' && s.kind === SPAN_KIND.consumer) && found.some((s) => s.name === 'POST /api/agents/claim');
          return ends ? found : undefined;
        },
        30_000,
        'the audit consumer span in the claim trace',
      );
      const byService = (service: string) => spans.filter((s) => s.service === `planning-${service}`);
      expect(byService('gateway').find((s) => s.name === 'POST /api/agents/claim')?.kind).toBe(SPAN_KIND.server);
      expect(byService('agents-claims').some((s) => s.name.endsWith('ClaimService/ClaimWork') && s.kind === SPAN_KIND.server)).toBe(true);
      expect(byService('issues').some((s) => s.name.endsWith('/StartClaimedWork') && s.kind === SPAN_KIND.server)).toBe(true);

      // Every event the claim caused went out in a producer span and came in, in the audit
      // service, in a consumer span whose parent and link are that producer span.
      const producers = spans.filter((s) => s.kind === SPAN_KIND.producer);
      const auditConsumers = byService('audit').filter((s) => s.kind === SPAN_KIND.consumer);
      expect(producers.length).toBeGreaterThan(0);
      expect(auditConsumers.length).toBeGreaterThan(0);
      for (const consumer of auditConsumers) {
        const producer = producers.find((p) => p.spanId === consumer.parentSpanId);
        expect(producer, consumer.name).toBeDefined();
        expect(consumer.links).toEqual([expect.objectContaining({ traceId: claimTrace, spanId: producer!.spanId })]);
        expect(consumer.attributes).toMatchObject({ 'messaging.system': 'nats', 'messaging.destination.name': producer!.attributes['messaging.destination.name'] });
      }
      const ids = new Set(spans.map((s) => s.spanId));
      const roots = spans.filter((s) => !ids.has(s.parentSpanId ?? ''));
      expect(roots.map((s) => s.name)).toEqual(['POST /api/agents/claim']);
    });

    it('telemetry: the processes export the metrics an operator alerts on, with values', async () => {
      // A refusal (the task is claimed already), a heartbeat and a release, a claim that expires,
      // an MCP tool call, an import and an export: every metric gets a value.
      const again = await request(cluster.baseUrl, 'POST', '/api/agents/claim', { token: key.token, body: { issueId: await newIssue('Second') } });
      expect(again.status).toBe(409);
      expect((await request(cluster.baseUrl, 'POST', `/api/agents/claims/${claimedIssue}/heartbeat`, { token: key.token, body: {} })).status).toBe(200);
      expect((await request(cluster.baseUrl, 'POST', `/api/agents/claims/${claimedIssue}/release`, { token: key.token, body: {} })).status).toBe(200);
      expect((await request(cluster.baseUrl, 'PUT', '/api/agents/claim-policy', { cookie, body: { workspaceId: ws, leaseSeconds: 1 } })).status).toBe(200);
      expect((await request(cluster.baseUrl, 'POST', '/api/agents/claim', { token: key.token, body: { issueId: await newIssue('Expires') } })).status).toBe(200);
      const mcp = await request(cluster.baseUrl, 'POST', '/api/mcp', {
        token: key.token,
        headers: { accept: 'application/json, text/event-stream' },
        body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'service.list_ready_work', arguments: {} } },
      });
      expect(mcp.status, JSON.stringify(mcp.body)).toBe(200);
      // The call's span follows the MCP semantic conventions: SERVER, named `{method} {tool}`, with
      // the method, the tool and the JSON-RPC id, inside the HTTP request's span.
      const toolSpan = await eventually(
        async () => receiver.spans.find((s) => s.service === 'planning-gateway' && s.name === 'tools/call list_ready_work'),
        30_000,
        'the MCP tools/call span',
      );
      expect(toolSpan.kind).toBe(SPAN_KIND.server);
      expect(toolSpan.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'list_ready_work', 'gen_ai.operation.name': 'execute_tool', 'jsonrpc.request.id': '1' });
      expect(toolSpan.attributes['error.type']).toBeUndefined();
      expect(inTrace(toolSpan.traceId).find((s) => s.spanId === toolSpan.parentSpanId)?.name).toBe('POST /api/mcp');
      const schema = await request(cluster.baseUrl, 'GET', '/api/imports/schema', { cookie });
      const preview = await request(cluster.baseUrl, 'POST', '/api/imports/preview', {
        cookie,
        headers: { 'idempotency-key': randomBytes(8).toString('hex') },
        body: {
          plan: 'pro',
          format: 'json',
          workspaceId: ws,
          payload: { schemaId: 'service.issue-import', schemaVersion: schema.body.data.schemaVersion, issues: [{ workspaceId: ws, projectId, title: 'Imported' }] },
        },
      });
      expect(preview.status, JSON.stringify(preview.body)).toBe(200);
      const commit = await request(cluster.baseUrl, 'POST', '/api/imports/commit', {
        cookie,
        headers: { 'idempotency-key': randomBytes(8).toString('hex') },
        body: { previewId: preview.body.data.id },
      });
      expect(commit.status, JSON.stringify(commit.body)).toBe(200);
      expect((await fetch(`${cluster.baseUrl}/api/issues/export?workspaceId=${ws}&format=json`, { headers: { cookie } })).status).toBe(200);

      const sum = (points: ReceivedPoint[]) => points.reduce((n, p) => n + (p.type === 'histogram' ? (p.count ?? 0) : (p.value ?? 0)), 0);
      const latest = (name: string, service: string, attributes: Record<string, unknown> = {}) => {
        // Cumulative points: the last export of each process holds the totals.
        const points = receiver.points.filter(
          (p) => p.name === name && p.service === `planning-${service}` && Object.entries(attributes).every(([k, v]) => p.attributes[k] === v),
        );
        const last = points.reduce((t, p) => (p.timeUnixNano > t ? p.timeUnixNano : t), 0n);
        return points.filter((p) => p.timeUnixNano === last);
      };
      const expected: [string, string, Record<string, unknown>][] = [
        ['http.server.request.duration', 'gateway', { 'http.route': '/api/agents/claim' }],
        ['rpc.client.call.duration', 'gateway', { 'rpc.method': 'planning.claims.v1.ClaimService/ClaimWork' }],
        ['rpc.server.call.duration', 'agents-claims', { 'rpc.method': 'planning.claims.v1.ClaimService/ClaimWork' }],
        ['rpc.server.call.duration', 'issues', {}],
        ['mcp.server.operation.duration', 'gateway', { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'list_ready_work' }],
        ['planning.claims.started', 'agents-claims', {}],
        ['planning.claims.refused', 'agents-claims', { 'planning.claim.refusal_reason': 'agent-busy' }],
        ['planning.claims.lease.remaining', 'agents-claims', { 'planning.claim.operation': 'renew' }],
        ['planning.claims.lease.remaining', 'agents-claims', { 'planning.claim.operation': 'release' }],
        ['planning.claims.expired', 'agents-claims', {}],
        ['planning.claims.sweep.duration', 'agents-claims', { 'planning.sweep.result': 'worked' }],
        ['planning.rate_limit.decisions', 'gateway', { 'planning.plan': 'pro', 'planning.rate_limit.decision': 'allowed' }],
        ['planning.bus.publish.lag', 'issues', {}],
        ['planning.bus.consume.lag', 'audit', { 'messaging.consumer.group.name': 'audit' }],
        ['messaging.process.duration', 'audit', {}],
        ['planning.audit.write.lag', 'audit', {}],
        ['planning.store.flush.duration', 'issues', { 'planning.store': 'issues' }],
        ['planning.store.flush.commits', 'agents-claims', { 'planning.store': 'agents-claims' }],
        ['planning.import.rows', 'imports-exports', { 'planning.import.result': 'created' }],
        ['planning.export.bytes', 'imports-exports', { 'planning.export.format': 'json' }],
      ];
      const missing = await eventually(
        async () => {
          const zero = expected.filter(([name, service, attributes]) => !(sum(latest(name, service, attributes)) > 0)).map(([n, s, a]) => `${s} ${n} ${JSON.stringify(a)}`);
          return zero.length === 0 ? [] : undefined;
        },
        30_000,
        'every metric with a value',
      ).catch(() =>
        expected.filter(([name, service, attributes]) => !(sum(latest(name, service, attributes)) > 0)).map(([n, s, a]) => `${s} ${n} ${JSON.stringify(a)}`),
      );
      expect(missing).toEqual([]);
      // The sweep that ended the expired claim kept its trace (idle sweeps keep none, above): a
      // root span of its own, with the calls it made to end the claim inside it.
      const sweep = await eventually(
        async () => receiver.spans.find((s) => s.service === 'planning-agents-claims' && s.name === 'claims.sweep'),
        30_000,
        'the trace of the sweep that ended the claim',
      );
      expect(sweep.parentSpanId).toBeUndefined();
      expect(inTrace(sweep.traceId).filter((s) => s.parentSpanId === sweep.spanId).length).toBeGreaterThan(0);
      // Active claims rose while the claim was held (it ended since).
      expect(Math.max(...receiver.points.filter((p) => p.name === 'planning.claims.active' && p.service === 'planning-agents-claims').map((p) => p.value ?? 0))).toBeGreaterThan(0);
      // Gauges that are zero when all is well are reported all the same.
      for (const service of ['issues', 'gateway', 'agents-claims', 'imports-exports']) {
        expect(latest('planning.outbox.pending', service).length, service).toBeGreaterThan(0);
        expect(latest('planning.outbox.lag', service).length, service).toBeGreaterThan(0);
      }
      // The same figures are scraped from the agents-claims process's own /metrics.
      const scraped = parsePrometheusText(await (await fetch(cluster.process('agents-claims').metricsUrl)).text());
      expect(scraped.get('planning_claims_started_total')?.samples[0]?.value).toBeGreaterThanOrEqual(1);
      expect(SERVICES.length).toBe(5);
    }, 60_000);
  });
});
