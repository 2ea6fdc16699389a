import { EventEmitter } from 'node:events';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { ERROR_CODES, ServiceError, type ErrorDetails } from '@planning/errors';
import { WorkspaceSchema, WorkspaceService, type Workspace } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { create } from '@bufbuild/protobuf';
import { startTelemetry, type Telemetry } from '@planning/telemetry';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDirectClient, createLocalServices, type LocalServices } from './direct.js';
import type { Principal } from './principal.js';
import { USER, captureLogs, workspaceImplementation } from './test-fixture.js';
import { callOptionsFrom, type CallContext, type RpcClient, type ServiceImplementation } from './types.js';
import { RenderedResponse, renderedBody, type ResponseView } from './views.js';

function setup(overrides: Partial<ServiceImplementation<typeof WorkspaceService>> = {}, options: { shutdownTimeoutMs?: number } = {}) {
  const logs = captureLogs();
  const services: LocalServices = createLocalServices({ logger: logs.logger, ...options });
  services.addService(WorkspaceService, workspaceImplementation(overrides));
  const client = createDirectClient(WorkspaceService, { services, defaultPrincipal: USER });
  return { services, client, logs };
}

async function serviceError(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ServiceError);
  return error as ServiceError;
}

describe('direct calls', () => {
  it('direct: typed calls reach the registered handler and return its messages', async () => {
    const { client } = setup();
    const created = await client.createWorkspace({ name: 'Launch Plan', planId: 'pro' });
    expect(created.$typeName).toBe('planning.issues.v1.CreateWorkspaceResponse');
    expect(created.workspace).toMatchObject({ id: 'ws-1', name: 'Launch Plan', slug: 'launch-plan', ownerId: 'user-1', planId: 'pro' });
    const page = await client.listWorkspaces({ limit: 1 });
    expect(page.workspaces.map((w) => w.id)).toEqual(['ws-1']);
    // Absent optional fields stay absent, present defaults are filled in, as after decoding.
    const all = await client.listWorkspaces({});
    expect(all.nextCursor).toBeUndefined();
    expect(all.workspaces[0]?.$typeName).toBe('planning.issues.v1.Workspace');
  });

  it('direct: the handler sees a copy of the principal, the deadline and an unaborted signal', async () => {
    let seen: CallContext | undefined;
    const { client } = setup({
      async getWorkspace(request, ctx) {
        seen = ctx;
        return { workspace: { id: request.id } };
      },
    });
    const agent: Principal & { extra?: string } = {
      type: 'api-key',
      id: 'key-7',
      keyId: 'key-7',
      agentId: 'agent-3',
      workspaceId: 'ws-1',
      isAdmin: false,
      scopes: ['agents:read'],
      extra: 'dropped',
    };
    const before = Date.now();
    await client.getWorkspace({ id: 'ws-1' }, { principal: agent });
    const { extra: _extra, ...known } = agent;
    expect(seen?.principal).toEqual(known);
    expect(seen?.principal).not.toBe(agent);
    expect(seen?.signal.aborted).toBe(false);
    expect(seen?.deadline?.getTime()).toBeGreaterThan(before + 5_000);
    expect(seen?.deadline?.getTime()).toBeLessThanOrEqual(Date.now() + 10_000);
  });

  it('direct: callOptionsFrom passes the principal and the remaining deadline on', async () => {
    const inner: CallContext[] = [];
    const holder: { client?: RpcClient<typeof WorkspaceService> } = {};
    const { client } = setup({
      async getWorkspace(request, ctx) {
        if (request.id === 'outer') return holder.client!.getWorkspace({ id: 'inner' }, callOptionsFrom(ctx));
        inner.push(ctx);
        return { workspace: { id: request.id } };
      },
    });
    holder.client = client;
    const response = await client.getWorkspace({ id: 'outer' }, { deadlineMs: 2_000 });
    expect(response.workspace?.id).toBe('inner');
    expect(inner[0]?.principal).toEqual(USER);
    expect(inner[0]?.deadline?.getTime()).toBeLessThan(Date.now() + 5_000);
  });

  it('direct: a malformed principal is rejected unauthorized before the handler runs', async () => {
    let called = false;
    const { client, logs } = setup({
      async getWorkspace() {
        called = true;
        return {};
      },
    });
    const error = await serviceError(client.getWorkspace({ id: 'x' }, { principal: { type: 'root', id: 'x' } as unknown as Principal }));
    expect(error.code).toBe('unauthorized');
    expect(called).toBe(false);
    expect(logs.lines().some((line) => line.msg === 'rpc call rejected')).toBe(true);
  });
});

