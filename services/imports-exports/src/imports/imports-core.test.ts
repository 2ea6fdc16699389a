/**
 * ImportsCore against the embedded store and a fake issues service whose chunk writes can be held
 * (gates), so stalled and racing commit runners can be staged step by step.
 */
import { createInProcessBus } from '@planning/bus';
import { ServiceError } from '@planning/errors';
import { createUsageMeter } from '@planning/metering';
import { createOutbox } from '@planning/outbox';
import type { Principal } from '@planning/rpc';
import { createEmbeddedStore, type DocumentStore, type EmbeddedDocumentStore } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ImportsCore, previewView, type IssuesImportClient } from './imports-core.js';
import { IMPORT_SCHEMA_ID, IMPORT_SCHEMA_VERSION } from './schema.js';
import { ImportRepository } from './store.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const admin: Principal = { type: 'user', id: 'usr_admin', userId: 'usr_admin', isAdmin: false, scopes: [] };
const ctx = { principal: admin } as never;
const WS = 'ws_1';

interface Gate {
  reached: Promise<void>;
  release: () => void;
}

/** A fake issues import service: every row is a valid create; each chunk write skips its rows with a row error. */
function fakeIssues() {
  const results = new Map<string, { created: number; updated: number; skipped: number; errors: { row: number; field: string; code: string }[] }>();
  const gates = new Map<string, { wait: Promise<void>; arrive: () => void }[]>();
  const calls: string[] = [];
  const client = {
    async checkImportRows(req: { rows: { row: number }[] }) {
      return { storedTasks: 0, checks: req.rows.map((r) => ({ row: r.row, operation: 'create', version: 0, errors: [], conflicts: [] })) };
    },
    async applyImportChunk(req: { commitId: string; chunkIndex: number; rows: { row: number }[] }) {
      const name = `${req.commitId}:${req.chunkIndex}`;
      calls.push(`chunk ${req.chunkIndex}`);
      const held = gates.get(`${req.chunkIndex}`)?.shift();
      // The chunk's transaction commits first (a replay answers it); the answer is what is held.
      const replayed = results.has(name);
      if (!replayed) results.set(name, { created: 0, updated: 0, skipped: req.rows.length, errors: req.rows.map((r) => ({ row: r.row, field: 'id', code: 'changed-since-preview' })) });
      if (held) {
        held.arrive();
        await held.wait;
      }
      return { ...results.get(name)!, replayed };
    },
  };
  return {
    client: client as unknown as IssuesImportClient,
    calls,
    /** Holds the answer of the next write of `chunk`. */
    hold(chunk: number): Gate {
      let release!: () => void;
      let arrive!: () => void;
      const wait = new Promise<void>((r) => (release = r));
      const reached = new Promise<void>((r) => (arrive = r));
      gates.set(`${chunk}`, [...(gates.get(`${chunk}`) ?? []), { wait, arrive }]);
      return { reached, release };
    },
  };
}

