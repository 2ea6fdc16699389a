/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, createKey, createUser, createWorkspace } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request, requestOversized, type ApiResponse } from '../support/http.js';

/**
 * JSON issue imports through the gateway, in both modes (API document endpoints 17–18,
 * DECISIONS §8): schema, preview, commit, every schema status, row errors and conflicts (an active
 * claim included), idempotency, expiry, quota, N concurrent commits of one preview, and a commit
 * whose process is killed between chunks and resumed by a retry.
 */
const TTL_SECONDS = 10;
const CHUNK_ROWS = 20;
const SECRET = 'Secret row title';

const key = () => `k-${randomBytes(8).toString('hex')}`;

describe.each<Mode>(['all-in-one', 'distributed'])('imports (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;

  const call = (method: string, path: string, options: { body?: unknown; rawBody?: string; cookie?: string; token?: string; headers?: Record<string, string> } = {}): Promise<ApiResponse> =>
    request(cluster.baseUrl, method, path, { cookie: admin, ...options });

  const space = async (planId = 'pro') => {
    const ws = (await createWorkspace(cluster.baseUrl, admin, `Imports ${randomBytes(3).toString('hex')}`, planId)).id as string;
    const project = await call('POST', '/api/projects', { body: { workspaceId: ws, name: 'Imported' } });
    expect(project.status).toBe(201);
    return { id: ws, projectId: project.body.data.id as string, planId };
  };

  const rows = (s: { id: string; projectId: string }, n: number, extra: Record<string, unknown> = {}) =>
    Array.from({ length: n }, (_, i) => ({ workspaceId: s.id, projectId: s.projectId, title: `Row ${i + 1}`, ...extra }));

  const envelope = (issues: unknown[], schemaVersion?: string) => ({ schemaId: 'service.issue-import', schemaVersion: schemaVersion ?? CURRENT, issues });
  let CURRENT = '';

  const preview = (s: { id: string; planId: string }, payload: unknown, k = key(), extra: Record<string, unknown> = {}) =>
    call('POST', '/api/imports/preview', { headers: { 'idempotency-key': k }, body: { plan: s.planId, format: 'json', payload, workspaceId: s.id, ...extra } });
  const commit = (previewId: string, k = key()) => call('POST', '/api/imports/commit', { headers: { 'idempotency-key': k }, body: { previewId } });
  const tasksOf = async (ws: string) => {
    const res = await call('GET', `/api/issues?workspaceId=${ws}&limit=200`);
    expect(res.status).toBe(200);
    const list = (body: any): any[] => (Array.isArray(body.data) ? body.data : body.data.issues);
    const all = [...list(res.body)];
    let cursor = res.body.page?.nextCursor;
    while (cursor) {
      const next = await call('GET', `/api/issues?workspaceId=${ws}&limit=200&cursor=${encodeURIComponent(cursor)}`);
      all.push(...list(next.body));
      cursor = next.body.page?.nextCursor;
    }
    return all;
  };

  beforeAll(async () => {
    // A short commit lease: racing commits of a slow commit take it over and write beside it.
    cluster = await startCluster(mode, { env: { IMPORT_PREVIEW_TTL_SECONDS: String(TTL_SECONDS), IMPORT_CHUNK_ROWS: String(CHUNK_ROWS), IMPORT_COMMIT_LEASE_MS: '1000' } });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    const schema = await call('GET', '/api/imports/schema');
    expect(schema.status).toBe(200);
    CURRENT = schema.body.data.schemaVersion;
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('imports: the schema names its id, a dated v1 version and the JSON Schema of a row', async () => {
    const res = await call('GET', '/api/imports/schema');
    expect(res.body.data.schemaId).toBe('service.issue-import');
    expect(res.body.data.schemaVersion).toMatch(/^\d{4}-\d{2}-\d{2}\.issue-import\.v1$/);
    expect(res.body.data.rowSchema.required).toEqual(['workspaceId', 'projectId', 'title']);
    expect(Object.keys(res.body.data.rowSchema.properties)).toContain('externalId');
  });

  it('imports: preview then commit creates and updates tasks, visible through GET /api/issues', async () => {
    const s = await space();
    const existing = await call('POST', '/api/issues', { body: { projectId: s.projectId, title: 'Before import' } });
    const payload = envelope([...rows(s, 45), { id: existing.body.data.id, workspaceId: s.id, projectId: s.projectId, title: 'Updated by import', priority: 'urgent' }]);
    const pk = key();
    const p = await preview(s, payload, pk);
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    const data = p.body.data;
    expect(data).toMatchObject({
      idempotencyKey: pk,
      status: 'ready',
      source: { schema: { schemaVersion: CURRENT, status: 'current' } },
      summary: { totalRows: 46, creates: 45, updates: 1, conflicts: 0, errors: 0, quotaExceeded: false },
      progress: { status: 'ready', processedRows: 46, blockedRows: 0, completedRows: 0, percentComplete: 0 },
      recovery: { recoverable: true, idempotencyKey: pk },
      artifact: { rows: 46 },
    });
    expect(data.artifact.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(data.progress.checkpoints).toHaveLength(3);
    expect(data.quotaImpact.imports).toMatchObject({ limit: 500, required: 1, exceeded: false });
    // No task changed on preview.
    expect(await tasksOf(s.id)).toHaveLength(1);

    const c = await commit(data.id);
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    expect(c.body.data).toMatchObject({ previewId: data.id, status: 'committed', summary: { created: 45, updated: 1, skipped: 0, totalOperations: 46 }, errors: [] });
    const tasks = await tasksOf(s.id);
    expect(tasks).toHaveLength(46);
    expect(tasks.find((t: any) => t.id === existing.body.data.id)).toMatchObject({ title: 'Updated by import', priority: 'urgent' });
    expect(new Set(tasks.map((t: any) => t.title)).size).toBe(46);

    // The preview now reports the commit; the same preview key answers it.
    const again = await preview(s, payload, pk);
    expect(again.body.data).toMatchObject({ id: data.id, status: 'committed', commitId: c.body.data.id, progress: { percentComplete: 100, completedRows: 46 } });
    const usage = await call('GET', `/api/billing/usage?workspaceId=${s.id}`);
    expect(usage.body.data.quotas.find((q: any) => q.kind === 'imports').used).toBe(1);
  });

  it('imports: each schema status: current, compatible, export envelope, legacy, unsupported (blocked before rows are read)', async () => {
    const s = await space();
    const date = CURRENT.slice(0, 10);
    const older = envelope(rows(s, 1), '2020-01-01.issue-import.v1');
    expect((await preview(s, older)).body.data.source.schema).toEqual({ schemaVersion: '2020-01-01.issue-import.v1', status: 'compatible' });
    const exported = { schemaId: 'service.issue-export', schemaVersion: '2026-11-22.issue-export.v1', exportedAt: new Date().toISOString(), issues: rows(s, 2, { createdAt: '2026-01-01T00:00:00Z', version: 3, agent: {} }) };
    const exp = await preview(s, exported);
    expect(exp.body.data.source.schema.status).toBe('compatible');
    expect(exp.body.data.summary).toMatchObject({ creates: 2, errors: 0 });
    const legacy = await preview(s, rows(s, 3));
    expect(legacy.body.data.source.schema).toEqual({ schemaVersion: null, status: 'legacy' });
    expect(legacy.body.data.summary.creates).toBe(3);
    for (const version of ['2999-01-01.issue-import.v1', `${date}.issue-import.v2`]) {
      // Rows that would fail validation are not even read.
      const res = await preview(s, envelope([{ nonsense: true }, 42], version));
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ status: 'blocked', source: { schema: { status: 'unsupported' } }, summary: { errors: 0, creates: 0 }, progress: { processedRows: 0 } });
      const c = await commit(res.body.data.id);
      expect(c.status).toBe(400);
    }
    const later = await preview(s, { schemaId: 'service.issue-export', schemaVersion: '2026-11-22.issue-export.v2', issues: [] });
    expect(later.body.data.source.schema.status).toBe('unsupported');
    const bad = await preview(s, { schemaId: 'something-else', schemaVersion: CURRENT, issues: [] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid-input');
  });

  it('imports: row errors and conflicts name row, field and code, never row content; an active claim is a conflict', async () => {
    const s = await space();
    const other = await space();
    const claimed = (await call('POST', '/api/issues', { body: { projectId: s.projectId, title: 'Claimed' } })).body.data.id;
    const agent = await createKey(cluster.baseUrl, admin, s.id, 'pro', ['issues:read', 'issues:write', 'agents:read', 'agents:execute']);
    const claim = await call('POST', '/api/agents/claim', { token: agent.token, body: { issueId: claimed }, cookie: undefined as any });
    expect(claim.status, JSON.stringify(claim.body)).toBe(200);
    const changed = (await call('POST', '/api/issues', { body: { projectId: s.projectId, title: 'Changed later' } })).body.data.id;
    const payload = envelope([
      { workspaceId: s.id, projectId: s.projectId, title: `${SECRET} ok` },
      { workspaceId: s.id, projectId: s.projectId, description: `${SECRET} no title` },
      { workspaceId: s.id, projectId: s.projectId, title: `${SECRET} p`, priority: 'sky-high' },
      { workspaceId: s.id, projectId: s.projectId, title: `${SECRET} x`, colour: 'red' },
      { workspaceId: s.id, projectId: other.projectId, title: `${SECRET} other project` },
      { workspaceId: other.id, projectId: s.projectId, title: `${SECRET} other ws` },
      { id: claimed, workspaceId: s.id, projectId: s.projectId, title: `${SECRET} claimed` },
      { id: changed, workspaceId: s.id, projectId: s.projectId, title: `${SECRET} stale`, updatedAt: '2020-01-01T00:00:00Z' },
      { externalId: 'dup-1', workspaceId: s.id, projectId: s.projectId, title: `${SECRET} d1` },
      { externalId: 'dup-1', workspaceId: s.id, projectId: s.projectId, title: `${SECRET} d2` },
    ]);
    const res = await preview(s, payload);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const d = res.body.data;
    expect(JSON.stringify(d)).not.toContain(SECRET);
    expect(d.errors).toEqual(
      expect.arrayContaining([
        { row: 2, field: 'title', code: 'required' },
        { row: 3, field: 'priority', code: 'invalid' },
        { row: 4, field: 'colour', code: 'unknown-field' },
        { row: 5, field: 'projectId', code: 'not-found' },
        { row: 6, field: 'workspaceId', code: 'other-workspace' },
      ]),
    );
    expect(d.conflicts).toEqual(
      expect.arrayContaining([
        { row: 7, field: 'id', code: 'active-claim' },
        { row: 8, field: 'updatedAt', code: 'changed-since-source' },
        { row: 9, field: 'externalId', code: 'duplicate-external-id' },
        { row: 10, field: 'externalId', code: 'duplicate-external-id' },
      ]),
    );
    expect(d.summary).toMatchObject({ totalRows: 10, creates: 1, updates: 0 });
    expect(d.progress.blockedRows).toBe(9);
    const c = await commit(d.id);
    expect(c.status).toBe(200);
    expect(c.body.data.summary).toEqual({ created: 1, updated: 0, skipped: 9, totalOperations: 1 });
    expect(c.body.data.errors.length).toBeGreaterThanOrEqual(9);
    expect((await call('GET', `/api/issues/${claimed}`)).body.data.title).toBe('Claimed');
  });

  it('imports: idempotency: same key and body answer the stored preview; another body 400; the preview key cannot commit; commits answer once', async () => {
    const s = await space();
    const payload = envelope(rows(s, 2));
    const k = key();
    const first = await preview(s, payload, k);
    const second = await preview(s, payload, k);
    expect(second.status).toBe(200);
    expect(second.body.data.id).toBe(first.body.data.id);
    const other = await preview(s, envelope(rows(s, 3)), k);
    expect(other.status).toBe(400);
    expect(other.body.error.code).toBe('invalid-input');
    const missing = await call('POST', '/api/imports/preview', { body: { plan: 'pro', format: 'json', payload, workspaceId: s.id } });
    expect(missing.status).toBe(400);
    const wrongPlan = await preview(s, payload, key(), { plan: 'free' });
    expect(wrongPlan.status).toBe(400);
    expect((await commit(first.body.data.id, k)).status).toBe(400);
    expect((await commit('imp_does_not_exist')).status).toBe(404);
    const ck = key();
    const c1 = await commit(first.body.data.id, ck);
    const c2 = await commit(first.body.data.id, ck);
    const c3 = await commit(first.body.data.id);
    expect(c1.status).toBe(200);
    expect(c2.body.data).toEqual(c1.body.data);
    expect(c3.body.data).toEqual(c1.body.data);
    // The commit key is bound to its preview.
    const p2 = await preview(s, envelope(rows(s, 1)));
    expect((await commit(p2.body.data.id, ck)).status).toBe(400);
    expect(await tasksOf(s.id)).toHaveLength(2);
  });

  it('imports: concurrent same-key previews make one preview', async () => {
    const s = await space();
    const payload = envelope(rows(s, 30));
    const k = key();
    const answers = await Promise.all(Array.from({ length: 6 }, () => preview(s, payload, k)));
    for (const a of answers) expect([200, 409]).toContain(a.status);
    const ids = new Set(answers.filter((a) => a.status === 200).map((a) => a.body.data.id));
    expect(ids.size).toBe(1);
  });

  it('imports: an expired preview cannot be committed', async () => {
    const s = await space();
    const p = await preview(s, envelope(rows(s, 1)));
    await new Promise((r) => setTimeout(r, (TTL_SECONDS + 1) * 1_000));
    const again = await preview(s, envelope(rows(s, 1)), p.body.data.idempotencyKey);
    expect(again.body.data.status).toBe('expired');
    const c = await commit(p.body.data.id);
    expect(c.status).toBe(400);
    expect(await tasksOf(s.id)).toHaveLength(0);
  }, 30_000);

  it('imports: the monthly imports quota is checked on preview and metered once at commit', async () => {
    const s = await space('free');
    const previews = [];
    for (let i = 0; i < 3; i++) previews.push((await preview(s, envelope(rows(s, 1)))).body.data);
    expect(previews[2].quotaImpact.imports).toMatchObject({ limit: 2, used: 0, exceeded: false });
    expect((await commit(previews[0].id)).status).toBe(200);
    expect((await commit(previews[0].id)).status).toBe(200);
    expect((await commit(previews[1].id)).status).toBe(200);
    const refused = await commit(previews[2].id);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('quota-exceeded');
    expect(refused.body.error.quota).toMatchObject({ kind: 'imports', limit: 2, used: 2 });
    const blocked = await preview(s, envelope(rows(s, 1)));
    expect(blocked.body.data).toMatchObject({ status: 'blocked', summary: { quotaExceeded: true } });
    const blockedCommit = await commit(blocked.body.data.id);
    expect(blockedCommit.status).toBe(403);
    expect(blockedCommit.body.error).toMatchObject({ code: 'quota-exceeded', quota: { kind: 'imports', limit: 2, used: 2 } });
    expect(await tasksOf(s.id)).toHaveLength(2);
  });

  it('imports: a 10,000-row import (the limit) previews and commits', async () => {
    const s = await space('enterprise');
    const started = Date.now();
    const p = await preview(s, envelope(rows(s, 10_000, { description: 'd'.repeat(200), labels: ['bulk'] })));
    expect(p.status, JSON.stringify(p.body).slice(0, 300)).toBe(200);
    expect(p.body.data.summary).toMatchObject({ totalRows: 10_000, creates: 10_000, errors: 0 });
    const previewMs = Date.now() - started;
    const c = await commit(p.body.data.id);
    expect(c.status, JSON.stringify(c.body).slice(0, 300)).toBe(200);
    expect(c.body.data.summary.created).toBe(10_000);
    console.log(`imports (${mode}): 10,000 rows: preview ${previewMs} ms, commit ${Date.now() - started - previewMs} ms`);
  }, 300_000);

  it('imports: a 10,001-row payload is refused with 413', async () => {
    const s = await space();
    const res = await preview(s, envelope(Array.from({ length: 10_001 }, () => ({}))));
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload-too-large');
  });

  it('imports: a payload nested 1,000 to 12,000 deep is a 400 naming payload, never a 500', async () => {
    const s = await space();
    for (const depth of [1_000, 3_000, 6_000, 12_000]) {
      const labels = `${'['.repeat(depth)}${']'.repeat(depth)}`;
      const rawBody = `{"plan":"${s.planId}","format":"json","workspaceId":"${s.id}","payload":{"schemaId":"service.issue-import","schemaVersion":"${CURRENT}","issues":[{"workspaceId":"${s.id}","projectId":"${s.projectId}","title":"Deep","labels":${labels}}]}}`;
      const res = await call('POST', '/api/imports/preview', { headers: { 'idempotency-key': key(), 'content-type': 'application/json' }, rawBody });
      expect(res.status, `depth ${depth}`).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid-input', field: 'payload' });
    }
  });

  it('imports: a payload re-imported with the same externalId updates nothing twice: two committed previews leave one task', async () => {
    const s = await space();
    const payload = envelope([{ workspaceId: s.id, projectId: s.projectId, title: 'A', externalId: 'ext-1' }]);
    const first = await preview(s, payload);
    const second = await preview(s, payload);
    expect(first.body.data.summary.creates).toBe(1);
    expect(second.body.data.summary.creates).toBe(1);
    const a = await commit(first.body.data.id);
    expect(a.body.data.summary.created).toBe(1);
    const b = await commit(second.body.data.id);
    expect(b.status).toBe(200);
    expect(b.body.data.summary).toMatchObject({ created: 0, skipped: 1 });
    expect(b.body.data.errors).toEqual([{ row: 1, field: 'externalId', code: 'duplicate-external-id' }]);
    expect((await tasksOf(s.id)).filter((t: any) => t.title === 'A')).toHaveLength(1);
  });

  it('imports: N concurrent commits of one preview write its rows exactly once', async () => {
    const s = await space();
    const p = await preview(s, envelope(rows(s, 300)));
    expect(p.body.data.status).toBe('ready');
    const answers = await Promise.all(Array.from({ length: 8 }, () => commit(p.body.data.id)));
    const ok = answers.filter((a) => a.status === 200);
    for (const a of answers) expect([200, 409], JSON.stringify(a.body)).toContain(a.status);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const a of ok) expect(a.body.data).toEqual(ok[0]!.body.data);
    // The losers' retries answer the same commit.
    const final = await eventually(async () => {
      const r = await commit(p.body.data.id);
      return r.status === 200 ? r : undefined;
    }, 30_000, 'the committed import');
    expect(final.body.data.summary).toEqual({ created: 300, updated: 0, skipped: 0, totalOperations: 300 });
    const tasks = await tasksOf(s.id);
    expect(tasks).toHaveLength(300);
    expect(new Set(tasks.map((t: any) => t.title)).size).toBe(300);
    // Metered once, whoever won.
    const usage = await call('GET', `/api/billing/usage?workspaceId=${s.id}`);
    expect(usage.body.data.quotas.find((q: any) => q.kind === 'imports').used).toBe(1);
  }, 60_000);

  it('imports: import.previewed and import.committed are audited with ids and counts only; imported tasks emit task events', async () => {
    const s = await space();
    const p = await preview(s, envelope(rows(s, 3, { description: SECRET })));
    const c = await commit(p.body.data.id);
    expect(c.status).toBe(200);
    const audit = (type: string) => call('GET', `/api/admin/audit-events?workspaceId=${s.id}&type=${type}`);
    const committed = await eventually(async () => {
      const r = await audit('import.committed');
      return r.body.data?.length === 1 ? r : undefined;
    }, 30_000, 'import.committed');
    expect(committed.body.data[0]).toMatchObject({ subject: { type: 'import', id: p.body.data.id }, outcome: 'allowed' });
    const previewed = await eventually(async () => {
      const r = await audit('import.previewed');
      return r.body.data?.length === 1 ? r : undefined;
    }, 30_000, 'import.previewed');
    expect(JSON.stringify([committed.body, previewed.body])).not.toContain(SECRET);
    await eventually(async () => {
      const r = await audit('task.created');
      return r.body.data?.length === 3 ? r : undefined;
    }, 30_000, 'three task.created events');
  });

  it('imports: a task changed between preview and commit is skipped, not overwritten', async () => {
    const s = await space();
    const task = (await call('POST', '/api/issues', { body: { projectId: s.projectId, title: 'Original' } })).body.data;
    const p = await preview(s, envelope([{ id: task.id, workspaceId: s.id, projectId: s.projectId, title: 'From import' }, ...rows(s, 1)]));
    expect(p.body.data.summary).toMatchObject({ creates: 1, updates: 1 });
    const patched = await call('PATCH', `/api/issues/${task.id}`, { body: { title: 'Changed meanwhile' } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const c = await commit(p.body.data.id);
    expect(c.body.data.summary).toEqual({ created: 1, updated: 0, skipped: 1, totalOperations: 1 });
    expect(c.body.data.errors).toEqual([{ row: 1, field: 'id', code: 'changed-since-preview' }]);
    expect((await call('GET', `/api/issues/${task.id}`)).body.data.title).toBe('Changed meanwhile');
  });

  it('imports: creates beyond the stored-task quota block the preview', async () => {
    const s = await space('free');
    const res = await preview(s, rows(s, 501));
    expect(res.body.data).toMatchObject({ status: 'blocked', summary: { quotaExceeded: true, creates: 501 } });
    expect(res.body.data.quotaImpact.storedTasks).toEqual({ limit: 500, used: 0, creates: 501, exceeded: true });
    // Committing it is the plan's refusal, as any quota: 403 quota-exceeded with the quota.
    const c = await commit(res.body.data.id);
    expect(c.status).toBe(403);
    expect(c.body.error).toMatchObject({ code: 'quota-exceeded', quota: { kind: 'stored-tasks', limit: 500, used: 0 } });
    expect(await tasksOf(s.id)).toHaveLength(0);
  });

  it('imports: a 9 MB body previews (it crosses the gRPC hops whole); a body over 10 MB is refused with 413', async () => {
    const s = await space();
    const big = await preview(s, envelope(rows(s, 500, { description: 'z'.repeat(18_000) })));
    expect(big.status, JSON.stringify(big.body).slice(0, 300)).toBe(200);
    expect(big.body.data.artifact.bytes).toBeGreaterThan(9_000_000);
    expect(big.body.data.summary).toMatchObject({ creates: 500, errors: 0 });
    // Refused by its length before it is read: the connection closes while the client may still be writing.
    const res = await requestOversized(cluster.baseUrl, 'POST', '/api/imports/preview', {
      cookie: admin,
      headers: { 'idempotency-key': key() },
      body: { plan: s.planId, format: 'json', workspaceId: s.id, payload: envelope([{ workspaceId: s.id, projectId: s.projectId, title: 'x', description: 'y'.repeat(10 * 1_048_576) }]) },
    });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload-too-large');
  });

  it('imports: members and viewers cannot import; an admin member can', async () => {
    const s = await space();
    const payload = rows(s, 1);
    for (const role of ['viewer', 'member', 'admin'] as const) {
      const user = await createUser(cluster.baseUrl, admin, `imports-${role}`);
      await addMember(cluster.baseUrl, admin, s.id, user.id, role);
      const res = await call('POST', '/api/imports/preview', { cookie: user.cookie, headers: { 'idempotency-key': key() }, body: { plan: 'pro', format: 'json', payload, workspaceId: s.id } });
      expect(res.status, role).toBe(role === 'admin' ? 200 : 403);
    }
  });

  it('imports: tokens with admin import into their own workspace only', async () => {
    const s = await space('enterprise');
    const other = await space('enterprise');
    const token = await createKey(cluster.baseUrl, admin, s.id, 'enterprise', ['admin']);
    const own = await call('POST', '/api/imports/preview', {
      cookie: undefined as any,
      token: token.token,
      headers: { 'idempotency-key': key() },
      body: { plan: 'enterprise', format: 'json', payload: rows(s, 1) },
    });
    expect(own.status, JSON.stringify(own.body)).toBe(200);
    const theirs = await call('POST', '/api/imports/preview', {
      cookie: undefined as any,
      token: token.token,
      headers: { 'idempotency-key': key() },
      body: { plan: 'enterprise', format: 'json', payload: rows(other, 1) },
    });
    expect(theirs.status).toBe(404);
  });
});

describe.each<Mode>(['all-in-one', 'distributed'])('imports crash (%s)', (mode) => {
  let cluster: Cluster | undefined;

  afterAll(async () => {
    await cluster?.stop();
  });

  it('imports: a commit killed between chunks is resumed by a retry, and every row is written exactly once', async () => {
    const name = mode === 'all-in-one' ? 'all' : 'imports-exports';
    cluster = await startCluster(mode, {
      env: { IMPORT_CHUNK_ROWS: '10' },
      envFor: { [name]: { SERVICE_FAILPOINTS: 'imports.after-chunk=crash@2', IMPORT_COMMIT_LEASE_MS: '1000', IMPORT_CHUNK_ROWS: '10' } },
    });
    let admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    const ws = (await createWorkspace(cluster.baseUrl, admin, `Crash ${randomBytes(3).toString('hex')}`, 'pro')).id as string;
    const project = await request(cluster.baseUrl, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Crash' } });
    const projectId = project.body.data.id;
    const schema = await request(cluster.baseUrl, 'GET', '/api/imports/schema', { cookie: admin });
    const issues = Array.from({ length: 55 }, (_, i) => ({ workspaceId: ws, projectId, title: `Crash row ${i + 1}` }));
    const p = await request(cluster.baseUrl, 'POST', '/api/imports/preview', {
      cookie: admin,
      headers: { 'idempotency-key': key() },
      body: { plan: 'pro', format: 'json', workspaceId: ws, payload: { schemaId: 'service.issue-import', schemaVersion: schema.body.data.schemaVersion, issues } },
    });
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    const proc = cluster.process(name);
    const died = await request(cluster.baseUrl, 'POST', '/api/imports/commit', { cookie: admin, headers: { 'idempotency-key': key() }, body: { previewId: p.body.data.id } }).catch(
      () => ({ status: 0 }) as ApiResponse,
    );
    expect(died.status).not.toBe(200);
    await proc.waitForExit();
    delete proc.env.SERVICE_FAILPOINTS;
    await proc.start();
    const c = cluster;
    if (mode === 'all-in-one') admin = await eventually(async () => login(c.baseUrl, ADMIN_EMAIL, c.adminPassword).catch(() => undefined), 30_000, 'sign-in');
    // Two chunks were written before the crash; the second one's checkpoint was not recorded.
    const before = await request(c.baseUrl, 'GET', `/api/issues?workspaceId=${ws}&limit=200`, { cookie: admin });
    expect((Array.isArray(before.body.data) ? before.body.data : before.body.data.issues).length).toBe(20);
    // The restarted process answers once it is ready.
    const interrupted = await eventually(async () => {
      const r = await request(c.baseUrl, 'POST', '/api/imports/preview', {
        cookie: admin,
        headers: { 'idempotency-key': p.body.data.idempotencyKey },
        body: { plan: 'pro', format: 'json', workspaceId: ws, payload: { schemaId: 'service.issue-import', schemaVersion: schema.body.data.schemaVersion, issues } },
      });
      return r.status === 200 ? r : undefined;
    }, 30_000, 'the preview after the restart');
    expect(interrupted.body.data).toMatchObject({ status: 'ready', recovery: { recoverable: true }, progress: { status: 'committing', completedRows: 10 } });
    const done = await eventually(async () => {
      const r = await request(c.baseUrl, 'POST', '/api/imports/commit', { cookie: admin, headers: { 'idempotency-key': key() }, body: { previewId: p.body.data.id } });
      return r.status === 200 ? r : undefined;
    }, 60_000, 'the resumed commit');
    expect(done.body.data.summary).toEqual({ created: 55, updated: 0, skipped: 0, totalOperations: 55 });
    const listed = await request(c.baseUrl, 'GET', `/api/issues?workspaceId=${ws}&limit=200`, { cookie: admin });
    const found: any[] = Array.isArray(listed.body.data) ? listed.body.data : listed.body.data.issues;
    expect(found).toHaveLength(55);
    expect(new Set(found.map((t: any) => t.title)).size).toBe(55);
    const view = await request(c.baseUrl, 'POST', '/api/imports/preview', {
      cookie: admin,
      headers: { 'idempotency-key': p.body.data.idempotencyKey },
      body: { plan: 'pro', format: 'json', workspaceId: ws, payload: { schemaId: 'service.issue-import', schemaVersion: schema.body.data.schemaVersion, issues } },
    });
    expect(view.body.data.progress.checkpoints.every((cp: any) => cp.status === 'done')).toBe(true);
  }, 180_000);
});
