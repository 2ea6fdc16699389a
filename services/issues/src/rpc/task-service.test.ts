import { ServiceError } from '@planning/errors';
import type { CreateTaskRequest } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { Principal } from '@planning/rpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TaskRecord } from '../store/task-documents.js';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';

let h: PlanningHarness;
let owner: Principal;
let ws: string;
let projectId: string;

async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  return err as ServiceError;
}

type CreateInit = Exclude<Parameters<PlanningHarness['tasks']['createTask']>[0], CreateTaskRequest>;

async function create(request: Partial<CreateInit> = {}, principal = owner): Promise<string> {
  const { task } = await h.tasks.createTask({ projectId, title: 'A task', ...request } as CreateInit, principal);
  return task?.task?.id as string;
}

const stored = async (id: string) => (await h.store.collection<TaskRecord>('tasks').findOne({ _id: id })) as TaskRecord;

beforeEach(async () => {
  h = await createPlanningHarness();
  ws = await h.workspace({ ownerId: 'usr_owner' });
  owner = h.user('usr_owner');
  projectId = (await h.projects.createProject({ workspaceId: ws, name: 'P' }, owner)).project?.id as string;
});

afterEach(async () => {
  await h.close();
});

describe('tasks: create and read', () => {
  it('tasks: a new task has the documented fields, defaults, activity and a task.created event without its title', async () => {
    const { task } = await h.tasks.createTask(
      {
        projectId,
        title: 'Secret launch title',
        description: 'Secret body',
        labels: ['feature:x'],
        estimate: 2.5,
        acceptanceChecks: [{ id: '', title: 'It works' }],
        instructions: { objective: 'Do it', expectedOutput: 'PR', verification: ['tests'], constraints: [], permissions: [], escalation: '' },
      },
      owner,
    );
    const t = task?.task;
    expect(t).toMatchObject({
      workspaceId: ws,
      projectId,
      title: 'Secret launch title',
      description: 'Secret body',
      status: 'ready',
      priority: 'medium',
      labels: ['feature:x'],
      estimate: 2.5,
      dependencies: [],
      createdBy: 'usr_owner',
      version: 1,
      openDependencyCount: 0,
      agent: { readiness: 'ready', instructions: { objective: 'Do it' } },
    });
    expect(t?.id).toMatch(/^iss_/);
    expect(t?.acceptanceChecks).toEqual([expect.objectContaining({ id: expect.stringMatching(/^chk_/), title: 'It works', done: false })]);
    expect(t?.createdAt).toBe(h.now.toISOString());
    expect(task?.health).toMatchObject({ blocksAgentClaim: false, firstReminder: { kind: 'missing-dates' } });
    const events = await h.events('task.created');
    expect(events.map((e) => e.data)).toEqual([{ subject: { type: 'task', id: t?.id }, issueId: t?.id, projectId, status: 'ready' }]);
    expect(JSON.stringify(await h.events())).not.toMatch(/Secret/);
    const detail = await h.tasks.getTask({ id: t?.id as string }, owner);
    expect(detail.activity.map((a) => a.kind)).toEqual(['created']);
  });

  it('tasks: references must exist in the workspace (404 unknown, 400 wrong project or workspace)', async () => {
    const otherProject = (await h.projects.createProject({ workspaceId: ws, name: 'Other' }, owner)).project?.id as string;
    const otherMilestone = (await h.projects.createMilestone({ projectId: otherProject, name: 'M' }, owner)).milestone?.id as string;
    expect((await failure(create({ projectId: 'prj_missing' }))).code).toBe('not-found');
    expect((await failure(create({ milestoneId: 'ms_missing' }))).code).toBe('not-found');
    expect((await failure(create({ milestoneId: otherMilestone }))).details.field).toBe('milestoneId');
    expect((await failure(create({ dependencies: ['iss_missing'] }))).code).toBe('not-found');
    expect((await failure(create({ parentId: 'iss_missing' }))).code).toBe('not-found');
    expect((await failure(create({ initiativeId: 'ini_missing' }))).code).toBe('not-found');
    expect((await failure(create({ assignedAgentId: 'ghost' }))).code).toBe('not-found');
    expect((await failure(create({ workspaceId: 'ws_other' }))).details.field).toBe('workspaceId');

    const otherWs = await h.workspace({ ownerId: 'usr_owner' });
    const foreignProject = (await h.projects.createProject({ workspaceId: otherWs, name: 'F' }, owner)).project?.id as string;
    const foreign = await create({ projectId: foreignProject });
    const crossUser = await failure(create({ dependencies: [foreign] }));
    expect(crossUser).toMatchObject({ code: 'invalid-input', details: { field: 'dependencies' } });
  });

  it('tasks: bad input names the field', async () => {
    const field = async (request: Partial<CreateInit>) => (await failure(create(request))).details.field;
    expect(await field({ projectId: '' })).toBe('projectId');
    expect(await field({ title: '' })).toBe('title');
    expect(await field({ title: 'x'.repeat(301) })).toBe('title');
    expect(await field({ description: 'x'.repeat(20_001) })).toBe('description');
    expect(await field({ status: 'open' })).toBe('status');
    expect(await field({ priority: 'P1' })).toBe('priority');
    expect(await field({ dueDate: '2025-13-01' })).toBe('dueDate');
    expect(await field({ estimate: -3 })).toBe('estimate');
    expect(await field({ labels: ['a,b'] })).toBe('labels[0]');
    expect(await field({ assignedAgentId: 'UPPER' })).toBe('agent.assignedAgentId');
    expect(await field({ instructions: { objective: 'x'.repeat(2001), constraints: [], expectedOutput: '', verification: [], permissions: [], escalation: '' } })).toBe(
      'agent.instructions.objective',
    );
    expect((await failure(h.tasks.getTask({ id: '' }, owner))).details.field).toBe('id');
    expect((await failure(h.tasks.getTask({ id: 'iss_missing' }, owner))).code).toBe('not-found');
  });

  it('tasks: the plan caps stored tasks (403 quota-exceeded with the quota object)', async () => {
    const free = await h.workspace({ ownerId: 'usr_owner', planId: 'free' });
    const freeProject = (await h.projects.createProject({ workspaceId: free, name: 'F' }, owner)).project?.id as string;
    // The quota counts the workspace's documents in `tasks`: fill it to the free plan's 500.
    await h.store.collection('tasks').insertMany(Array.from({ length: 500 }, (_, i) => ({ _id: `iss_fill_${i}`, workspaceId: free })));
    const err = await failure(create({ projectId: freeProject }));
    expect(err.code).toBe('quota-exceeded');
    expect(err.httpStatus).toBe(403);
    expect(err.details.quota).toEqual({ kind: 'stored-tasks', limit: 500, used: 500, resetsAt: '2025-07-01T00:00:00.000Z' });
    // A pro workspace has room.
    await expect(create()).resolves.toMatch(/^iss_/);
  });

  it('tasks: concurrent creates at the stored-task cap never exceed it', async () => {
    const free = await h.workspace({ ownerId: 'usr_owner', planId: 'free' });
    const freeProject = (await h.projects.createProject({ workspaceId: free, name: 'F' }, owner)).project?.id as string;
    // Three places left under the free plan's 500; twenty creates race for them.
    await h.store.collection('tasks').insertMany(Array.from({ length: 497 }, (_, i) => ({ _id: `iss_fill_${i}`, workspaceId: free })));
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => create({ projectId: freeProject, title: `Race ${i}` })));
    const won = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won).toHaveLength(3);
    expect(refused.every((r) => r.reason instanceof ServiceError && r.reason.code === 'quota-exceeded')).toBe(true);
    expect(await h.store.collection('tasks').countDocuments({ workspaceId: free })).toBe(500);
  });

  it('tasks: members write tasks, viewers only read, tokens need the scope and their own workspace', async () => {
    await h.addMember(ws, 'usr_member', 'member');
    await h.addMember(ws, 'usr_viewer', 'viewer');
    const id = await create({}, h.user('usr_member'));
    expect((await failure(create({}, h.user('usr_viewer')))).code).toBe('forbidden');
    await expect(h.tasks.getTask({ id }, h.user('usr_viewer'))).resolves.toBeTruthy();
    expect((await failure(h.tasks.getTask({ id }, h.user('usr_stranger')))).code).toBe('forbidden');
    expect((await failure(h.tasks.updateTask({ id, patch: { priority: 'low' } }, h.token(ws, ['issues:read'])))).code).toBe('forbidden');
    const otherWs = await h.workspace({ ownerId: 'usr_x' });
    expect((await failure(h.tasks.getTask({ id }, h.token(otherWs, ['issues:read'])))).code).toBe('not-found');
    expect((await failure(h.tasks.getTask({ id }, { type: 'anonymous', id: 'anonymous', isAdmin: false, scopes: [] }))).code).toBe('unauthorized');
  });
});