describe('imports: core', () => {
  let store: EmbeddedDocumentStore;
  let repo: ImportRepository;
  let now: Date;
  let issues: ReturnType<typeof fakeIssues>;
  let core: ImportsCore;

  beforeEach(async () => {
    // The store's TTL sweep reads the same clock as the service.
    store = createEmbeddedStore({ clock: () => now });
    now = new Date('2026-11-22T10:00:00.000Z');
    issues = fakeIssues();
    repo = await ImportRepository.open(store as DocumentStore);
    const outbox = await createOutbox({ store: store as DocumentStore, bus: createInProcessBus(), source: 'imports-exports', logger: quiet });
    core = new ImportsCore({
      repo,
      outbox,
      meter: await createUsageMeter(store as DocumentStore),
      access: async () => ({ exists: true, role: 'admin', planId: 'enterprise', status: 'active' }),
      issues: issues.client,
      clock: () => new Date(now),
      previewTtlMs: 86_400_000,
      commitLeaseMs: 50,
      chunkRows: 1,
    });
  });

  afterEach(async () => {
    await store.close();
  });

  const rows = (n: number, extra: Record<string, unknown> = {}) =>
    Array.from({ length: n }, (_, i) => ({ workspaceId: WS, projectId: 'prj_1', title: `T${i + 1}`, ...extra }));
  const preview = (payload: unknown, key = 'p-1') =>
    core.preview(ctx, { idempotencyKey: key, plan: 'enterprise', format: 'json', payloadJson: typeof payload === 'string' ? payload : JSON.stringify(payload), workspaceId: WS });
  const failure = async (p: Promise<unknown>): Promise<ServiceError> => {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServiceError);
    return err as ServiceError;
  };

  it('imports: a stale commit runner stops when another took its commit over, and never rewrites its progress', async () => {
    const p = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(3) });
    expect(p.progress.checkpoints).toHaveLength(3);
    const aStalls = issues.hold(1);
    const a = core.commit(ctx, 'c-a', p.id).then(
      (v) => ({ ok: v }),
      (e: unknown) => ({ err: e as ServiceError }),
    );
    await aStalls.reached;
    now = new Date(now.getTime() + 100); // A's lease passed
    const bStalls = issues.hold(2);
    const b = core.commit(ctx, 'c-b', p.id);
    await bStalls.reached;
    // A wakes with B's lease running: A must stop, not continue to chunk 2 beside B.
    aStalls.release();
    const aResult = await a;
    expect(aResult).toHaveProperty('err');
    expect((aResult as { err: ServiceError }).err.details.reason).toBe('idempotency-in-flight');
    expect(issues.calls.filter((c) => c === 'chunk 2')).toHaveLength(1);
    // A's failure did not end B's lease.
    expect((await failure(core.commit(ctx, 'c-c', p.id))).details.reason).toBe('idempotency-in-flight');
    bStalls.release();
    const done = await b;
    expect(done.summary).toEqual({ created: 0, updated: 0, skipped: 3, totalOperations: 0 });
    expect(done.errors.map((e) => e.row)).toEqual([1, 2, 3]);
    const again = await core.commit(ctx, 'c-a', p.id);
    expect(again.errors.map((e) => e.row)).toEqual([1, 2, 3]);
    const stored = await repo.get(p.id);
    expect(stored!.commit!.checkpoints.map((c) => c.status)).toEqual(['done', 'done', 'done']);
    // Each chunk's row errors are kept with its checkpoint, but the checkpoint resource does not show them.
    expect(stored!.commit!.checkpoints.map((c) => c.errors?.map((e) => e.row))).toEqual([[1], [2], [3]]);
    expect(previewView(stored!, now).progress.checkpoints[0]).toEqual({ chunk: 0, rows: 1, status: 'done', created: 0, updated: 0, skipped: 1 });
  });

  it('imports: a stale runner that saves after a takeover does not move checkpoints back or lose row errors', async () => {
    const p = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(3) });
    const aStalls = issues.hold(1);
    const a = core.commit(ctx, 'c-a', p.id).catch((e: unknown) => e);
    await aStalls.reached;
    now = new Date(now.getTime() + 100);
    const b = await core.commit(ctx, 'c-b', p.id);
    expect(b.summary.skipped).toBe(3);
    aStalls.release();
    await a;
    const later = await core.commit(ctx, 'c-c', p.id);
    expect(later.summary).toEqual({ created: 0, updated: 0, skipped: 3, totalOperations: 0 });
    expect(later.errors.map((e) => e.row)).toEqual([1, 2, 3]);
  });

  it('imports: retention: a preview and its stored rows are swept by the TTL index a week after they expire', async () => {
    const p = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(3) });
    const other = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(2) }, 'p-2');
    expect(await repo.chunks.countDocuments({ previewId: p.id })).toBe(3);
    // Expired (24 h) but still there, so a late commit learns it expired rather than "not found".
    now = new Date(now.getTime() + 86_400_000 + 1);
    await store.sweepExpired();
    expect((await failure(core.commit(ctx, 'c-late', p.id))).details.reason).toBe('preview-expired');
    now = new Date(now.getTime() + 7 * 86_400_000);
    await store.sweepExpired();
    expect(await repo.get(p.id)).toBeNull();
    expect(await repo.get(other.id)).toBeNull();
    expect(await repo.chunks.countDocuments({})).toBe(0);
  });

  it('imports: a payload nested deeper than the limit is a 400 naming payload, never a crash', async () => {
    for (const depth of [1_000, 6_000, 12_000]) {
      const deep = `${'['.repeat(depth)}${']'.repeat(depth)}`;
      const payload = `{"schemaId":"${IMPORT_SCHEMA_ID}","schemaVersion":"${IMPORT_SCHEMA_VERSION}","issues":[{"workspaceId":"${WS}","projectId":"prj_1","title":"A","labels":${deep}}]}`;
      const err = await failure(preview(payload, `deep-${depth}`));
      expect(err.code).toBe('invalid-input');
      expect(err.details.field).toBe('payload');
    }
    // 32 levels are accepted.
    const ok = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: [{ ...rows(1)[0], labels: JSON.parse(`${'['.repeat(29)}${']'.repeat(29)}`) }] }, 'deep-ok');
    expect(ok.status).toBe('ready');
  });

  it('imports: many unknown fields are capped per row and overall, with the totals and a truncation flag', async () => {
    const extra = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`extra${i}`, 1]));
    const p = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(10_000, extra) });
    expect(p.summary.errors).toBe(150_000);
    expect(p.summary.problemsTruncated).toBe(true);
    expect(p.errors.length).toBe(10_000);
    expect(p.errors.filter((e) => e.row === 1)).toHaveLength(5);
    expect(p.errors[p.errors.length - 1]!.row).toBe(2_000);
    expect(p.progress.blockedRows).toBe(10_000);
    const small = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(2, { extra: 1 }) }, 'p-2');
    expect(small.summary.problemsTruncated).toBe(false);
    expect(small.errors).toEqual([
      { row: 1, field: 'extra', code: 'unknown-field' },
      { row: 2, field: 'extra', code: 'unknown-field' },
    ]);
  }, 60_000);

  it('imports: 600,000 unknown fields in one row (7 MB) list 5 problems, never a crash', async () => {
    const extra = Object.fromEntries(Array.from({ length: 600_000 }, (_, i) => [`f${i}`, 1]));
    const p = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(1, extra) });
    expect(p.summary.errors).toBe(600_000);
    expect(p.errors).toHaveLength(5);
    expect(p.summary.problemsTruncated).toBe(true);
  }, 60_000);

  it('imports: a commit whose stored rows are gone answers 400 preview-expired, never 500', async () => {
    const p = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(2) });
    const stalls = issues.hold(1);
    const a = core.commit(ctx, 'c-a', p.id).catch((e: unknown) => e);
    await stalls.reached;
    now = new Date(now.getTime() + 100);
    await repo.chunks.deleteMany({ previewId: p.id }); // swept (purgeAt) while the commit was left unfinished
    const err = await failure(core.commit(ctx, 'c-b', p.id));
    expect(err.code).toBe('invalid-input');
    expect(err.details.reason).toBe('preview-expired');
    stalls.release();
    await a;
  });

  it('imports: a failed preview gives up only its own key, not one another request took over', async () => {
    const t0 = new Date('2026-11-22T10:00:00.000Z');
    const begin = (ms: number, leaseMs: number) => repo.keys.begin({ id: 'k', kind: 'import-preview', requestHash: 'h', now: new Date(t0.getTime() + ms), leaseMs });
    const first = await begin(0, 10);
    expect(first.kind).toBe('new');
    const second = await begin(20, 60_000);
    expect(second.kind).toBe('takeover');
    // The first request fails late and abandons its key: the second request's hold stays.
    await repo.keys.abandon('k', first.kind === 'new' ? first.owner : '');
    expect((await begin(30, 60_000)).kind).toBe('in-flight');
    await repo.keys.abandon('k', second.kind === 'takeover' ? second.owner : '');
    expect((await begin(40, 60_000)).kind).toBe('new');
  });

  it('imports: the commit takes only an unexpired preview, in the same conditional update', async () => {
    const p = await preview({ schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, issues: rows(1) });
    now = new Date(now.getTime() + 86_400_000);
    const err = await failure(core.commit(ctx, 'c-a', p.id));
    expect(err.details.reason).toBe('preview-expired');
    expect((await repo.get(p.id))!.commit).toBeUndefined();
  });
});
