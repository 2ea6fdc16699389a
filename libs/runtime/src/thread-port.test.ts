import { EventEmitter } from 'node:events';
import { MessageChannel } from 'node:worker_threads';
import { createInProcessBus, type EventEnvelope } from '@planning/bus';
import { ServiceError } from '@planning/errors';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { BytePool, createLocalServices, POOLED_MIN_BYTES, RenderedResponse, renderedBody, type CallContext, type Principal, type ResponseView, type ServiceImplementation } from '@planning/rpc';
import { createLogger } from '@planning/telemetry';
import { afterEach, describe, expect, it } from 'vitest';
import { createThreadPortClient, serveThreadPort } from './thread-port.js';

const USER: Principal = { type: 'user', id: 'usr_1', userId: 'usr_1', isAdmin: false, scopes: [] };
const channels: MessageChannel[] = [];
afterEach(() => {
  for (const c of channels.splice(0)) {
    c.port1.close();
    c.port2.close();
  }
});

type ListAnswer = { workspaces: { id: string; name: string }[] };
const NAMES_VIEW: ResponseView<ListAnswer> = {
  name: 'test.workspace-names',
  render: (r) => JSON.stringify({ names: r.workspaces.map((w) => w.name) }),
};

/** A view that renders bytes, keeping what it handed out (to see the transfer take it). */
const handedOut: Uint8Array[] = [];
const BYTES_VIEW: ResponseView<ListAnswer> = {
  name: 'test.workspace-names-bytes',
  render: (r) => JSON.stringify({ names: r.workspaces.map((w) => w.name) }),
  renderBytes: (r) => {
    const bytes = new TextEncoder().encode(JSON.stringify({ names: r.workspaces.map((w) => w.name) }));
    handedOut.push(bytes);
    return bytes;
  },
};

/** A view that writes its bytes where the transport says (a pooled buffer when large). */
const written: Uint8Array[] = [];
const POOLED_VIEW: ResponseView<ListAnswer> = {
  name: 'test.workspace-names-pooled',
  render: (r) => JSON.stringify({ names: r.workspaces.map((w) => w.name) }),
  renderBytes: (r, alloc) => {
    const encoded = new TextEncoder().encode(JSON.stringify({ names: r.workspaces.map((w) => w.name) }));
    const out = alloc ? alloc(encoded.length) : new Uint8Array(encoded.length);
    out.set(encoded);
    written.push(out);
    return out;
  },
};

const BROKEN_VIEW: ResponseView<ListAnswer> = {
  name: 'test.broken',
  render: () => {
    throw new Error('the view failed');
  },
};

function setup(handlers: Partial<ServiceImplementation<typeof WorkspaceService>>) {
  const services = createLocalServices({ logger: createLogger({ name: 'thread-port-test', level: 'silent' }) });
  const fail = async (): Promise<never> => {
    throw new ServiceError('invalid-input', 'not in this test');
  };
  const implementation = Object.fromEntries(WorkspaceService.methods.map((m) => [m.localName, fail])) as unknown as ServiceImplementation<typeof WorkspaceService>;
  services.addService(WorkspaceService, { ...implementation, ...handlers });
  const bus = createInProcessBus();
  const channel = new MessageChannel();
  channels.push(channel);
  const views = new Map([NAMES_VIEW, BYTES_VIEW, POOLED_VIEW, BROKEN_VIEW].map((v) => [v.name, v as unknown as ResponseView]));
  serveThreadPort(channel.port2, { services, bus: () => bus, ready: async () => ({ ok: true, notRunning: [], details: { here: true } }), logger: { error() {} }, views });
  const port = createThreadPortClient(channel.port1);
  return { port, bus, client: port.client(WorkspaceService) };
}