describe('direct calls: isolation', () => {
  it('direct: the callee cannot change the caller’s request, nor the caller what the callee keeps', async () => {
    const kept: Workspace[] = [];
    let received: { name: string; labels?: string[] } | undefined;
    const { client } = setup({
      async createWorkspace(request) {
        received = request;
        // The callee changes what it was given…
        request.name = 'changed by the callee';
        const workspace = create(WorkspaceSchema, { id: 'ws-kept', name: 'Kept', status: 'active' });
        kept.push(workspace);
        return { workspace };
      },
      async listWorkspaces(request) {
        // …and keeps the request it was given.
        received = request as unknown as { name: string };
        return { workspaces: kept };
      },
    });
    const request = { name: 'Original', planId: 'pro' };
    const created = await client.createWorkspace(request);
    expect(request.name).toBe('Original');
    expect(received?.name).toBe('changed by the callee');

    // The caller changes the response it got: the callee's object stays as it was.
    created.workspace!.name = 'changed by the caller';
    created.workspace!.status = 'archived';
    const listed = await client.listWorkspaces({});
    expect(kept[0]).toMatchObject({ name: 'Kept', status: 'active' });
    expect(listed.workspaces[0]).toMatchObject({ name: 'Kept', status: 'active' });
    expect(listed.workspaces[0]).not.toBe(kept[0]);

    // The caller changes its request after the call: what the callee kept does not move.
    const query = { q: 'kept', limit: 5 };
    await client.listWorkspaces(query);
    query.q = 'changed by the caller after the call';
    expect((received as unknown as { q: string }).q).toBe('kept');
  });

  it('direct: a message the callee returns twice reaches the caller as two separate copies', async () => {
    const shared = create(WorkspaceSchema, { id: 'ws-s', name: 'Shared' });
    const { client } = setup({ getWorkspace: async () => ({ workspace: shared }) });
    const a = await client.getWorkspace({ id: 'ws-s' });
    const b = await client.getWorkspace({ id: 'ws-s' });
    a.workspace!.name = 'mine';
    expect(b.workspace?.name).toBe('Shared');
    expect(shared.name).toBe('Shared');
  });

  it('direct: a call with a response view answers the view’s text of the response, which nothing the callee keeps can change', async () => {
    const shared = create(WorkspaceSchema, { id: 'ws-s', name: 'Shared' });
    const { client } = setup({ getWorkspace: async () => ({ workspace: shared }) });
    const view: ResponseView<{ workspace?: Workspace }> = { name: 'test.name', render: (r) => JSON.stringify({ name: r.workspace?.name }) };
    const answer: unknown = await client.getWorkspace({ id: 'ws-s' }, { view });
    expect(answer).toBeInstanceOf(RenderedResponse);
    shared.name = 'changed by the callee';
    expect(JSON.parse((answer as RenderedResponse).body as string)).toEqual({ name: 'Shared' });
    // The same view run by the caller on the message gives the same bytes.
    const message = await client.getWorkspace({ id: 'ws-s' });
    expect(renderedBody(view, message)).toBe('{"name":"changed by the callee"}');
  });

  it('direct: a large rendered answer’s buffer is reused once its response has finished, and every view of the old answer then reads empty', async () => {
    let name = 'x'.repeat(100 * 1024);
    const { client } = setup({ getWorkspace: async () => ({ workspace: create(WorkspaceSchema, { id: 'ws-b', name }) }) });
    const seen: ArrayBufferLike[] = [];
    const view: ResponseView<{ workspace?: Workspace }> = {
      name: 'test.bytes',
      render: (r) => JSON.stringify({ name: r.workspace?.name }),
      renderBytes: (r, alloc) => {
        const encoded = new TextEncoder().encode(JSON.stringify({ name: r.workspace?.name }));
        const out = alloc!(encoded.length);
        out.set(encoded);
        seen.push(out.buffer);
        return out;
      },
    };
    const first = (await client.getWorkspace({ id: 'ws-b' }, { view })) as unknown as RenderedResponse;
    const body = first.body as Uint8Array;
    const kept = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    expect(JSON.parse(kept.toString('utf8'))).toEqual({ name });
    const response = new EventEmitter();
    first.recycleWhenSent(response);
    // Not before the response has finished.
    name = 'y'.repeat(90 * 1024);
    const second = (await client.getWorkspace({ id: 'ws-b' }, { view })) as unknown as RenderedResponse;
    expect(seen[1]).not.toBe(seen[0]);
    expect(body.byteLength).toBeGreaterThan(0);
    response.emit('finish');
    // Given back: the old views read empty; the next answer (written into a pooled buffer) is exactly its own.
    expect(body.byteLength).toBe(0);
    expect(kept.byteLength).toBe(0);
    name = 'z'.repeat(80 * 1024);
    const third = (await client.getWorkspace({ id: 'ws-b' }, { view })) as unknown as RenderedResponse;
    expect(JSON.parse(Buffer.from(third.body as Uint8Array).toString('utf8'))).toEqual({ name });
    expect((third.body as Uint8Array).byteLength).toBe(Buffer.byteLength(JSON.stringify({ name })));
    expect(JSON.parse(Buffer.from(second.body as Uint8Array).toString('utf8'))).toEqual({ name: 'y'.repeat(90 * 1024) });
  });

  it('direct: error details are the caller’s own copy', async () => {
    const details: ErrorDetails = { failedIds: ['t-1'] };
    const { client } = setup({
      async getWorkspace() {
        throw new ServiceError('invalid-input', 'no', details);
      },
    });
    const error = await serviceError(client.getWorkspace({ id: 'x' }));
    error.details.failedIds!.push('t-2');
    expect(details.failedIds).toEqual(['t-1']);
  });
});