describe('tasks: changes', () => {
  it('tasks: a patch is retry-safe: the same body twice records one change', async () => {
    const id = await create();
    const first = await h.tasks.updateTask({ id, patch: { priority: 'high', dueDate: '2025-07-01' } }, owner);
    expect(first.changedFields).toEqual(['priority', 'dueDate']);
    expect(first.task?.task?.version).toBe(2);
    const again = await h.tasks.updateTask({ id, patch: { priority: 'high', dueDate: '2025-07-01' } }, owner);
    expect(again.changedFields).toEqual([]);
    expect(again.task?.task?.version).toBe(2);
    expect((await h.tasks.getTask({ id }, owner)).activity.map((a) => a.kind)).toEqual(['created', 'updated']);
    expect(await h.events('task.updated')).toHaveLength(1);
  });

  it('tasks: null unsets optional fields and an empty patch is refused', async () => {
    const id = await create({ dueDate: '2025-07-01', estimate: 3 });
    const res = await h.tasks.updateTask({ id, patch: { clearFields: ['dueDate', 'estimate'] } }, owner);
    expect(res.task?.task?.dueDate).toBeUndefined();
    expect(res.task?.task?.estimate).toBeUndefined();
    expect('dueDate' in (await stored(id))).toBe(false);
    expect((await failure(h.tasks.updateTask({ id, patch: {} }, owner))).details.field).toBe('body');
    expect((await failure(h.tasks.updateTask({ id, patch: { clearFields: ['title'] } }, owner))).details.field).toBe('clearFields');
  });

  it('tasks: status moves outside the allowed table are 409 invalid-transition naming the move', async () => {
    const id = await create();
    const err = await failure(h.tasks.updateTask({ id, patch: { status: 'done' } }, owner));
    expect(err).toMatchObject({ code: 'work-already-claimed', details: { reason: 'invalid-transition' } });
    expect(err.message).toContain("'ready' to 'done'");
    for (const status of ['in-progress', 'in-review', 'done', 'ready', 'cancelled', 'backlog']) {
      await h.tasks.updateTask({ id, patch: { status } }, owner);
    }
    const events = await h.events('task.status-changed');
    expect(events.map((e) => `${e.data.from}>${e.data.to}`)).toEqual([
      'ready>in-progress',
      'in-progress>in-review',
      'in-review>done',
      'done>ready',
      'ready>cancelled',
      'cancelled>backlog',
    ]);
  });

  it('tasks: an agent token cannot start a task by status (it claims), nor change a task assigned to another agent', async () => {
    await h.addAgent(ws, 'agent-a');
    await h.addAgent(ws, 'agent-b');
    const token = h.token(ws, ['issues:read', 'issues:write'], 'agent-a');
    const id = await create();
    const move = await failure(h.tasks.updateTask({ id, patch: { status: 'in-progress' } }, token));
    expect(move.details.reason).toBe('invalid-transition');
    const theirs = await create({ assignedAgentId: 'agent-b' });
    const other = await failure(h.tasks.updateTask({ id: theirs, patch: { priority: 'low' } }, token));
    expect(other).toMatchObject({ code: 'forbidden', details: { reason: 'assigned-to-another-agent' } });
    const mine = await create({ assignedAgentId: 'agent-a' });
    await expect(h.tasks.updateTask({ id: mine, patch: { priority: 'low' } }, token)).resolves.toBeTruthy();
    expect((await failure(h.records.addComment({ issueId: theirs, body: 'hi' }, token))).code).toBe('forbidden');
  });

  it('tasks: expected versions make a change conditional', async () => {
    const id = await create();
    await h.tasks.updateTask({ id, patch: { title: 'v2' }, expectedVersion: 1 }, owner);
    const err = await failure(h.tasks.updateTask({ id, patch: { title: 'v3' }, expectedVersion: 1 }, owner));
    expect(err).toMatchObject({ code: 'work-already-claimed', details: { reason: 'version-conflict' } });
    expect((await stored(id)).title).toBe('v2');
  });

  it('tasks: dependencies: cycles are refused (400), and open-dependency counts follow the prerequisites', async () => {
    const a = await create({ title: 'a' });
    const b = await create({ title: 'b', dependencies: [a] });
    const c = await create({ title: 'c', dependencies: [b] });
    expect((await stored(c)).openDependencyCount).toBe(1);
    expect((await stored(a)).dependentCount).toBe(1);
    const cycle = await failure(h.tasks.updateTask({ id: a, patch: { dependencies: { values: [c] } } }, owner));
    expect(cycle).toMatchObject({ code: 'invalid-input', details: { field: 'dependencies' } });
    expect(cycle.message).toContain('->');
    expect((await failure(h.tasks.updateTask({ id: a, patch: { dependencies: { values: [a] } } }, owner))).details.field).toBe('dependencies');

    // b waits for a: finishing a unblocks b; reopening a blocks it again.
    expect((await h.tasks.searchTasks({ workspaceId: ws, dependencyState: 'blocked' }, owner)).tasks.map((t) => t.task?.title).sort()).toEqual(['b', 'c']);
    for (const status of ['in-progress', 'in-review', 'done']) await h.tasks.updateTask({ id: a, patch: { status } }, owner);
    expect((await stored(b)).openDependencyCount).toBe(0);
    expect((await stored(b)).version).toBe(1);
    await h.tasks.updateTask({ id: a, patch: { status: 'ready' } }, owner);
    expect((await stored(b)).openDependencyCount).toBe(1);

    // Dropping the dependency updates both sides.
    await h.tasks.updateTask({ id: b, patch: { dependencies: { values: [] } } }, owner);
    expect((await stored(b)).openDependencyCount).toBe(0);
    expect((await stored(a)).dependentCount).toBe(0);
    const detail = await h.tasks.getTask({ id: b }, owner);
    expect(detail.dependents.map((d) => d.id)).toEqual([c]);
    expect(detail.dependencyGraph?.edges.map((e) => `${e.sourceIssueId}>${e.targetIssueId}`)).toEqual([`${b}>${c}`]);
  });

  it('tasks: a parent cannot be a descendant', async () => {
    const a = await create();
    const b = await create({ parentId: a });
    expect((await failure(h.tasks.updateTask({ id: a, patch: { parentId: b } }, owner))).details.field).toBe('parentId');
  });
});

