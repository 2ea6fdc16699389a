import { ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import type { Filter, Update } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TaskRecord } from '../store/task-documents.js';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';

let h: PlanningHarness;
let owner: Principal;
let ws: string;
let projectId: string;
let otherProjectMilestone: string;
let milestoneId: string;
let ids: string[];

/** Every stored task, by id, as it is now. */
async function snapshot(): Promise<Map<string, TaskRecord>> {
  const rows = await h.store.collection<TaskRecord>('tasks').find({});
  return new Map(rows.map((r) => [r._id, r]));
}

async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  return err as ServiceError;
}

beforeEach(async () => {
  h = await createPlanningHarness();
  ws = await h.workspace({ ownerId: 'usr_owner' });
  owner = h.user('usr_owner');
  await h.addAgent(ws, 'agent-a');
  const { project } = await h.projects.createProject({ workspaceId: ws, name: 'P' }, owner);
  projectId = project?.id as string;
  milestoneId = (await h.projects.createMilestone({ projectId, name: 'M' }, owner)).milestone?.id as string;
  const other = (await h.projects.createProject({ workspaceId: ws, name: 'Other' }, owner)).project?.id as string;
  otherProjectMilestone = (await h.projects.createMilestone({ projectId: other, name: 'Other M' }, owner)).milestone?.id as string;
  ids = [];
  for (let i = 0; i < 50; i++) {
    const { task } = await h.tasks.createTask({ projectId, title: `Task ${i}`, priority: i % 2 ? 'low' : 'high', labels: ['x'] }, owner);
    ids.push(task?.task?.id as string);
  }
});

afterEach(async () => {
  await h.close();
});

describe('bulk update: preview', () => {
  it('bulk update: preview reports the plan and the would-be issues and changes nothing', async () => {
    const before = await snapshot();
    const eventsBefore = (await h.events()).length;
    const activityBefore = await h.planning.tasks.activity.countDocuments({});
    const res = await h.tasks.bulkUpdateTasks(
      { issueIds: ids, mode: 'preview', patch: { status: 'in-progress', priority: 'low', dueDate: '2025-08-01', milestoneId } },
      owner,
    );
    expect(res.applied).toBe(false);
    expect(res.plan).toMatchObject({ requestedCount: 50, targetCount: 50, skippedCount: 0, changedFieldLabels: ['Status', 'Priority', 'Milestone', 'Due date'] });
    expect(res.updatedIssues).toHaveLength(50);
    expect(res.updatedIssues.every((v) => v.task?.status === 'in-progress' && v.task.dueDate === '2025-08-01')).toBe(true);
    expect(res.activity).toHaveLength(50);
    expect(res.activity[0]?.id).toBe('');
    expect(await snapshot()).toEqual(before);
    expect(await h.events()).toHaveLength(eventsBefore);
    expect(await h.planning.tasks.activity.countDocuments({})).toBe(activityBefore);
  });

  it('bulk update: targets the patch would not change are counted as skipped', async () => {
    const res = await h.tasks.bulkUpdateTasks({ issueIds: ids.slice(0, 10), mode: 'preview', patch: { priority: 'low' } }, owner);
    expect(res.plan).toMatchObject({ requestedCount: 10, targetCount: 10, skippedCount: 5, changedFieldLabels: ['Priority'] });
    expect(res.updatedIssues).toHaveLength(5);
  });
});

