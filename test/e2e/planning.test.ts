/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createUser, createWorkspace, type TestKey, type TestUser } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request, type ApiResponse } from '../support/http.js';

/**
 * The planning domain through the gateway, in both modes: projects, milestones, programs,
 * initiatives, issues and what accumulates on them, search, bulk update, the task contract,
 * reminders, launch readiness, events, bad input on every endpoint, and (all-in-one) the demo
 * workspace seeded once.
 */
describe.each<Mode>(['all-in-one', 'distributed'])('planning (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;
  let ws: string;
  let projectId: string;
  let milestoneId: string;
  let agent: TestKey;
  let reader: TestKey;
  let member: TestUser;

  const call = (method: string, path: string, options: { body?: unknown; cookie?: string; token?: string; rawBody?: string } = {}): Promise<ApiResponse> =>
    request(cluster.baseUrl, method, path, options);
  const as = (cookie: string) => ({
    get: (path: string) => call('GET', path, { cookie }),
    post: (path: string, body: unknown) => call('POST', path, { cookie, body }),
    patch: (path: string, body: unknown) => call('PATCH', path, { cookie, body }),
  });
  const api = {
    get: (path: string) => call('GET', path, { cookie: admin }),
    post: (path: string, body: unknown) => call('POST', path, { cookie: admin, body }),
    patch: (path: string, body: unknown) => call('PATCH', path, { cookie: admin, body }),
  };
  const newIssue = async (body: Record<string, unknown>): Promise<any> => {
    const res = await api.post('/api/issues', { projectId, ...body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data;
  };

  beforeAll(async () => {
    cluster = await startCluster(mode, mode === 'all-in-one' ? { env: { SERVICE_DEMO: '1' } } : {});
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = (await createWorkspace(cluster.baseUrl, admin, `Planning ${mode}`, 'pro')).id;
    agent = await createKey(cluster.baseUrl, admin, ws, 'pro', ['issues:read', 'issues:write', 'projects:read'], 'agent-one');
    reader = await createKey(cluster.baseUrl, admin, ws, 'pro', ['issues:read'], 'agent-reader');
    member = await createUser(cluster.baseUrl, admin, 'member');
    const added = await api.post(`/api/workspaces/${ws}/members`, { userId: member.id, role: 'member' });
    expect([200, 201]).toContain(added.status);
    const project = await api.post('/api/projects', { workspaceId: ws, name: 'Planning API', goal: 'Fast search' });
    expect(project.status).toBe(201);
    projectId = project.body.data.id;
    const milestone = await api.post('/api/milestones', { projectId, name: 'Beta', targetDate: '2030-01-31' });
    expect(milestone.status).toBe(201);
    milestoneId = milestone.body.data.id;
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('planning: projects, milestones, programs and initiatives', async () => {
    const program = await api.post('/api/programs', { workspaceId: ws, name: 'Platform', description: 'Core work' });
    expect(program.status).toBe(201);
    expect(program.body.data).toMatchObject({ workspaceId: ws, name: 'Platform', status: 'active', description: 'Core work', version: 1 });
    const initiative = await api.post('/api/initiatives', {
      programId: program.body.data.id,
      name: 'Public launch',
      goal: 'Launch with proof',
      targetDate: '2030-06-30',
      contextPack: [
        { kind: 'doc', title: 'Checklist', path: 'docs/launch.md' },
        { kind: 'link', title: 'Spec', url: 'https://example.com/spec' },
      ],
    });
    expect(initiative.status).toBe(201);
    expect(initiative.body.data).toMatchObject({ programId: program.body.data.id, goal: 'Launch with proof', targetDate: '2030-06-30', startDate: null });
    expect(initiative.body.data.ownerIds).toHaveLength(1);
    expect(initiative.body.data.contextPack).toEqual([
      { kind: 'doc', title: 'Checklist', path: 'docs/launch.md', url: null, note: null },
      { kind: 'link', title: 'Spec', path: null, url: 'https://example.com/spec', note: null },
    ]);
    const initiatives = await api.get(`/api/initiatives?workspaceId=${ws}&programId=${program.body.data.id}&status=active&q=LAUNCH`);
    expect(initiatives.body).toEqual({ data: [initiative.body.data], page: { nextCursor: null } });
    expect((await api.get(`/api/initiatives/${initiative.body.data.id}`)).body.data).toEqual(initiative.body.data);
    expect((await api.get(`/api/programs?workspaceId=${ws}&q=plat&status=active`)).body.data.map((p: any) => p.id)).toEqual([program.body.data.id]);

    const projects = await api.get(`/api/projects?workspaceId=${ws}&q=planning`);
    expect(projects.body.data.map((p: any) => p.id)).toEqual([projectId]);
    expect((await api.get(`/api/milestones?projectId=${projectId}`)).body.data).toEqual([
      expect.objectContaining({ id: milestoneId, projectId, name: 'Beta', status: 'active', targetDate: '2030-01-31' }),
    ]);

    // PATCH /api/projects as documented: projectId plus status and/or goal; retry-safe.
    const patched = await api.patch('/api/projects', { projectId, status: 'paused', goal: 'Fast, indexed search' });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toMatchObject({ id: projectId, status: 'paused', goal: 'Fast, indexed search', version: 2 });
    expect(patched.body.data.updatedAt).toEqual(expect.any(String));
    const retry = await api.patch('/api/projects', { projectId, status: 'paused', goal: 'Fast, indexed search' });
    expect(retry.body.data).toEqual(patched.body.data);
    expect((await api.patch('/api/projects', { projectId, status: 'active' })).body.data.status).toBe('active');
    // The member cannot manage projects; the agent token reads them.
    expect((await as(member.cookie).patch('/api/projects', { projectId, status: 'paused' })).status).toBe(403);
    expect((await call('GET', `/api/projects?workspaceId=${ws}`, { token: agent.token })).status).toBe(200);
  });

  it('planning: an issue from creation through work to done, with its detail', async () => {
    const first = await newIssue({ title: 'Design the index', priority: 'high', labels: ['feature:search'], milestoneId, dueDate: '2030-01-15' });
    const second = await newIssue({
      title: 'Build the index',
      priority: 'urgent',
      dependencies: [first.id],
      acceptanceChecks: [{ title: 'p99 under 10 ms' }],
      agent: { instructions: { objective: 'Index search', expectedOutput: 'A PR', verification: ['pnpm bench'] } },
    });
    expect(second).toMatchObject({
      workspaceId: ws,
      projectId,
      status: 'ready',
      priority: 'urgent',
      dependencies: [first.id],
      openDependencyCount: 1,
      agent: { assignedAgentId: null, readiness: 'blocked', instructions: { objective: 'Index search', verification: ['pnpm bench'] } },
      taskHealth: { blocksAgentClaim: true, reasons: ['dependencies-open'], firstReminder: { kind: 'missing-dates' } },
      version: 1,
    });
    expect(second.nextAction).toMatch(/dependency/);

    const detail = await api.get(`/api/issues/${first.id}`);
    expect(detail.status).toBe(200);
    expect(detail.body.data).toMatchObject({ id: first.id, milestoneId, comments: [], commentCount: 0, activityCount: 1, evidence: [], approvals: [] });
    expect(detail.body.data.activity).toEqual([expect.objectContaining({ kind: 'created', issueId: first.id })]);
    expect(detail.body.data.dependencyGraph).toEqual({
      dependencies: [],
      dependents: [{ id: second.id, title: 'Build the index', status: 'ready' }],
      edges: [{ sourceIssueId: first.id, targetIssueId: second.id }],
    });

    // Status moves: allowed ones pass, others are 409 invalid-transition naming the move.
    const refused = await api.patch(`/api/issues/${first.id}`, { status: 'done' });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'work-already-claimed', reason: 'invalid-transition' });
    expect(refused.body.error.message).toContain("'ready' to 'done'");
    const started = await api.patch(`/api/issues/${first.id}`, { status: 'in-progress' });
    expect(started.status).toBe(200);
    expect(started.body).toMatchObject({ data: { status: 'in-progress', version: 2 }, meta: { changedFields: ['status'] } });
    const again = await api.patch(`/api/issues/${first.id}`, { status: 'in-progress' });
    expect(again.body).toMatchObject({ data: { version: 2 }, meta: { changedFields: [] } });
    expect((await api.patch(`/api/issues/${first.id}`, { dueDate: null, estimate: 3 })).body.data).toMatchObject({ dueDate: null, estimate: 3 });
    expect((await api.patch(`/api/issues/${first.id}`, { version: 1, title: 'stale' })).status).toBe(409);

    // Work on it: comments, time, evidence, an approval decided by a person.
    const comment = await call('POST', `/api/issues/${first.id}/comments`, { token: agent.token, body: { body: 'Started on the index' } });
    expect(comment.status).toBe(201);
    expect(comment.body.data).toMatchObject({ issueId: first.id, authorType: 'api-key', body: 'Started on the index' });
    const time = await call('POST', `/api/issues/${first.id}/time-entries`, { token: agent.token, body: { minutes: 45, note: 'spike' } });
    expect(time.status).toBe(201);
    expect(time.body.data).toMatchObject({ timeEntry: { minutes: 45, note: 'spike' }, totalMinutes: 45 });
    const evidence = await call('POST', `/api/issues/${first.id}/evidence`, { token: agent.token, body: { kind: 'link', title: 'Design doc', url: 'https://example.com/d' } });
    expect(evidence.status).toBe(201);
    const approval = await call('POST', `/api/issues/${first.id}/approvals`, { token: agent.token, body: { reason: 'Ready to merge?' } });
    expect(approval.status).toBe(201);
    expect(approval.body.data.status).toBe('pending');
    const byToken = await call('POST', `/api/issues/${first.id}/approvals/${approval.body.data.id}/decision`, { token: agent.token, body: { decision: 'approved' } });
    expect(byToken.status).toBe(403);
    const decided = await as(member.cookie).post(`/api/issues/${first.id}/approvals/${approval.body.data.id}/decision`, { decision: 'approved', note: 'Go' });
    expect(decided.status).toBe(200);
    expect(decided.body.data).toMatchObject({ status: 'approved', decidedBy: member.id, decisionNote: 'Go' });
    expect((await as(member.cookie).post(`/api/issues/${first.id}/approvals/${approval.body.data.id}/decision`, { decision: 'rejected' })).status).toBe(409);

    for (const status of ['in-review', 'done']) expect((await api.patch(`/api/issues/${first.id}`, { status })).status).toBe(200);
    const unblocked = await api.get(`/api/issues/${second.id}`);
    expect(unblocked.body.data).toMatchObject({ openDependencyCount: 0, agent: { readiness: 'ready' }, taskHealth: { blocksAgentClaim: false } });

    const full = await api.get(`/api/issues/${first.id}`);
    expect(full.body.data).toMatchObject({ status: 'done', timeLoggedMinutes: 45, evidenceCount: 1, commentCount: 1 });
    expect(full.body.data.activity.map((a: any) => a.kind)).toEqual(
      expect.arrayContaining(['created', 'updated', 'comment-added', 'time-logged', 'evidence-added', 'approval-requested', 'approval-decided']),
    );
    const statusChange = full.body.data.activity.find((a: any) => a.changes.some((c: any) => c.field === 'status'));
    expect(statusChange.changes).toContainEqual({ field: 'status', from: 'ready', to: 'in-progress' });
    for (const list of ['comments', 'time-entries', 'evidence', 'approvals', 'activity']) {
      const res = await call('GET', `/api/issues/${first.id}/${list}?limit=50`, { token: reader.token });
      expect(res.status, list).toBe(200);
      expect(res.body.data.length, list).toBeGreaterThan(0);
      expect(res.body.page).toEqual({ nextCursor: null });
    }
  });

  it('planning: search filters, sorts, pages and the dependency graph', async () => {
    const tag = `srch${mode === 'all-in-one' ? 'a' : 'd'}`;
    const made: any[] = [];
    for (let i = 0; i < 9; i++) {
      made.push(
        await newIssue({
          title: `${tag} item ${i}${i === 4 ? ' (a.b)' : ''}`,
          priority: ['urgent', 'high', 'medium', 'low', 'none'][i % 5],
          labels: [tag, ...(i % 2 ? ['odd'] : [])],
          status: i % 3 === 0 ? 'backlog' : 'ready',
          ...(i > 0 && i % 4 === 0 ? { dependencies: [made[i - 1].id] } : {}),
        }),
      );
    }
    const search = async (query: string) => {
      const res = await api.get(`/api/issues?workspaceId=${ws}&label=${tag}&${query}`);
      expect(res.status, `${query}: ${JSON.stringify(res.body)}`).toBe(200);
      return res.body;
    };
    const titles = (body: any) => body.data.issues.map((i: any) => i.title);
    expect((await search('limit=200')).data.issues).toHaveLength(9);
    expect(titles(await search('status=backlog'))).toHaveLength(3);
    const odd = await api.get(`/api/issues?workspaceId=${ws}&status=backlog,ready&label=odd&label=nothing-else`);
    expect(odd.body.data.issues).toHaveLength(4);
    expect(titles(await search('priority=urgent,none')).sort()).toEqual([`${tag} item 0`, `${tag} item 4 (a.b)`, `${tag} item 5`]);
    expect(titles(await search('q=(A.B)'))).toEqual([`${tag} item 4 (a.b)`]);
    expect(titles(await search('q=a.b'))).toEqual([`${tag} item 4 (a.b)`]);
    expect(titles(await search('dependencyState=blocked'))).toEqual([`${tag} item 8`, `${tag} item 4 (a.b)`]);
    const byPriority = (await search('sort=priority')).data.issues.map((i: any) => i.priority);
    expect(byPriority.slice(0, 2)).toEqual(['urgent', 'urgent']);
    expect(byPriority.at(-1)).toBe('none');
    expect(titles(await search('sort=title&direction=desc'))[0]).toBe(`${tag} item 8`);

    const graph = await search('includeDependencyGraph=true');
    expect(graph.data.dependencyGraph.edges).toEqual(
      expect.arrayContaining([
        { sourceIssueId: made[3].id, targetIssueId: made[4].id },
        { sourceIssueId: made[7].id, targetIssueId: made[8].id },
      ]),
    );
    expect((await search('')).data.dependencyGraph).toBeUndefined();
    for (const issue of graph.data.issues) expect(issue.taskHealth).toEqual(expect.objectContaining({ blocksAgentClaim: expect.any(Boolean), safeNextActions: expect.any(Array) }));

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await search(`sort=createdAt&direction=asc&limit=4${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...page.data.issues.map((i: any) => i.id));
      cursor = page.page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(made.map((m) => m.id));

    // A token sees its workspace's tasks; an agent's health reflects assignments.
    const asAgent = await call('GET', `/api/issues?label=${tag}&limit=200`, { token: reader.token });
    expect(asAgent.body.data.issues).toHaveLength(9);
  });

  it('planning: bulk update previews without writing and applies to all or none', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await newIssue({ title: `bulk ${mode} ${i}`, priority: 'low' })).id);
    const preview = await api.post('/api/issues/bulk-update', { issueIds: ids, mode: 'preview', patch: { priority: 'high', milestoneId, dueDate: '2030-02-01' } });
    expect(preview.status).toBe(200);
    expect(preview.body.data).toMatchObject({
      plan: { requestedCount: 5, targetCount: 5, skippedCount: 0, changedFieldLabels: ['Priority', 'Milestone', 'Due date'] },
      applied: false,
    });
    expect(preview.body.data.updatedIssues.map((i: any) => i.priority)).toEqual(Array(5).fill('high'));
    expect(preview.body.data.activity[0].id).toBeNull();
    expect((await api.get(`/api/issues/${ids[0]}`)).body.data).toMatchObject({ priority: 'low', version: 1 });

    const bad = await api.post('/api/issues/bulk-update', { issueIds: [...ids, 'iss_unknown'], mode: 'apply', patch: { priority: 'high' } });
    expect(bad.status).toBe(404);
    expect(bad.body.error).toMatchObject({ code: 'not-found', failedIds: ['iss_unknown'] });
    expect((await api.get(`/api/issues/${ids[0]}`)).body.data.priority).toBe('low');

    const applied = await api.post('/api/issues/bulk-update', { issueIds: ids, mode: 'apply', patch: { priority: 'high', labels: { add: ['bulk'] }, status: 'in-progress' } });
    expect(applied.status).toBe(200);
    expect(applied.body.data.plan).toMatchObject({ targetCount: 5, skippedCount: 0, changedFieldLabels: ['Status', 'Priority', 'Labels'] });
    expect(applied.body.data.activity).toHaveLength(5);
    for (const id of ids) expect((await api.get(`/api/issues/${id}`)).body.data).toMatchObject({ priority: 'high', status: 'in-progress', labels: ['bulk'], version: 2 });
    const refused = await api.post('/api/issues/bulk-update', { issueIds: ids, mode: 'apply', patch: { status: 'done' } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ reason: 'invalid-transition', failedIds: ids });
  });

  it('planning: the task contract is merged by an agent token, retry-safe, and read back', async () => {
    const issue = await newIssue({ title: `contract ${mode}` });
    const path = `/api/issues/${issue.id}/task-contract`;
    const body = { agent: { instructions: { objective: 'Ship search', expectedOutput: 'A PR', verification: ['pnpm test', 'pnpm bench'] } } };
    const first = await call('PATCH', path, { token: agent.token, body });
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({
      issue: { id: issue.id, status: 'ready' },
      taskContract: { issueId: issue.id, goal: 'Ship search', completeness: { ready: true, score: 0.5 } },
      changedSections: ['goal', 'expectedOutput', 'verification'],
    });
    const retry = await call('PATCH', path, { token: agent.token, body });
    expect(retry.body.data.changedSections).toEqual([]);
    expect(retry.body.data.taskContract.version).toBe(first.body.data.taskContract.version);
    const merged = await call('PATCH', path, { token: agent.token, body: { agent: { instructions: { constraints: ['No API change'], escalation: null } } } });
    expect(merged.body.data.taskContract).toMatchObject({ goal: 'Ship search', constraints: ['No API change'], completeness: { score: 0.67 } });
    expect((await api.get(path)).body.data.taskContract.constraints).toEqual(['No API change']);
    const activity = (await api.get(`/api/issues/${issue.id}/activity`)).body.data.map((a: any) => a.kind);
    expect(activity).toEqual(['created', 'contract-updated', 'contract-updated']);
    // A session uses PATCH /api/issues/{id}; the contract endpoint is for agent tokens with issues:write.
    expect((await api.patch(path, body)).status).toBe(403);
    expect((await call('PATCH', path, { token: reader.token, body })).status).toBe(403);
    expect((await request(cluster.baseUrl, 'PATCH', path, { body })).status).toBe(401);
    const human = await api.patch(`/api/issues/${issue.id}`, { agent: { instructions: { objective: 'Ship indexed search' } } });
    expect(human.body.data.agent.instructions.objective).toBe('Ship indexed search');
    expect((await call('GET', path, { token: reader.token })).body.data.taskContract.goal).toBe('Ship indexed search');
  });

  it('planning: reminders and launch readiness come from real data', async () => {
    const late = await newIssue({ title: `late ${mode}`, dueDate: '2020-01-01', priority: 'urgent', labels: ['launch-blocker'] });
    const reminders = await api.get(`/api/issues/reminders?workspaceId=${ws}&kind=overdue`);
    expect(reminders.status).toBe(200);
    expect(reminders.body.data).toContainEqual(
      expect.objectContaining({ issueId: late.id, reminders: [{ kind: 'overdue', message: expect.any(String) }], safeNextActions: expect.arrayContaining([expect.objectContaining({ action: 'reschedule-or-escalate' })]) }),
    );
    const all = await call('GET', `/api/issues/reminders?workspaceId=${ws}&limit=200`, { token: reader.token });
    expect(all.body.data.some((i: any) => i.reminders.some((r: any) => r.kind === 'missing-dates'))).toBe(true);

    const diagnostics = await api.get('/api/admin/diagnostics');
    expect(diagnostics.status).toBe(200);
    const readiness = diagnostics.body.data.productReadiness;
    expect(readiness.launchProof.readyForPublicLaunch).toBe(false);
    expect(readiness.launchProof.summary.publicLaunchBlockerCount).toBeGreaterThanOrEqual(1);
    expect(readiness.launchProof.nextProof).toEqual({ id: expect.stringMatching(/^iss_/), nextAction: expect.any(String) });
    expect(readiness.implementation).toEqual({ completionPercent: expect.any(Number), verifiedCount: expect.any(Number) });
    expect(diagnostics.body.data.redacted).toBe(true);
    expect(JSON.stringify(diagnostics.body)).not.toContain(`late ${mode}`);
  });

  it('planning: every change reaches the audit trail as an event with ids, never titles', async () => {
    const issue = await newIssue({ title: `audited secret ${mode}` });
    await api.patch(`/api/issues/${issue.id}`, { status: 'in-progress' });
    await call('POST', `/api/issues/${issue.id}/evidence`, { token: agent.token, body: { kind: 'note', title: 'secret proof' } });
    await call('POST', `/api/issues/${issue.id}/approvals`, { token: agent.token, body: { reason: 'secret reason' } });
    for (const type of ['task.created', 'task.status-changed', 'evidence.added', 'approval.requested']) {
      const found = await eventually(
        async () => {
          const res = await api.get(`/api/admin/audit-events?workspaceId=${ws}&type=${type}&limit=200`);
          return res.body.data?.length > 0 ? res.body.data : undefined;
        },
        20_000,
        `${type} in the audit trail`,
      );
      expect(found[0]).toMatchObject({ type, workspaceId: ws, outcome: 'allowed' });
      expect(JSON.stringify(found)).not.toContain('secret');
    }
  });

  it('planning: bad input on every endpoint is 400 naming the field; unknown ids are 404', async () => {
    const issue = await newIssue({ title: `bad input ${mode}` });
    const id = issue.id;
    const cases: [string, string, unknown, string][] = [
      ['POST', '/api/projects', { name: 'x' }, 'workspaceId'],
      ['POST', '/api/projects', { workspaceId: ws, name: 42 }, 'name'],
      ['POST', '/api/projects', { workspaceId: ws, name: 'x', status: 'open' }, 'status'],
      ['POST', '/api/projects', { workspaceId: ws, name: 'x'.repeat(201) }, 'name'],
      ['PATCH', '/api/projects', { status: 'paused' }, 'projectId'],
      ['PATCH', '/api/projects', { projectId, status: 'done' }, 'status'],
      ['PATCH', '/api/projects', { projectId }, 'status'],
      ['POST', '/api/milestones', { projectId, name: 'x', targetDate: '31/01/2030' }, 'targetDate'],
      ['POST', '/api/milestones', { name: 'x' }, 'projectId'],
      ['POST', '/api/programs', { workspaceId: ws, name: '' }, 'name'],
      ['POST', '/api/initiatives', { programId: 'prg_x', name: 'x', contextPack: [{ kind: 'video', title: 'x' }] }, 'contextPack.0.kind'],
      ['POST', '/api/issues', { title: 'x' }, 'projectId'],
      ['POST', '/api/issues', { projectId, title: 'x', priority: 'p0' }, 'priority'],
      ['POST', '/api/issues', { projectId, title: 'x', status: 'open' }, 'status'],
      ['POST', '/api/issues', { projectId, title: 'x'.repeat(301) }, 'title'],
      ['POST', '/api/issues', { projectId, title: 'x', estimate: 'three' }, 'estimate'],
      ['POST', '/api/issues', { projectId, title: 'x', dueDate: '2030-02-30' }, 'dueDate'],
      ['POST', '/api/issues', { projectId, title: 'x', labels: 'a' }, 'labels'],
      ['POST', '/api/issues', { projectId, title: 'x', agent: { assignedAgentId: 'Bad Agent' } }, 'agent.assignedAgentId'],
      ['PATCH', `/api/issues/${id}`, {}, 'body'],
      ['PATCH', `/api/issues/${id}`, { status: 'open' }, 'status'],
      ['PATCH', `/api/issues/${id}`, { title: null }, 'title'],
      ['PATCH', `/api/issues/${id}`, { dependencies: 'x' }, 'dependencies'],
      ['PATCH', `/api/issues/${id}`, { dependencies: [id] }, 'dependencies'],
      ['PATCH', `/api/issues/${id}`, { description: 'x'.repeat(20_001) }, 'description'],
      ['POST', '/api/issues/bulk-update', { issueIds: [id], mode: 'apply' }, 'patch'],
      ['POST', '/api/issues/bulk-update', { issueIds: [id], mode: 'dry-run', patch: { priority: 'low' } }, 'mode'],
      ['POST', '/api/issues/bulk-update', { issueIds: [], mode: 'apply', patch: { priority: 'low' } }, 'issueIds'],
      ['POST', '/api/issues/bulk-update', { issueIds: Array.from({ length: 201 }, (_, i) => `iss_${i}`), mode: 'apply', patch: { priority: 'low' } }, 'issueIds'],
      ['POST', '/api/issues/bulk-update', { issueIds: [id], mode: 'apply', patch: { title: 'x' } }, 'patch.title'],
      ['POST', `/api/issues/${id}/comments`, { body: '' }, 'body'],
      ['POST', `/api/issues/${id}/time-entries`, { minutes: 'ten' }, 'minutes'],
      ['POST', `/api/issues/${id}/time-entries`, { minutes: 0 }, 'minutes'],
      ['POST', `/api/issues/${id}/evidence`, { kind: 'video', title: 'x' }, 'kind'],
      ['POST', `/api/issues/${id}/evidence`, { kind: 'link', title: 'x' }, 'url'],
      ['POST', `/api/issues/${id}/approvals`, {}, 'reason'],
      ['POST', `/api/issues/${id}/approvals/apr_x/decision`, { decision: 'maybe' }, 'decision'],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await call(method, path, { cookie: admin, body });
      expect(res.status, `${method} ${path} ${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.error.code).toBe('invalid-input');
      expect(res.body.error.field, `${method} ${path}`).toBe(field);
    }
    const queries: [string, string][] = [
      ['/api/issues?status=open', 'status'],
      ['/api/issues?priority=p0', 'priority'],
      ['/api/issues?sort=rank', 'sort'],
      ['/api/issues?direction=up', 'direction'],
      ['/api/issues?dependencyState=maybe', 'dependencyState'],
      ['/api/issues?limit=0', 'limit'],
      ['/api/issues?limit=201', 'limit'],
      ['/api/issues?limit=abc', 'limit'],
      ['/api/issues?cursor=garbage', 'cursor'],
      ['/api/issues?includeDependencyGraph=perhaps', 'includeDependencyGraph'],
      [`/api/issues?q=${'x'.repeat(201)}`, 'q'],
      ['/api/issues/reminders?kind=late', 'kind'],
      ['/api/projects?status=open', 'status'],
      ['/api/milestones', 'projectId'],
      ['/api/programs?status=x', 'status'],
      ['/api/initiatives?limit=0', 'limit'],
      [`/api/issues/${id}/comments?limit=500`, 'limit'],
    ];
    for (const [path, field] of queries) {
      const res = await api.get(path);
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid-input', field });
    }
    const malformed = await call('POST', '/api/issues', { cookie: admin, rawBody: '{"projectId":' });
    expect(malformed.status).toBe(400);

    const unknown: [string, string, unknown?][] = [
      ['GET', '/api/issues/iss_unknown'],
      ['PATCH', '/api/issues/iss_unknown', { priority: 'low' }],
      ['GET', '/api/issues/iss_unknown/task-contract'],
      ['GET', '/api/issues/iss_unknown/comments'],
      ['POST', '/api/issues/iss_unknown/comments', { body: 'x' }],
      ['POST', '/api/issues/iss_unknown/time-entries', { minutes: 5 }],
      ['POST', '/api/issues/iss_unknown/evidence', { kind: 'note', title: 'x' }],
      ['POST', '/api/issues/iss_unknown/approvals', { reason: 'x' }],
      ['POST', `/api/issues/${id}/approvals/apr_unknown/decision`, { decision: 'approved' }],
      ['GET', '/api/issues/iss_unknown/activity'],
      ['PATCH', '/api/projects', { projectId: 'prj_unknown', status: 'paused' }],
      ['GET', '/api/projects/prj_unknown'],
      ['GET', '/api/milestones?projectId=prj_unknown'],
      ['POST', '/api/milestones', { projectId: 'prj_unknown', name: 'x' }],
      ['POST', '/api/issues', { projectId: 'prj_unknown', title: 'x' }],
      ['POST', '/api/issues', { projectId, title: 'x', milestoneId: 'ms_unknown' }],
      ['POST', '/api/issues', { projectId, title: 'x', agent: { assignedAgentId: 'nobody' } }],
      ['GET', '/api/initiatives?programId=prg_unknown'],
      ['GET', '/api/initiatives/ini_unknown'],
      ['POST', '/api/initiatives', { programId: 'prg_unknown', name: 'x' }],
      ['GET', '/api/issues?workspaceId=ws_unknown'],
      ['POST', '/api/projects', { workspaceId: 'ws_unknown', name: 'x' }],
    ];
    for (const [method, path, body] of unknown) {
      const res = await call(method, path, { cookie: admin, body });
      expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBe(404);
      expect(res.body.error.code).toBe('not-found');
    }
    const taskContract = await call('PATCH', '/api/issues/iss_unknown/task-contract', { token: agent.token, body: { agent: { instructions: { objective: 'x' } } } });
    expect(taskContract.status).toBe(404);
    const contractField = await call('PATCH', `/api/issues/${id}/task-contract`, { token: agent.token, body: { agent: { instructions: { verification: 'x' } } } });
    expect(contractField.body.error).toMatchObject({ code: 'invalid-input', field: 'agent.instructions.verification' });
  });

  it('planning: credentials are required; a token never reaches another workspace', async () => {
    expect((await call('GET', `/api/issues?workspaceId=${ws}`)).status).toBe(401);
    expect((await call('POST', '/api/issues', { cookie: 'service_session=nope', body: { projectId, title: 'x' } })).status).toBe(401);
    const otherWs = (await createWorkspace(cluster.baseUrl, admin, `Other ${mode}`, 'pro')).id;
    const otherProject = (await api.post('/api/projects', { workspaceId: otherWs, name: 'Theirs' })).body.data.id;
    const theirs = (await api.post('/api/issues', { projectId: otherProject, title: 'Theirs' })).body.data.id;
    expect((await call('GET', `/api/issues/${theirs}`, { token: agent.token })).status).toBe(404);
    expect((await call('GET', `/api/issues?workspaceId=${otherWs}`, { token: agent.token })).status).toBe(404);
    expect((await call('PATCH', `/api/issues/${theirs}`, { token: agent.token, body: { priority: 'low' } })).status).toBe(404);
    expect((await call('POST', '/api/issues', { token: reader.token, body: { projectId, title: 'x' } })).status).toBe(403);
    expect((await as(member.cookie).get(`/api/issues/${theirs}`)).status).toBe(403);
  });

  it.runIf(mode === 'all-in-one')('planning: the all-in-one mode seeds the demo workspace once', async () => {
    const demo = async () => {
      const list = await api.get('/api/workspaces?q=demo-workspace');
      const workspaces = list.body.data.filter((w: any) => w.slug === 'demo-workspace');
      expect(workspaces).toHaveLength(1);
      const workspaceId = workspaces[0].id;
      const issues = (await api.get(`/api/issues?workspaceId=${workspaceId}&limit=200`)).body.data.issues;
      return { workspace: workspaces[0], issues };
    };
    const before = await demo();
    expect(before.workspace).toMatchObject({ planId: 'pro', name: 'Demo workspace' });
    expect(before.issues.length).toBeGreaterThanOrEqual(5);
    expect(before.issues.some((i: any) => i.labels.includes('launch-blocker'))).toBe(true);
    expect(before.issues.some((i: any) => i.dependencies.length > 0)).toBe(true);
    const proc = cluster.process('all');
    await proc.stop();
    await proc.start();
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    const after = await demo();
    expect(after.workspace.id).toBe(before.workspace.id);
    expect(after.issues.map((i: any) => i.id).sort()).toEqual(before.issues.map((i: any) => i.id).sort());
  });

  it.runIf(mode === 'distributed')('planning: no demo data outside the all-in-one mode', async () => {
    const list = await api.get('/api/workspaces?q=demo-workspace');
    expect(list.body.data.filter((w: any) => w.slug === 'demo-workspace')).toEqual([]);
  });
});