describe('tasks: task contract', () => {
  it('tasks: the contract merges sections, scores completeness and records activity only on a real change', async () => {
    await h.addAgent(ws, 'agent-a');
    const id = await create();
    const token = h.token(ws, ['issues:read', 'issues:write'], 'agent-a');
    const first = await h.tasks.updateTaskContract({ issueId: id, instructions: { objective: 'Ship it', verification: { values: ['pnpm test'] } } }, token);
    expect(first.changedSections).toEqual(['goal', 'verification']);
    expect(first.contract).toMatchObject({ goal: 'Ship it', verification: ['pnpm test'], completeness: { ready: false, score: 0.33 } });
    const second = await h.tasks.updateTaskContract({ issueId: id, instructions: { expectedOutput: 'A PR' } }, token);
    expect(second.contract).toMatchObject({ goal: 'Ship it', expectedOutput: 'A PR', completeness: { ready: true, score: 0.5 } });
    const retry = await h.tasks.updateTaskContract({ issueId: id, instructions: { expectedOutput: 'A PR' } }, token);
    expect(retry.changedSections).toEqual([]);
    expect(retry.contract?.version).toBe(second.contract?.version);
    const detail = await h.tasks.getTask({ id }, owner);
    expect(detail.activity.map((a) => a.kind)).toEqual(['created', 'contract-updated', 'contract-updated']);
    expect((await h.events('task.contract-updated')).map((e) => e.data.changedFields)).toEqual([
      ['agent.instructions.objective', 'agent.instructions.verification'],
      ['agent.instructions.expectedOutput'],
    ]);
    // People change the same sections through the task patch: one merge.
    await h.tasks.updateTask({ id, patch: { instructions: { objective: '' } } }, owner);
    const read = await h.tasks.getTaskContract({ issueId: id }, token);
    expect(read.contract).toMatchObject({ goal: '', expectedOutput: 'A PR', completeness: { ready: false } });
    expect(read.contract?.missingSections).toContain('goal');
  });

  it('tasks: contract bad input names the field; unknown issues are 404', async () => {
    const id = await create();
    expect((await failure(h.tasks.updateTaskContract({ issueId: id }, owner))).details.field).toBe('agent.instructions');
    expect((await failure(h.tasks.updateTaskContract({ issueId: id, instructions: {} }, owner))).details.field).toBe('agent.instructions');
    expect((await failure(h.tasks.updateTaskContract({ issueId: id, instructions: { escalation: 'x'.repeat(2001) } }, owner))).details.field).toBe(
      'agent.instructions.escalation',
    );
    expect((await failure(h.tasks.updateTaskContract({ issueId: 'iss_missing', instructions: { objective: 'x' } }, owner))).code).toBe('not-found');
  });
});