describe('thread port', () => {
  it('thread port: a call runs the handler with the principal and deadline, and the messages are copies', async () => {
    let seen: { request: { name: string }; ctx: CallContext } | undefined;
    const kept = { id: 'ws_1', name: 'Kept' };
    const { client } = setup({
      async createWorkspace(request, ctx) {
        seen = { request, ctx };
        request.name = 'changed by the callee';
        return { workspace: kept };
      },
    });
    const request = { name: 'Original' };
    const res = await client.createWorkspace(request, { principal: USER, deadlineMs: 5_000 });
    expect(request.name).toBe('Original');
    expect(seen?.ctx.principal).toEqual(USER);
    expect(seen?.ctx.deadline!.getTime()).toBeLessThanOrEqual(Date.now() + 5_000);
    res.workspace!.name = 'changed by the caller';
    expect(kept.name).toBe('Kept');
    expect(res.$typeName).toBe('planning.issues.v1.CreateWorkspaceResponse');
  });

  it('thread port: a call with a response view answers the view’s text, rendered from the response message; the callee keeps nothing the caller holds', async () => {
    const kept = [{ id: 'ws_1', name: 'Första "quoted"' }];
    const { client } = setup({ listWorkspaces: async () => ({ workspaces: kept }) });
    const answer: unknown = await client.listWorkspaces({}, { principal: USER, view: NAMES_VIEW });
    expect(answer).toBeInstanceOf(RenderedResponse);
    expect(JSON.parse((answer as RenderedResponse).body as string)).toEqual({ names: ['Första "quoted"'] });
    // Rendered from the response as the handler answered it: what the callee changes later is not in it.
    kept[0]!.name = 'changed by the callee';
    expect(JSON.parse((answer as RenderedResponse).body as string)).toEqual({ names: ['Första "quoted"'] });
    const again = (await client.listWorkspaces({}, { principal: USER, view: NAMES_VIEW })) as unknown as RenderedResponse;
    expect(JSON.parse(again.body as string)).toEqual({ names: ['changed by the callee'] });
  });

  it('thread port: a view that renders bytes answers them, transferred: the services side keeps no access to them', async () => {
    const { client } = setup({ listWorkspaces: async () => ({ workspaces: [{ id: 'ws_1', name: 'Första "quoted"' }] }) });
    const answer = (await client.listWorkspaces({}, { principal: USER, view: BYTES_VIEW })) as unknown as RenderedResponse;
    expect(answer).toBeInstanceOf(RenderedResponse);
    expect(answer.body).toBeInstanceOf(Uint8Array);
    expect(JSON.parse(Buffer.from(answer.body as Uint8Array).toString('utf8'))).toEqual({ names: ['Första "quoted"'] });
    // Transferred, not copied: the buffer the view made is detached on its side.
    expect(handedOut.at(-1)!.byteLength).toBe(0);
    expect(renderedBody(BYTES_VIEW, { workspaces: [{ id: 'ws_1', name: 'Första "quoted"' }] } as unknown as ListAnswer)).toBe(
      Buffer.from(answer.body as Uint8Array).toString('utf8'),
    );
  });

  it('thread port: a large page’s buffer goes back to the services side once its response has finished, and the next page is written into it exactly', async () => {
    let names = ['a'.repeat(POOLED_MIN_BYTES * 1.5)];
    const { client } = setup({ listWorkspaces: async () => ({ workspaces: names.map((name, i) => ({ id: `ws_${i}`, name })) }) });
    const text = (answer: RenderedResponse) => Buffer.from(answer.body as Uint8Array).toString('utf8');
    const first = (await client.listWorkspaces({}, { principal: USER, view: POOLED_VIEW })) as unknown as RenderedResponse;
    const body = first.body as Uint8Array;
    expect(JSON.parse(text(first))).toEqual({ names });
    // A view onto a buffer of the size's class, transferred: the services side has no access left.
    expect(body.buffer.byteLength).toBe(2 ** Math.ceil(Math.log2(body.byteLength)));
    expect(written.at(-1)!.byteLength).toBe(0);

    // Cut short (no `finish`): the buffer stays with the caller.
    const response = new EventEmitter();
    first.recycleWhenSent(response);
    response.emit('close');
    await new Promise((r) => setTimeout(r, 10));
    expect(body.byteLength).toBeGreaterThan(0);
    // Written out: it goes back (detached here), once.
    response.emit('finish');
    await new Promise((r) => setTimeout(r, 10));
    expect(body.byteLength).toBe(0);
    expect(() => response.emit('finish')).not.toThrow();

    // The next page, shorter, is written into the buffer given back: its view holds exactly its own bytes.
    names = ['b'.repeat(POOLED_MIN_BYTES * 1.2), 'c'];
    const second = (await client.listWorkspaces({}, { principal: USER, view: POOLED_VIEW })) as unknown as RenderedResponse;
    expect(JSON.parse(text(second))).toEqual({ names });
    expect((second.body as Uint8Array).byteLength).toBe(Buffer.byteLength(JSON.stringify({ names })));
    expect((second.body as Uint8Array).buffer.byteLength).toBe(128 * 1024);

    // A small answer is its own array and is never given back.
    names = ['small'];
    const small = (await client.listWorkspaces({}, { principal: USER, view: POOLED_VIEW })) as unknown as RenderedResponse;
    const smallResponse = new EventEmitter();
    small.recycleWhenSent(smallResponse);
    smallResponse.emit('finish');
    await new Promise((r) => setTimeout(r, 10));
    expect(JSON.parse(text(small))).toEqual({ names });
  });

  it('byte pool: exact views onto buffers of power-of-two classes, reused once given back, within its bound', () => {
    const pool = new BytePool(512 * 1024);
    const small = pool.take(1000);
    expect(small.byteLength).toBe(1000);
    expect(small.buffer.byteLength).toBe(1000);
    const a = pool.take(100 * 1024);
    expect(a.byteLength).toBe(100 * 1024);
    expect(a.buffer.byteLength).toBe(128 * 1024);
    pool.give(a.buffer as ArrayBuffer);
    expect(pool.size).toBe(128 * 1024);
    const b = pool.take(70 * 1024);
    expect(b.buffer).toBe(a.buffer);
    expect(b.byteLength).toBe(70 * 1024);
    expect(pool.size).toBe(0);
    // Not its own make: too small, or not a power of two.
    pool.give(small.buffer as ArrayBuffer);
    pool.give(new ArrayBuffer(100 * 1024));
    expect(pool.size).toBe(0);
    // Bounded: what would pass the bound is left to the garbage collector.
    for (let i = 0; i < 3; i++) pool.give(new ArrayBuffer(256 * 1024));
    expect(pool.size).toBe(512 * 1024);
  });

  it('thread port: a view the services side does not know answers the message, which the caller renders to the same bytes', async () => {
    const { client } = setup({ listWorkspaces: async () => ({ workspaces: [{ id: 'ws_1', name: 'One' }] }) });
    const unknown: ResponseView<ListAnswer> = { ...NAMES_VIEW, name: 'test.not-registered' };
    const answer = await client.listWorkspaces({}, { principal: USER, view: unknown });
    expect(answer).not.toBeInstanceOf(RenderedResponse);
    const rendered = (await client.listWorkspaces({}, { principal: USER, view: NAMES_VIEW })) as unknown as RenderedResponse;
    expect(renderedBody(unknown, answer as unknown as ListAnswer)).toBe(rendered.body);
  });

  it('thread port: a call with a view still fails with the handler’s error, and a view that throws is internal', async () => {
    const { client } = setup({
      getWorkspace: async () => {
        throw new ServiceError('not-found', 'Workspace not found');
      },
      listWorkspaces: async () => ({ workspaces: [{ id: 'ws_1', name: 'One' }] }),
    });
    await expect(client.getWorkspace({ id: 'x' }, { view: NAMES_VIEW as unknown as ResponseView<never> })).rejects.toMatchObject({ code: 'not-found' });
    await expect(client.listWorkspaces({}, { view: BROKEN_VIEW })).rejects.toMatchObject({ code: 'internal', message: 'Internal error' });
  });

  it('thread port: errors arrive with code, message and details; a bad request value never crosses', async () => {
    let calls = 0;
    const { client } = setup({
      async getWorkspace() {
        calls += 1;
        throw new ServiceError('not-found', 'Workspace not found', { field: 'id' });
      },
    });
    await expect(client.getWorkspace({ id: 'x' })).rejects.toMatchObject({ code: 'not-found', message: 'Workspace not found', details: { field: 'id' } });
    await expect(client.listWorkspaces({ limit: 3_000_000_000 })).rejects.toMatchObject({ code: 'invalid-input' });
    expect(calls).toBe(1);
  });

  it('thread port: a result that cannot cross the port is internal, not a hang', async () => {
    const { client } = setup({ getWorkspace: async () => ({ workspace: { id: (() => 'ws') as unknown as string } }) });
    await expect(client.getWorkspace({ id: 'x' }, { deadlineMs: 5_000 })).rejects.toMatchObject({ code: 'internal' });
  });

  it('thread port: a deadline fails the call with unavailable and aborts the handler', async () => {
    let aborted: unknown;
    const { client } = setup({
      getWorkspace: (_request, ctx) =>
        new Promise((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => {
            aborted = ctx.signal.reason;
            reject(ctx.signal.reason);
          }),
        ),
    });
    await expect(client.getWorkspace({ id: 'slow' }, { deadlineMs: 100 })).rejects.toMatchObject({ code: 'unavailable', message: expect.stringMatching(/deadline/) });
    await expect.poll(() => aborted).toBeInstanceOf(ServiceError);
  });

  it('thread port: publishes reach the other side’s bus, readiness is asked there, and a closed port refuses calls', async () => {
    const { port, bus, client } = setup({});
    const received: EventEnvelope[] = [];
    await bus.consume({ durable: 'test', filterSubjects: ['planning.>'] }, async (d) => {
      received.push(d.event);
    });
    const event: EventEnvelope = { id: 'evt_1', type: 'thing.created', subject: 'planning.gateway.thing.created', source: 'gateway', occurredAt: new Date().toISOString(), data: {} };
    expect(await port.bus.publish(event, {})).toEqual({ duplicate: false });
    expect(await port.bus.publish(event, {})).toEqual({ duplicate: true });
    await expect.poll(() => received.length).toBe(1);
    expect(await port.ready()).toEqual({ ok: true, notRunning: [], details: { here: true } });
    port.close('gone');
    await expect(client.getWorkspace({ id: 'x' })).rejects.toMatchObject({ code: 'unavailable' });
  });
});
