import type { DescService } from '@bufbuild/protobuf';
import { createRemoteAccess } from '@planning/access';
import { createInProcessBus, type EventEnvelope } from '@planning/bus';
import { ServiceError } from '@planning/errors';
import { createPlanningHarness, type PlanningHarness, type TestClient } from '@planning/issues/testing/planning-harness';
import { createUsageMeter, type UsageMeter } from '@planning/metering';
import { createOutbox } from '@planning/outbox';
import { ANONYMOUS_PRINCIPAL, type Principal, type RpcCallOptions, type RpcClient } from '@planning/rpc';
import { createEmbeddedStore, type DocumentStore, type EmbeddedDocumentStore } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CHUNK_TTL_MS, ExportHistoryRepository } from '../store/export-history.js';
import { createHmac } from 'node:crypto';
import { CHUNK_BYTES, ExportsCore } from './exports-core.js';
import { shortHash } from './filters.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const none = { status: [], priority: [], labels: [] };

/** The harness's in-process services as the gRPC clients the core uses. */
function asRpc<S extends DescService>(client: TestClient<S>): RpcClient<S> {
  return new Proxy(client as object, {
    get: (target, name) =>
      name === 'close'
        ? () => {}
        : (request: unknown, options: RpcCallOptions = {}) =>
            (target as Record<string | symbol, (r: unknown, p: Principal) => Promise<unknown>>)[name]!(request, options.principal ?? ANONYMOUS_PRINCIPAL),
  }) as RpcClient<S>;
}