describe('tasks: comments, time, evidence, approvals', () => {
  it('tasks: each addition records activity, moves lastActivityAt and writes its event without content', async () => {
    const id = await create({ acceptanceChecks: [{ id: 'chk_a', title: 'A' }] });
    h.now = new Date(h.now.getTime() + 60_000);
    await h.records.addComment({ issueId: id, body: 'Private comment body' }, owner);
    const time = await h.records.logTime({ issueId: id, minutes: 30, note: 'Private note' }, owner);
    expect(time.totalMinutes).toBe(30);
    const evidence = await h.records.addEvidence({ issueId: id, kind: 'test-result', title: 'Private evidence title', checkId: 'chk_a' }, owner);
    expect(evidence.evidence).toMatchObject({ kind: 'test-result', checkId: 'chk_a' });
    const approval = await h.records.requestApproval({ issueId: id, reason: 'Private reason' }, owner);
    expect(approval.approval?.status).toBe('pending');
    const task = await stored(id);
    expect(task).toMatchObject({ timeLoggedMinutes: 30, evidenceCount: 1, lastActivityAt: h.now.toISOString() });
    expect(task.acceptanceChecks).toEqual([{ id: 'chk_a', title: 'A', done: true }]);
    const types = (await h.events()).map((e) => e.type);
    for (const type of ['comment.added', 'time-entry.logged', 'evidence.added', 'approval.requested']) expect(types).toContain(type);
    expect(JSON.stringify(await h.events())).not.toMatch(/Private/);
    const detail = await h.tasks.getTask({ id }, owner);
    expect(detail.comments.map((c) => c.body)).toEqual(['Private comment body']);
    expect(detail.evidence).toHaveLength(1);
    expect(detail.approvals).toHaveLength(1);
    expect(detail.activity.map((a) => a.kind)).toEqual(['created', 'comment-added', 'time-logged', 'evidence-added', 'updated', 'approval-requested']);
  });

  it('tasks: an approval is decided once, by a person', async () => {
    const id = await create();
    const { approval } = await h.records.requestApproval({ issueId: id, reason: 'Deploy?' }, h.token(ws, ['issues:write']));
    const approvalId = approval?.id as string;
    expect((await failure(h.records.decideApproval({ issueId: id, approvalId, decision: 'approved' }, h.token(ws, ['issues:write'])))).code).toBe('forbidden');
    const decided = await h.records.decideApproval({ issueId: id, approvalId, decision: 'approved', note: 'Go' }, owner);
    expect(decided.approval).toMatchObject({ status: 'approved', decidedBy: 'usr_owner', decisionNote: 'Go' });
    const again = await failure(h.records.decideApproval({ issueId: id, approvalId, decision: 'rejected' }, owner));
    expect(again).toMatchObject({ code: 'work-already-claimed', details: { reason: 'invalid-transition' } });
    expect((await failure(h.records.decideApproval({ issueId: id, approvalId: 'apr_missing', decision: 'approved' }, owner))).code).toBe('not-found');
    expect((await failure(h.records.decideApproval({ issueId: id, approvalId, decision: 'maybe' }, owner))).details.field).toBe('decision');
    expect((await h.records.listApprovals({ issueId: id, status: 'approved' }, owner)).approvals).toHaveLength(1);
  });

  it('tasks: sub-record bad input names the field', async () => {
    const id = await create();
    const field = async (p: Promise<unknown>) => (await failure(p)).details.field;
    expect(await field(h.records.addComment({ issueId: id, body: '  ' }, owner))).toBe('body');
    expect(await field(h.records.addComment({ issueId: id, body: 'x'.repeat(10_001) }, owner))).toBe('body');
    expect(await field(h.records.logTime({ issueId: id, minutes: 0 }, owner))).toBe('minutes');
    expect(await field(h.records.logTime({ issueId: id, minutes: 1441 }, owner))).toBe('minutes');
    expect(await field(h.records.logTime({ issueId: id, minutes: 5, loggedAt: 'yesterday' }, owner))).toBe('loggedAt');
    expect(await field(h.records.addEvidence({ issueId: id, kind: 'video', title: 'x' }, owner))).toBe('kind');
    expect(await field(h.records.addEvidence({ issueId: id, kind: 'link', title: 'x' }, owner))).toBe('url');
    expect(await field(h.records.addEvidence({ issueId: id, kind: 'link', title: 'x', url: 'javascript:alert(1)' }, owner))).toBe('url');
    expect(await field(h.records.addEvidence({ issueId: id, kind: 'note', title: 'x', checkId: 'chk_nope' }, owner))).toBe('checkId');
    expect(await field(h.records.requestApproval({ issueId: id, reason: '' }, owner))).toBe('reason');
    expect(await field(h.records.listComments({ issueId: id, limit: 500 }, owner))).toBe('limit');
    expect((await failure(h.records.addComment({ issueId: 'iss_missing', body: 'x' }, owner))).code).toBe('not-found');
  });

  it('tasks: lists page oldest first without repeats', async () => {
    const id = await create();
    for (let i = 0; i < 7; i++) await h.records.addComment({ issueId: id, body: `c${i}` }, owner);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await h.records.listComments({ issueId: id, limit: 3, ...(cursor ? { cursor } : {}) }, owner);
      seen.push(...page.comments.map((c) => c.body));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6']);
  });
});