describe('bulk update: apply', () => {
  it('bulk update: apply changes every target, records activity and events per changed task', async () => {
    const res = await h.tasks.bulkUpdateTasks(
      { issueIds: [...ids, ids[0] as string], mode: 'apply', patch: { labels: { values: ['y'] }, assignedAgentId: 'agent-a', estimate: 3 } },
      owner,
    );
    expect(res.applied).toBe(true);
    expect(res.plan).toMatchObject({ requestedCount: 51, targetCount: 50, skippedCount: 0, changedFieldLabels: ['Labels', 'Estimate', 'Agent'] });
    const after = await snapshot();
    for (const id of ids) expect(after.get(id)).toMatchObject({ labels: ['y'], estimate: 3, agent: { assignedAgentId: 'agent-a' }, version: 2 });
    expect(res.activity).toHaveLength(50);
    expect(res.activity.every((a) => a.kind === 'bulk-updated' && a.id.startsWith('act_'))).toBe(true);
    const events = await h.events('task.updated');
    expect(events).toHaveLength(50);
    expect(events[0]?.data).toEqual({ subject: { type: 'task', id: events[0]?.data.issueId }, issueId: expect.any(String), changedFields: ['labels', 'estimate', 'agent.assignedAgentId'], bulk: true });
    // Payloads carry field names, never values such as titles.
    expect(JSON.stringify(events)).not.toContain('Task 1');
  });

  it('bulk update: status changes go through the allowed moves and emit status-changed events', async () => {
    await h.tasks.bulkUpdateTasks({ issueIds: ids.slice(0, 3), mode: 'apply', patch: { status: 'in-progress' } }, owner);
    const events = await h.events('task.status-changed');
    expect(events.map((e) => e.data)).toEqual(ids.slice(0, 3).map((id) => ({ subject: { type: 'task', id }, issueId: id, from: 'ready', to: 'in-progress' })));
  });

  it('bulk update: one unknown id in 50 changes nothing and names the id', async () => {
    const before = await snapshot();
    const err = await failure(h.tasks.bulkUpdateTasks({ issueIds: [...ids.slice(0, 49), 'iss_missing'], mode: 'apply', patch: { priority: 'urgent' } }, owner));
    expect(err.code).toBe('not-found');
    expect(err.details.failedIds).toEqual(['iss_missing']);
    expect(await snapshot()).toEqual(before);
  });

  it('bulk update: a move one target may not make refuses the whole change (409 invalid-transition, failing ids named)', async () => {
    await h.tasks.updateTask({ id: ids[7] as string, patch: { status: 'cancelled' } }, owner);
    const before = await snapshot();
    const err = await failure(h.tasks.bulkUpdateTasks({ issueIds: ids, mode: 'apply', patch: { status: 'in-progress' } }, owner));
    expect(err.code).toBe('work-already-claimed');
    expect(err.details.reason).toBe('invalid-transition');
    expect(err.details.failedIds).toEqual([ids[7]]);
    expect(await snapshot()).toEqual(before);
  });

  it('bulk update: a milestone of another project is refused for every target, naming patch.milestoneId', async () => {
    const before = await snapshot();
    const err = await failure(h.tasks.bulkUpdateTasks({ issueIds: ids.slice(0, 5), mode: 'apply', patch: { milestoneId: otherProjectMilestone } }, owner));
    expect(err.code).toBe('invalid-input');
    expect(err.details.field).toBe('patch.milestoneId');
    expect(err.details.failedIds).toEqual(ids.slice(0, 5));
    expect(await snapshot()).toEqual(before);
  });

  it('bulk update: tasks of a workspace the caller may not write are refused; a token never reaches another workspace', async () => {
    const otherWs = await h.workspace({ ownerId: 'usr_other' });
    const project = (await h.projects.createProject({ workspaceId: otherWs, name: 'Q' }, h.user('usr_other'))).project?.id as string;
    const foreign = (await h.tasks.createTask({ projectId: project, title: 'Foreign' }, h.user('usr_other'))).task?.task?.id as string;
    const asUser = await failure(h.tasks.bulkUpdateTasks({ issueIds: [ids[0] as string, foreign], mode: 'apply', patch: { priority: 'none' } }, owner));
    expect(asUser.code).toBe('forbidden');
    expect(asUser.details.failedIds).toEqual([foreign]);
    const token = h.token(ws, ['issues:read', 'issues:write']);
    const asToken = await failure(h.tasks.bulkUpdateTasks({ issueIds: [ids[0] as string, foreign], mode: 'apply', patch: { priority: 'none' } }, token));
    expect(asToken.code).toBe('not-found');
    expect(asToken.details.failedIds).toEqual([foreign]);
    await h.addMember(ws, 'usr_viewer', 'viewer');
    const viewer = await failure(h.tasks.bulkUpdateTasks({ issueIds: ids.slice(0, 2), mode: 'preview', patch: { priority: 'none' } }, h.user('usr_viewer')));
    expect(viewer.code).toBe('forbidden');
    expect((await snapshot()).get(ids[0] as string)?.priority).toBe('high');
  });

  it('bulk update: bad input names the field', async () => {
    const field = async (request: Parameters<PlanningHarness['tasks']['bulkUpdateTasks']>[0]) => (await failure(h.tasks.bulkUpdateTasks(request, owner))).details.field;
    expect(await field({ issueIds: [], mode: 'apply', patch: { priority: 'low' } })).toBe('issueIds');
    expect(await field({ issueIds: Array.from({ length: 201 }, (_, i) => `iss_${i}`), mode: 'apply', patch: { priority: 'low' } })).toBe('issueIds');
    expect(await field({ issueIds: ['bad id'], mode: 'apply', patch: { priority: 'low' } })).toBe('issueIds[0]');
    expect(await field({ issueIds: ids.slice(0, 1), mode: 'dry-run', patch: { priority: 'low' } })).toBe('mode');
    expect(await field({ issueIds: ids.slice(0, 1), mode: 'apply', patch: { priority: 'p0' } })).toBe('patch.priority');
    expect(await field({ issueIds: ids.slice(0, 1), mode: 'apply', patch: { status: 'open' } })).toBe('patch.status');
    expect(await field({ issueIds: ids.slice(0, 1), mode: 'apply', patch: { dueDate: 'tomorrow' } })).toBe('patch.dueDate');
    expect(await field({ issueIds: ids.slice(0, 1), mode: 'apply', patch: { title: 'x' } })).toBe('patch.title');
    expect(await field({ issueIds: ids.slice(0, 1), mode: 'apply', patch: {} })).toBe('patch');
  });

  it('bulk update: assigning an unknown agent is 404 for every target', async () => {
    const err = await failure(h.tasks.bulkUpdateTasks({ issueIds: ids.slice(0, 3), mode: 'apply', patch: { assignedAgentId: 'ghost' } }, owner));
    expect(err.code).toBe('not-found');
    expect(err.details.failedIds).toEqual(ids.slice(0, 3));
  });
});