describe('exports: core', () => {
  let planning: PlanningHarness;
  let store: EmbeddedDocumentStore;
  let meter: UsageMeter;
  let history: ExportHistoryRepository;
  let events: () => Promise<EventEnvelope[]>;
  /** Runs before every SearchTasks page the core asks for (to slow or hold an export). */
  let beforeSearch: () => Promise<void> = async () => {};
  let listWorkspaceCalls = 0;
  const make = async (options: { maxBytes?: number; deadlineMs?: number; maxConcurrent?: number } = {}) => {
    const outbox = await createOutbox({ store: store as DocumentStore, bus: createInProcessBus(), source: 'imports-exports', logger: quiet });
    const tasks = asRpc(planning.tasks);
    const workspaces = asRpc(planning.workspaceRpc);
    return new ExportsCore({
      history,
      outbox,
      meter,
      access: createRemoteAccess(asRpc(planning.workspaceRpc)),
      issues: {
        workspaces: new Proxy(workspaces, {
          get: (t, n) => {
            if (n === 'listWorkspaces') listWorkspaceCalls++;
            return Reflect.get(t, n) as unknown;
          },
        }),
        tasks: new Proxy(tasks, {
          get: (t, n) =>
            n === 'searchTasks'
              ? async (...args: Parameters<typeof tasks.searchTasks>) => {
                  await beforeSearch();
                  return t.searchTasks(...args);
                }
              : (Reflect.get(t, n) as unknown),
        }),
        taskRecords: asRpc(planning.records),
        projects: asRpc(planning.projects),
        programs: asRpc(planning.programs),
      },
      clock: () => new Date(planning.now),
      retentionSeconds: 30 * 86_400,
      maxBytes: options.maxBytes ?? 64 * 1_048_576,
      deadlineMs: options.deadlineMs ?? 120_000,
      maxConcurrentPerWorkspace: options.maxConcurrent ?? 2,
    });
  };
  const slugOf = async (id: string) => (await planning.workspaceRpc.getWorkspace({ id }, planning.admin)).workspace!.slug;
  const nothingRecorded = async (ws: string) => {
    expect(await meter.used(ws, 'exports')).toBe(0);
    expect((await core0().history(owner(), { workspaceId: ws })).entries).toEqual([]);
    expect((await events()).filter((e) => e.type === 'export.created')).toEqual([]);
  };
  let core0: () => ExportsCore;
  const seed = async (planId: 'beginner' | 'pro' | 'enterprise', tasks: { title: string; description?: string }[]) => {
    const ws = await planning.workspace({ ownerId: 'usr_owner', planId });
    const { project } = await planning.projects.createProject({ workspaceId: ws, name: 'P' }, planning.user('usr_owner'));
    for (const t of tasks) await planning.tasks.createTask({ projectId: project!.id, ...t }, planning.user('usr_owner'));
    return ws;
  };
  const owner = () => ({ principal: planning.user('usr_owner') });
  const code = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
      return 'ok';
    } catch (err) {
      if (err instanceof ServiceError) return err.code;
      throw err;
    }
  };

  beforeEach(async () => {
    beforeSearch = async () => {};
    listWorkspaceCalls = 0;
    planning = await createPlanningHarness({ now: new Date() });
    // The store's TTL sweep reads the same clock as the service.
    store = createEmbeddedStore({ clock: () => planning.now });
    meter = await createUsageMeter(store);
    history = await ExportHistoryRepository.open(store);
    events = async () =>
      (await store.collection<{ _id: string; event: EventEnvelope }>('outbox').find({}, { sort: { _id: 1 } })).map((r) => r.event);
    const plain = await make();
    core0 = () => plain;
  });

  afterEach(async () => {
    await planning.close();
    await store.close();
  });

  it('exports: an artifact over the maximum is 413, gives its quota back and records nothing', async () => {
    const ws = await seed('pro', Array.from({ length: 5 }, (_, i) => ({ title: `T${i}`, description: 'd'.repeat(800) })));
    const core = await make({ maxBytes: 2_000 });
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'json', filters: none }))).toBe('payload-too-large');
    expect(await meter.used(ws, 'exports')).toBe(0);
    expect((await core.history(owner(), { workspaceId: ws })).entries).toEqual([]);
    expect((await events()).filter((e) => e.type === 'export.created')).toEqual([]);
  });

  it('exports: a backup over the maximum stops while reading tasks, before their sub-records', async () => {
    const ws = await seed('enterprise', Array.from({ length: 5 }, (_, i) => ({ title: `T${i}`, description: 'd'.repeat(800) })));
    const core = await make({ maxBytes: 2_000 });
    let recordCalls = 0;
    const records = planning.records;
    planning.records = new Proxy(records, { get: (t, n) => (recordCalls++, Reflect.get(t, n)) });
    const coreWithSpy = await make({ maxBytes: 2_000 });
    expect(await code(coreWithSpy.create(owner(), { workspaceId: ws, format: 'backup', filters: none }))).toBe('payload-too-large');
    expect(recordCalls).toBe(0);
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'backup', plan: 'pro', filters: none }))).toBe('invalid-input');
    expect(await meter.used(ws, 'exports')).toBe(0);
  });

  it('exports: a failure while recording gives the quota back and leaves no entry or event', async () => {
    const ws = await seed('pro', [{ title: 'One' }]);
    const core = await make();
    const insert = history.insert.bind(history);
    history.insert = () => Promise.reject(new Error('disk full'));
    await expect(core.create(owner(), { workspaceId: ws, format: 'json', filters: none })).rejects.toThrow('disk full');
    expect(await meter.used(ws, 'exports')).toBe(0);
    expect((await events()).filter((e) => e.type === 'export.created')).toEqual([]);
    history.insert = insert;
    const ok = await core.create(owner(), { workspaceId: ws, format: 'json', filters: none });
    expect(ok.entry.auditEventIds).toEqual([(await events()).find((e) => e.type === 'export.created')!.id]);
    expect(await meter.used(ws, 'exports')).toBe(1);
  });

  it('exports: refusals write export.denied events with ids and reason only', async () => {
    const ws = await seed('beginner', [{ title: 'Secret title' }]);
    const core = await make();
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'csv', filters: none }))).toBe('not-entitled');
    const denied = (await events()).filter((e) => e.type === 'export.denied');
    expect(denied).toHaveLength(1);
    expect(denied[0]).toMatchObject({ workspaceId: ws, actor: { type: 'user', id: 'usr_owner' }, data: { outcome: 'denied', reason: 'not-entitled', format: 'csv' } });
    expect(JSON.stringify(denied)).not.toContain('Secret title');
    expect(await meter.used(ws, 'exports')).toBe(0);
  });

  it('exports: a large artifact comes in chunks only its creator can read, removed after the last', async () => {
    const ws = await seed('enterprise', Array.from({ length: 60 }, (_, i) => ({ title: `Big ${i}`, description: 'x'.repeat(19_000) })));
    const core = await make();
    const result = await core.create(owner(), { workspaceSlug: undefined, workspaceId: ws, format: 'json', filters: none });
    expect(result.chunks.length).toBeGreaterThan(1);
    expect(result.chunks[0]!.length).toBe(CHUNK_BYTES);
    const id = result.entry._id;
    expect(await code(core.readChunk(planning.user('usr_other'), id, 1))).toBe('not-found');
    const parts = [result.chunks[0]!];
    for (let i = 1; i < result.chunks.length; i++) parts.push(await core.readChunk(planning.user('usr_owner'), id, i));
    expect(Buffer.concat(parts).equals(result.artifact.bytes)).toBe(true);
    expect(JSON.parse(Buffer.concat(parts).toString('utf8')).issues).toHaveLength(60);
    expect(await code(core.readChunk(planning.user('usr_owner'), id, 1))).toBe('not-found');
  });

  it('exports: retention: the TTL sweep removes artifact chunks nobody fetched, then entries past their retention', async () => {
    const ws = await seed('enterprise', Array.from({ length: 60 }, (_, i) => ({ title: `Big ${i}`, description: 'x'.repeat(19_000) })));
    const core = await make();
    const result = await core.create(owner(), { workspaceId: ws, format: 'json', filters: none });
    const chunks = store.collection('export_artifact_chunks');
    const entries = store.collection('export_history');
    expect(await chunks.countDocuments({})).toBe(result.chunks.length - 1);
    expect(result.chunks.length).toBeGreaterThan(1);
    await store.sweepExpired();
    expect(await chunks.countDocuments({})).toBe(result.chunks.length - 1);
    planning.now = new Date(planning.now.getTime() + CHUNK_TTL_MS + 1);
    await store.sweepExpired();
    expect(await chunks.countDocuments({})).toBe(0);
    expect(await entries.countDocuments({})).toBe(1);
    planning.now = new Date(planning.now.getTime() + 30 * 86_400_000);
    await store.sweepExpired();
    expect(await entries.countDocuments({})).toBe(0);
  });

  it('exports: a viewer or member cannot export; an admin-scoped token of the workspace can', async () => {
    const ws = await seed('enterprise', [{ title: 'One' }]);
    await planning.addMember(ws, 'usr_member', 'member');
    const core = await make();
    expect(await code(core.create({ principal: planning.user('usr_member') }, { workspaceId: ws, format: 'json', filters: none }))).toBe('forbidden');
    expect(await code(core.create({ principal: planning.token(ws, ['issues:read']) }, { workspaceId: ws, format: 'json', filters: none }))).toBe('forbidden');
    expect(await code(core.create({ principal: planning.token('ws_other', ['admin']) }, { workspaceId: ws, format: 'json', filters: none }))).toBe('not-found');
    const byToken = await core.create({ principal: planning.token(ws, ['admin']) }, { workspaceId: ws, format: 'json', filters: none });
    expect(byToken.entry.issueCount).toBe(1);
    expect(byToken.entry.actor).toEqual({ type: 'api-key', id: 'key_x' });
  });

  it('exports: expired entries are not listed, whether or not they were swept', async () => {
    const ws = await seed('pro', [{ title: 'One' }]);
    const core = await make();
    await core.create(owner(), { workspaceId: ws, format: 'json', filters: none });
    expect((await core.history(owner(), { workspaceId: ws })).entries).toHaveLength(1);
    planning.now = new Date(planning.now.getTime() + 30 * 86_400_000 + 1);
    expect((await core.history(owner(), { workspaceId: ws })).entries).toEqual([]);
  });

  it('exports: an export whose caller goes away while it is built is neither recorded nor counted', async () => {
    const ws = await seed('pro', [{ title: 'One' }]);
    const core = await make();
    const caller = new AbortController();
    beforeSearch = async () => {
      caller.abort(new ServiceError('unavailable', 'Call cancelled'));
    };
    expect(await code(core.create({ principal: planning.user('usr_owner'), signal: caller.signal }, { workspaceId: ws, format: 'json', filters: none }))).toBe(
      'unavailable',
    );
    await nothingRecorded(ws);
  });

  it('exports: an export over EXPORT_DEADLINE_MS stops with 503, unrecorded and refunded', async () => {
    const ws = await seed('pro', [{ title: 'One' }]);
    const core = await make({ deadlineMs: 50 });
    beforeSearch = () => new Promise((r) => setTimeout(r, 150));
    const err = await core.create(owner(), { workspaceId: ws, format: 'json', filters: none }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('unavailable');
    expect((err as ServiceError).message).toMatch(/did not finish within/);
    await nothingRecorded(ws);
  });

  it("exports: an export finished too close to the caller's deadline is not recorded", async () => {
    const ws = await seed('pro', [{ title: 'One' }]);
    const core = await make();
    const deadline = new Date(Date.now() + 1_000);
    expect(await code(core.create({ principal: planning.user('usr_owner'), deadline }, { workspaceId: ws, format: 'json', filters: none }))).toBe('unavailable');
    await nothingRecorded(ws);
    // With time to spare it is recorded.
    const later = new Date(Date.now() + 60_000);
    expect((await core.create({ principal: planning.user('usr_owner'), deadline: later }, { workspaceId: ws, format: 'json', filters: none })).entry.issueCount).toBe(1);
  });

  it('exports: at most EXPORT_MAX_CONCURRENT_PER_WORKSPACE exports of a workspace build at once; more get 429', async () => {
    const ws = await seed('pro', [{ title: 'One' }]);
    const other = await seed('pro', [{ title: 'Two' }]);
    const core = await make({ maxConcurrent: 2 });
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let waiting = 0;
    beforeSearch = async () => {
      waiting++;
      await gate;
    };
    const first = core.create(owner(), { workspaceId: ws, format: 'json', filters: none });
    const second = core.create(owner(), { workspaceId: ws, format: 'json', filters: none });
    while (waiting < 2) await new Promise((r) => setTimeout(r, 5));
    const third = await core.create(owner(), { workspaceId: ws, format: 'json', filters: none }).catch((e: unknown) => e);
    expect(third).toBeInstanceOf(ServiceError);
    expect(third).toMatchObject({ code: 'rate-limited', details: { retryAfterSeconds: expect.any(Number) } });
    // Another workspace is not held up.
    const elsewhere = core.create(owner(), { workspaceId: other, format: 'json', filters: none });
    open();
    await Promise.all([first, second, elsewhere]);
    expect(await meter.used(ws, 'exports')).toBe(2);
    // Slots are given back when exports end, failed ones included.
    beforeSearch = async () => {
      throw new ServiceError('invalid-input', 'bad', { field: 'label' });
    };
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'json', filters: none }))).toBe('invalid-input');
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'json', filters: none }))).toBe('invalid-input');
    beforeSearch = async () => {};
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'json', filters: none }))).toBe('ok');
  });

  it('exports: a token learns nothing about another workspace slug (same answer as an unknown slug)', async () => {
    const a = await seed('enterprise', [{ title: 'A' }]);
    const b = await seed('enterprise', [{ title: 'B' }]);
    const core = await make();
    const tokenA = { principal: planning.token(a, ['admin']) };
    const slugB = await slugOf(b);
    for (const by of [{ workspaceId: a }, {}]) {
      const known = await code(core.create(tokenA, { ...by, workspaceSlug: slugB, format: 'json', filters: none }));
      const unknown = await code(core.create(tokenA, { ...by, workspaceSlug: 'no-such-workspace-here', format: 'json', filters: none }));
      expect(known).toBe('not-found');
      expect(known).toBe(unknown);
      expect(await code(core.history(tokenA, { ...by, workspaceSlug: slugB }))).toBe(await code(core.history(tokenA, { ...by, workspaceSlug: 'no-such-workspace-here' })));
    }
    // Its own slug still works, and a mismatch is told only to a caller who may see both.
    expect(await code(core.create(tokenA, { workspaceSlug: await slugOf(a), format: 'json', filters: none }))).toBe('ok');
    expect(await code(core.create(owner(), { workspaceId: a, workspaceSlug: slugB, format: 'json', filters: none }))).toBe('invalid-input');
  });

  it('exports: the slug is looked up exactly, without scanning workspaces by substring', async () => {
    const ws = await planning.workspace({ ownerId: 'usr_owner', planId: 'pro', name: 'Acme' });
    for (const name of ['Acme Labs', 'Big Acme', 'Acme 2']) await planning.workspace({ ownerId: 'usr_owner', planId: 'pro', name });
    const core = await make();
    const result = await core.create(owner(), { workspaceSlug: await slugOf(ws), format: 'json', filters: none });
    expect(result.entry.workspaceId).toBe(ws);
    expect(listWorkspaceCalls).toBe(0);
  });

  it('exports: filter hashes are keyed by a per-workspace secret, not by anything in the entry', async () => {
    const ws = await seed('pro', [{ title: 'One' }]);
    const other = await seed('pro', [{ title: 'Two' }]);
    const core = await make();
    const filters = { ...none, labels: ['customer-acme'], assignedAgentId: 'bot-1' };
    const first = (await core.create(owner(), { workspaceId: ws, format: 'json', filters })).entry;
    const again = (await core.create(owner(), { workspaceId: ws, format: 'json', filters })).entry;
    const elsewhere = (await core.create(owner(), { workspaceId: other, format: 'json', filters })).entry;
    const label = (e: typeof first) => e.filters.find((f) => f.name === 'label')!.values[0]!;
    expect(label(first)).toMatch(/^h:[0-9a-f]{12}$/);
    expect(label(again)).toBe(label(first));
    expect(label(elsewhere)).not.toBe(label(first));
    // A dictionary attack with what the entry shows (the workspace id) does not find the label.
    const guess = `h:${createHmac('sha256', `export-filter:${ws}`).update('customer-acme').digest('hex').slice(0, 12)}`;
    expect(label(first)).not.toBe(guess);
    expect(label(first)).not.toBe(shortHash(ws, 'customer-acme'));
  });

  it('exports: a released artifact drops its unread chunks, for its creator only', async () => {
    const ws = await seed('enterprise', Array.from({ length: 120 }, (_, i) => ({ title: `Big ${i}`, description: 'x'.repeat(19_000) })));
    const core = await make();
    const result = await core.create(owner(), { workspaceId: ws, format: 'json', filters: none });
    expect(result.chunks.length).toBeGreaterThan(1);
    const id = result.entry._id;
    await core.release(planning.user('usr_other'), id);
    expect((await core.readChunk(planning.user('usr_owner'), id, 1)).length).toBe(CHUNK_BYTES);
    await core.release(planning.user('usr_owner'), id);
    expect(await code(core.readChunk(planning.user('usr_owner'), id, 2))).toBe('not-found');
    expect(await store.collection('export_artifact_chunks').find({})).toEqual([]);
    await core.release(planning.user('usr_owner'), id);
    expect(await code(core.release(planning.user('usr_owner'), 'bad id!'))).toBe('invalid-input');
  });

  it('exports: a backup takes no sort or direction either', async () => {
    const ws = await seed('enterprise', [{ title: 'One' }]);
    const core = await make();
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'backup', filters: { ...none, sort: 'title' } }))).toBe('invalid-input');
    expect(await code(core.create(owner(), { workspaceId: ws, format: 'backup', filters: { ...none, direction: 'desc' } }))).toBe('invalid-input');
    await nothingRecorded(ws);
    expect((await core.create(owner(), { workspaceId: ws, format: 'backup', filters: none })).entry.filters).toEqual([]);
  });

  it('exports: when the artifact chunks cannot be stored the export is not recorded and is refunded', async () => {
    const ws = await seed('enterprise', Array.from({ length: 60 }, (_, i) => ({ title: `Big ${i}`, description: 'x'.repeat(19_000) })));
    const core = await make();
    history.putChunks = () => Promise.reject(new Error('store unavailable'));
    await expect(core.create(owner(), { workspaceId: ws, format: 'json', filters: none })).rejects.toThrow('store unavailable');
    await nothingRecorded(ws);
  });
});