describe('tasks: reminders', () => {
  it('tasks: reminders come from real data and the clock: missing dates, overdue, missing time, stale updates', async () => {
    const undated = await create({ title: 'undated', priority: 'low' });
    const overdue = await create({ title: 'overdue', dueDate: '2025-06-01', priority: 'urgent' });
    const working = await create({ title: 'working', dueDate: '2025-12-01', priority: 'high' });
    await h.tasks.updateTask({ id: working, patch: { status: 'in-progress' } }, owner);
    await create({ title: 'fine', dueDate: '2025-12-01' });
    const done = await create({ title: 'done', dueDate: '2025-01-01', status: 'done' });
    const list = async (request: Parameters<PlanningHarness['tasks']['listReminders']>[0] = {}) =>
      (await h.tasks.listReminders({ workspaceId: ws, ...request }, owner)).items.map((i) => [i.title, i.reminders.map((r) => r.kind)]);
    expect(await list()).toEqual([
      ['overdue', ['overdue']],
      ['working', ['missing-time']],
      ['undated', ['missing-dates']],
    ]);
    expect(await list({ kinds: ['overdue'] })).toEqual([['overdue', ['overdue']]]);

    // Eight days later the in-progress task is stale (7 days), the others not yet (14 days).
    h.now = new Date(h.now.getTime() + 8 * 86_400_000);
    await h.records.logTime({ issueId: working, minutes: 15 }, owner);
    expect(await list()).toEqual([
      ['overdue', ['overdue']],
      ['undated', ['missing-dates']],
    ]);
    h.now = new Date(h.now.getTime() + 8 * 86_400_000);
    expect(await list({ kinds: ['stale-update'] })).toEqual([
      ['overdue', ['stale-update']],
      ['working', ['stale-update']],
      ['fine', ['stale-update']],
      ['undated', ['stale-update']],
    ]);
    const items = (await h.tasks.listReminders({ workspaceId: ws, kinds: ['missing-dates'] }, owner)).items;
    expect(items[0]?.safeNextActions.map((a) => a.action)).toContain('set-due-date');
    expect(items.map((i) => i.issueId)).not.toContain(done);
    expect(items.map((i) => i.issueId)).toContain(undated);
    expect(overdue).toMatch(/^iss_/);
    expect((await failure(h.tasks.listReminders({ workspaceId: ws, kinds: ['late'] }, owner))).details.field).toBe('kind');
  });

  it('tasks: reminders page through every task with a reminder exactly once', async () => {
    for (let i = 0; i < 12; i++) await create({ title: `t${i}`, priority: i % 2 ? 'high' : 'low' });
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await h.tasks.listReminders({ workspaceId: ws, limit: 5, ...(cursor ? { cursor } : {}) }, owner);
      seen.push(...page.items.map((i) => i.issueId));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toHaveLength(12);
    expect(new Set(seen).size).toBe(12);
  });
});

