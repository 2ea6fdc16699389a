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
import { ExportHistoryRepository } from '../store/export-history.js';
import { CHUNK_BYTES, ExportsCore } from './exports-core.js';

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
  const make = async (options: { maxBytes?: number } = {}) => {
    const outbox = await createOutbox({ store: store as DocumentStore, bus: createInProcessBus(), source: 'imports-exports', logger: quiet });
    return new ExportsCore({
      history,
      outbox,
      meter,
      access: createRemoteAccess(asRpc(planning.workspaceRpc)),
      issues: {
        workspaces: asRpc(planning.workspaceRpc),
        tasks: asRpc(planning.tasks),
        taskRecords: asRpc(planning.records),
        projects: asRpc(planning.projects),
        programs: asRpc(planning.programs),
      },
      clock: () => new Date(planning.now),
      retentionSeconds: 30 * 86_400,
      maxBytes: options.maxBytes ?? 64 * 1_048_576,
    });
  };
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
    planning = await createPlanningHarness({ now: new Date() });
    store = createEmbeddedStore();
    meter = await createUsageMeter(store);
    history = await ExportHistoryRepository.open(store);
    events = async () =>
      (await store.collection<{ _id: string; event: EventEnvelope }>('outbox').find({}, { sort: { _id: 1 } })).map((r) => r.event);
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
});