describe('bulk update: concurrent edits', () => {
  it('bulk update: a task edited while the apply runs makes it fail cleanly: nothing of the bulk change lands', async () => {
    const victim = ids[40] as string;
    const tasks = h.store.collection<TaskRecord>('tasks');
    const original = tasks.findOneAndUpdate.bind(tasks);
    let writes = 0;
    let injected = false;
    // Halfway through the apply's writes, someone else changes a target that is not written yet.
    tasks.findOneAndUpdate = (async (filter: Filter, update: Update, options?: Parameters<typeof original>[2]) => {
      if (options?.session && (update.$set as Record<string, unknown> | undefined)?.priority === 'urgent' && ++writes === 25 && !injected) {
        injected = true;
        await h.tasks.updateTask({ id: victim, patch: { title: 'Edited meanwhile' } }, owner);
      }
      return original(filter, update, options);
    }) as typeof tasks.findOneAndUpdate;

    const err = await failure(h.tasks.bulkUpdateTasks({ issueIds: ids, mode: 'apply', patch: { priority: 'urgent' } }, owner));
    tasks.findOneAndUpdate = original;
    expect(injected).toBe(true);
    expect(err.code).toBe('work-already-claimed');
    expect(err.details.reason).toBe('version-conflict');
    expect(err.details.failedIds).toEqual([victim]);

    const after = await snapshot();
    expect([...after.values()].filter((t) => t.priority === 'urgent')).toEqual([]);
    expect(after.get(victim)).toMatchObject({ title: 'Edited meanwhile', version: 2 });
    expect(await h.events('task.updated')).toHaveLength(1);
  });

  it('bulk update: concurrent bulk updates and edits never leave a half-applied bulk change', async () => {
    const original = new Map([...(await snapshot()).values()].map((t) => [t._id, t.priority]));
    const bulk = (priority: 'urgent' | 'none') =>
      h.tasks.bulkUpdateTasks({ issueIds: ids, mode: 'apply', patch: { priority } }, owner).then(
        () => priority,
        (e: unknown) => e,
      );
    const edits = ids.slice(0, 20).map((id, i) => h.tasks.updateTask({ id, patch: { title: `Concurrent ${i}` } }, owner).catch((e: unknown) => e));
    const results = await Promise.all([bulk('urgent'), ...edits, bulk('none')]);
    for (const r of results) if (r instanceof Error) expect((r as ServiceError).code).toBe('work-already-claimed');
    const succeeded = results.filter((r): r is 'urgent' | 'none' => r === 'urgent' || r === 'none');
    const after = [...(await snapshot()).values()];
    if (succeeded.length === 0) {
      // Both bulk changes failed: every task keeps its own priority.
      for (const t of after) expect(t.priority).toBe(original.get(t._id));
    } else {
      // Whatever succeeded landed on all 50 tasks: they agree on one of those priorities.
      const priorities = new Set(after.map((t) => t.priority));
      expect(priorities.size).toBe(1);
      expect(succeeded).toContain([...priorities][0]);
    }
  });
});