describe('tasks: launch readiness', () => {
  it('tasks: readiness counts launch blockers and proof for the workspaces the caller administers', async () => {
    const empty = await h.tasks.getProductReadiness({ workspaceIds: [ws] }, owner);
    expect(empty.launchProof).toMatchObject({ readyForPublicLaunch: true, summary: { publicLaunchBlockerCount: 0, proofPacketCount: 0 } });
    expect(empty.launchProof?.nextProof).toBeUndefined();

    const low = await create({ labels: ['launch-blocker'], priority: 'low' });
    const top = await create({ labels: ['launch-blocker'], priority: 'urgent' });
    const finished = await create({ status: 'done' });
    await create({ status: 'cancelled' });
    await h.records.addEvidence({ issueId: finished, kind: 'note', title: 'proof' }, owner);
    await h.records.addEvidence({ issueId: low, kind: 'note', title: 'partial proof' }, owner);
    const r = await h.tasks.getProductReadiness({}, owner);
    expect(r.implementation).toMatchObject({ completionPercent: 33, verifiedCount: 1 });
    expect(r.launchProof).toMatchObject({
      readyForPublicLaunch: false,
      nextProof: { id: top, nextAction: expect.stringMatching(/task contract/) },
      summary: { publicLaunchBlockerCount: 2, proofPacketCount: 2 },
    });

    await h.addMember(ws, 'usr_member', 'member');
    expect((await failure(h.tasks.getProductReadiness({}, h.user('usr_member')))).code).toBe('forbidden');
    expect((await failure(h.tasks.getProductReadiness({}, h.token(ws, ['issues:read'])))).code).toBe('forbidden');
    await expect(h.tasks.getProductReadiness({}, h.token(ws, ['admin']))).resolves.toMatchObject({ launchProof: { summary: { publicLaunchBlockerCount: 2 } } });
    const otherWs = await h.workspace({ ownerId: 'usr_other' });
    expect((await failure(h.tasks.getProductReadiness({ workspaceIds: [otherWs] }, owner))).code).toBe('forbidden');
    expect((await h.tasks.getProductReadiness({ workspaceIds: [otherWs] }, h.admin)).launchProof?.summary?.publicLaunchBlockerCount).toBe(0);
  });
});