describe('direct calls: errors', () => {
  const details: ErrorDetails = {
    reason: 'agent-busy',
    field: 'name',
    quota: { kind: 'agent-runs', limit: 10, used: 10, resetsAt: '2025-02-01T00:00:00.000Z' },
    retryAfterSeconds: 30,
    failedIds: ['t-1', 't-2'],
  };

  it.each(ERROR_CODES.map((code) => [code]))('direct: ServiceError %s reaches the caller with message and details', async (code) => {
    const { client } = setup({
      async getWorkspace() {
        throw new ServiceError(code, `failure ${code}`, details);
      },
    });
    const error = await serviceError(client.getWorkspace({ id: 'x' }));
    expect(error.code).toBe(code);
    expect(error.message).toBe(`failure ${code}`);
    expect(error.details).toEqual(details);
  });

  it('direct: an unexpected throw becomes internal with a generic message and the cause is logged', async () => {
    const { client, logs } = setup({
      async getWorkspace() {
        throw new Error('db password=hunter2 leaked in a stack');
      },
    });
    const error = await serviceError(client.getWorkspace({ id: 'x' }));
    expect(error.code).toBe('internal');
    expect(error.message).toBe('Internal error');
    expect(JSON.stringify(error)).not.toContain('hunter2');
    const logged = logs.lines().find((line) => line.msg === 'rpc handler failed');
    expect(logged?.rpc).toEqual({ service: 'planning.issues.v1.WorkspaceService', method: 'GetWorkspace' });
    expect(JSON.stringify(logged?.err)).toContain('hunter2');
  });

  it('direct: a handler result no message can hold becomes internal and is logged', async () => {
    const { client, logs } = setup({
      async getWorkspace() {
        return { workspace: { id: Symbol('not a string') as unknown as string } };
      },
    });
    const error = await serviceError(client.getWorkspace({ id: 'x' }));
    expect(error.code).toBe('internal');
    expect(logs.lines().some((line) => line.msg === 'rpc handler failed')).toBe(true);
  });

  it('direct: a request value its field cannot hold is invalid-input, and the handler never runs', async () => {
    let calls = 0;
    const { client } = setup({
      async listWorkspaces() {
        calls += 1;
        return { workspaces: [] };
      },
    });
    for (const bad of [{ limit: 3_000_000_000 }, { limit: 1.5 }, { q: 42 as unknown as string }]) {
      const error = await serviceError(client.listWorkspaces(bad));
      expect(error.code).toBe('invalid-input');
      expect(error.httpStatus).toBe(400);
    }
    expect(calls).toBe(0);
  });

  it('direct: a closed client and a service that is not registered are unavailable', async () => {
    const { client, services } = setup();
    client.close();
    expect((await serviceError(client.getWorkspace({ id: 'x' }))).code).toBe('unavailable');
    const { AuditService } = await import('@planning/proto/planning/audit/v1/audit_pb');
    const other = createDirectClient(AuditService, { services });
    const error = await serviceError(other.getDiagnostics({}));
    expect(error.code).toBe('unavailable');
    expect(error.message).toMatch(/service unavailable/);
  });
});

describe('direct calls: deadlines, cancellation and stop', () => {
  function waiting() {
    let resolveAborted: (reason: unknown) => void = () => {};
    const aborted = new Promise<unknown>((resolve) => (resolveAborted = resolve));
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => (started = resolve));
    const getWorkspace = (_request: unknown, ctx: CallContext) =>
      new Promise<never>((_resolve, reject) => {
        started();
        ctx.signal.addEventListener('abort', () => {
          resolveAborted(ctx.signal.reason);
          reject(ctx.signal.reason);
        });
      });
    return { getWorkspace, aborted, running };
  }

  it('direct: an exceeded deadline fails the call with unavailable and aborts the handler signal', async () => {
    const w = waiting();
    const { client } = setup({ getWorkspace: w.getWorkspace });
    const error = await serviceError(client.getWorkspace({ id: 'slow' }, { deadlineMs: 100 }));
    expect(error.code).toBe('unavailable');
    expect(error.message).toMatch(/deadline/i);
    expect(await w.aborted).toBeInstanceOf(ServiceError);
  });

  it('direct: aborting the caller signal cancels the call and aborts the handler signal', async () => {
    const w = waiting();
    const { client } = setup({ getWorkspace: w.getWorkspace });
    const controller = new AbortController();
    const call = client.getWorkspace({ id: 'slow' }, { signal: controller.signal });
    await w.running;
    controller.abort();
    expect((await serviceError(call)).message).toMatch(/cancelled/);
    await w.aborted;
  });

  it('direct: an already aborted signal fails without calling', async () => {
    let called = false;
    const { client } = setup({
      async getWorkspace() {
        called = true;
        return {};
      },
    });
    expect((await serviceError(client.getWorkspace({ id: 'x' }, { signal: AbortSignal.abort() }))).code).toBe('unavailable');
    expect(called).toBe(false);
  });

  it('direct: stop() lets an in-flight call finish, refuses new ones, and aborts what outlives the timeout', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { client, services } = setup({
      async getWorkspace(request) {
        await gate;
        return { workspace: { id: request.id } };
      },
    });
    const inflight = client.getWorkspace({ id: 'ws-1' });
    const stopped = services.stop();
    expect((await serviceError(client.getWorkspace({ id: 'late' }))).message).toMatch(/service unavailable/);
    release();
    expect((await inflight).workspace?.id).toBe('ws-1');
    await stopped;

    const w = waiting();
    const second = setup({ getWorkspace: w.getWorkspace }, { shutdownTimeoutMs: 50 });
    const stuck = second.client.getWorkspace({ id: 'stuck' });
    await w.running;
    await second.services.stop();
    expect((await serviceError(stuck)).code).toBe('unavailable');
    await w.aborted;
  });
});

describe('direct calls: trace context', () => {
  const exporter = new InMemorySpanExporter();
  const processor = new SimpleSpanProcessor({ exporter });
  let telemetry: Telemetry;
  beforeAll(() => {
    telemetry = startTelemetry({ serviceName: 'rpc-direct-test', env: {}, spanProcessors: [processor] });
  });
  afterAll(async () => telemetry.shutdown());
  beforeEach(() => exporter.reset());

  it('trace: a direct call has a CLIENT and a SERVER span in the caller’s trace, the handler inside the latter', async () => {
    let handlerTraceId: string | undefined;
    const { client } = setup({
      async getWorkspace(request) {
        handlerTraceId = trace.getActiveSpan()?.spanContext().traceId;
        if (request.id === 'missing') throw new ServiceError('not-found', 'Workspace not found');
        return { workspace: { id: request.id } };
      },
    });
    const callerTraceId = await trace.getTracer('test').startActiveSpan('caller', async (span) => {
      await client.getWorkspace({ id: 'ws-1' });
      span.end();
      return span.spanContext().traceId;
    });
    await processor.forceFlush();
    const spans = exporter.getFinishedSpans();
    const clientSpan = spans.find((s) => s.kind === SpanKind.CLIENT);
    const serverSpan = spans.find((s) => s.kind === SpanKind.SERVER);
    expect(serverSpan?.spanContext().traceId).toBe(callerTraceId);
    expect(serverSpan?.parentSpanContext?.spanId).toBe(clientSpan?.spanContext().spanId);
    expect(handlerTraceId).toBe(callerTraceId);
    expect(serverSpan?.name).toBe('planning.issues.v1.WorkspaceService/GetWorkspace');
    expect(serverSpan?.attributes).toMatchObject({ 'rpc.system': 'direct', 'rpc.method': 'GetWorkspace' });

    exporter.reset();
    await expect(client.getWorkspace({ id: 'missing' })).rejects.toMatchObject({ code: 'not-found' });
    await processor.forceFlush();
    const failed = exporter.getFinishedSpans();
    expect(failed.find((s) => s.kind === SpanKind.SERVER)?.attributes).toMatchObject({ 'error.type': 'not-found' });
    expect(failed.find((s) => s.kind === SpanKind.SERVER)?.status.code).toBe(SpanStatusCode.UNSET);
    expect(failed.find((s) => s.kind === SpanKind.CLIENT)?.status.code).toBe(SpanStatusCode.ERROR);
  });
});
