import { ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';

let h: PlanningHarness;
let ws: string;
let projectId: string;
const owner: Principal = { type: 'user', id: 'usr_owner', userId: 'usr_owner', isAdmin: false, scopes: [] };
const member: Principal = { type: 'user', id: 'usr_member', userId: 'usr_member', isAdmin: false, scopes: [] };
const SCOPES = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];
let agent: Principal;

async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  return err as ServiceError;
}

const reasonOf = async (promise: Promise<unknown>) => {
  const err = await failure(promise);
  return `${err.code}/${err.details.reason ?? err.details.field ?? ''}`;
};

/** A task in review (moved there by a member), with acceptance checks. */
async function inReview(checks: string[] = ['Tests pass', 'Docs updated']): Promise<{ id: string; checkIds: string[] }> {
  const created = await h.tasks.createTask({ projectId, title: 'Proof', acceptanceChecks: checks.map((title) => ({ title })) }, owner);
  const id = created.task!.task!.id;
  await h.tasks.updateTask({ id, patch: { status: 'in-progress' } }, member);
  await h.tasks.updateTask({ id, patch: { status: 'in-review' } }, member);
  return { id, checkIds: created.task!.task!.acceptanceChecks.map((c) => c.id) };
}

const setPolicy = (doneRequires: string, doneGate?: string) => h.workspaceRpc.updateWorkspace({ id: ws, doneRequires, ...(doneGate ? { doneGate } : {}) }, owner);
const evidence = (issueId: string, checkId?: string, who: Principal = agent) =>
  h.records.addEvidence({ issueId, kind: 'test-result', title: 'CI run', body: 'green', ...(checkId ? { checkId } : {}) }, who);
const done = (id: string, who: Principal, extra: Record<string, unknown> = {}) => h.tasks.updateTask({ id, patch: { status: 'done' }, ...extra }, who);
const advance = (ms: number) => {
  h.now = new Date(h.now.getTime() + ms);
};

/** Status, version and activity: what a refused completion must leave as it was. */
async function state(id: string) {
  const task = await h.planning.tasks.get(id);
  return { status: task?.status, version: task?.version, activity: await h.planning.tasks.countActivity(id) };
}

beforeEach(async () => {
  h = await createPlanningHarness();
  ws = await h.workspace({ ownerId: 'usr_owner' });
  await h.addMember(ws, 'usr_member', 'member');
  await h.addAgent(ws, 'agent-a');
  agent = h.token(ws, SCOPES, 'agent-a');
  projectId = (await h.projects.createProject({ workspaceId: ws, name: 'P' }, owner)).project!.id;
});

afterEach(async () => {
  await h.close();
});

describe('done policy: settings', () => {
  it('done policy: a workspace sets doneRequires and doneGate (admins); a project may set its own and clear it', async () => {
    expect((await h.workspaceRpc.getWorkspace({ id: ws }, owner)).workspace).toMatchObject({ doneRequires: 'nothing', doneGate: 'done' });
    const { id } = await inReview();
    const changed = await setPolicy('evidence', 'in-review');
    expect(changed.changedFields).toEqual(['doneRequires', 'doneGate']);
    expect(changed.workspace).toMatchObject({ doneRequires: 'evidence', doneGate: 'in-review' });
    expect((await setPolicy('evidence', 'in-review')).changedFields).toEqual([]);
    expect(await reasonOf(h.workspaceRpc.updateWorkspace({ id: ws, doneRequires: 'evidence' }, member))).toBe('forbidden/insufficient-role');
    const project = await h.projects.updateProject({ id: projectId, doneRequires: 'evidence-and-approval' }, owner);
    expect(project.project).toMatchObject({ doneRequires: 'evidence-and-approval' });
    expect(project.project?.doneGate).toBeUndefined();
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ requires: 'evidence-and-approval', gate: 'in-review' });
    const cleared = await h.projects.updateProject({ id: projectId, clearFields: ['doneRequires'] }, owner);
    expect(cleared.project?.doneRequires).toBeUndefined();
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ requires: 'evidence', gate: 'in-review' });
  });

  it('done policy: a task detail (and contract) shows the workspace policy in force, reading the workspace once (the access check’s read)', async () => {
    const { id } = await inReview(['Tests pass']);
    const reads = vi.spyOn(h.workspaces, 'findById');
    const detail = async (who: Principal) => (await h.tasks.getTask({ id }, who)).task?.task?.done;
    expect(await detail(agent)).toMatchObject({ requires: 'nothing', gate: 'done' });
    expect(reads).toHaveBeenCalledTimes(1);
    await setPolicy('evidence', 'in-review');
    reads.mockClear();
    expect(await detail(agent)).toMatchObject({ requires: 'evidence', gate: 'in-review' });
    expect(await detail(owner)).toMatchObject({ requires: 'evidence', gate: 'in-review' });
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ requires: 'evidence', gate: 'in-review' });
    expect(reads).toHaveBeenCalledTimes(3);
    // A project's own policy still wins over the workspace's.
    await h.projects.updateProject({ id: projectId, doneRequires: 'nothing' }, owner);
    expect(await detail(agent)).toMatchObject({ requires: 'nothing', gate: 'in-review' });
  });

  it('done policy: unknown values are 400 naming the field, and nothing changes', async () => {
    expect(await reasonOf(h.workspaceRpc.updateWorkspace({ id: ws, doneRequires: 'proof' }, owner))).toBe('invalid-input/doneRequires');
    expect(await reasonOf(h.workspaceRpc.updateWorkspace({ id: ws, doneRequires: 'evidence', doneGate: 'merge' }, owner))).toBe('invalid-input/doneGate');
    expect(await reasonOf(h.projects.updateProject({ id: projectId, doneRequires: 'always' }, owner))).toBe('invalid-input/doneRequires');
    expect((await h.workspaceRpc.getWorkspace({ id: ws }, owner)).workspace).toMatchObject({ doneRequires: 'nothing', doneGate: 'done', version: 1 });
  });
});

describe('done policy: completing', () => {
  it('done policy: nothing (the default) lets agents and members complete as before', async () => {
    const a = await inReview();
    expect((await done(a.id, agent)).task?.task?.status).toBe('done');
    const b = await inReview();
    expect((await done(b.id, member)).task?.task?.status).toBe('done');
  });

  it('done policy: evidence refuses done (409 evidence-missing with the missing check ids) until every check has evidence, for agents and members alike', async () => {
    await setPolicy('evidence');
    const { id, checkIds } = await inReview();
    const before = await state(id);
    for (const who of [agent, member]) {
      const err = await failure(done(id, who));
      expect([err.code, err.details.reason, err.details.missingCheckIds]).toEqual(['work-already-claimed', 'evidence-missing', checkIds]);
    }
    expect(await state(id)).toEqual(before);
    await evidence(id, checkIds[0]);
    // Evidence without checkId, and a check ticked by hand, are no proof of a check.
    await evidence(id);
    await h.tasks.updateTask({ id, patch: { acceptanceChecks: { checks: [{ id: checkIds[0]!, title: 'Tests pass' }, { id: checkIds[1]!, title: 'Docs updated', done: true }] } } }, member);
    expect((await failure(done(id, agent))).details.missingCheckIds).toEqual([checkIds[1]]);
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ requires: 'evidence', missingCheckIds: [checkIds[1]], evidencedChecks: 1, ready: false });
    await evidence(id, checkIds[1]);
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ missingCheckIds: [], evidencedChecks: 2, ready: true, nextStep: '' });
    expect((await done(id, agent)).task?.task?.status).toBe('done');
  });

  it('done policy: a task without checks needs at least one evidence record', async () => {
    await setPolicy('evidence');
    const { id } = await inReview([]);
    const err = await failure(done(id, agent));
    expect([err.details.reason, err.details.missingCheckIds]).toEqual(['evidence-missing', []]);
    await evidence(id);
    expect((await done(id, agent)).task?.task?.status).toBe('done');
  });

  it('done policy: evidence-and-approval also needs an approval for done approved after the last evidence', async () => {
    await setPolicy('evidence-and-approval');
    const { id, checkIds } = await inReview(['Works']);
    await evidence(id, checkIds[0]);
    expect(await reasonOf(done(id, agent))).toBe('work-already-claimed/approval-required');
    const { approval } = await h.records.requestApproval({ issueId: id, reason: 'Ready to ship', approvalFor: 'done' }, agent);
    expect(approval).toMatchObject({ status: 'pending', approvalFor: 'done', expiresAt: new Date(h.now.getTime() + 7 * 86_400_000).toISOString() });
    expect(await reasonOf(done(id, agent))).toBe('work-already-claimed/approval-pending');
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ approval: 'pending', ready: false });
    advance(1_000);
    await h.records.decideApproval({ issueId: id, approvalId: approval!.id, decision: 'approved' }, member);
    // New evidence after the approval needs a new approval.
    advance(1_000);
    await evidence(id);
    expect(await reasonOf(done(id, agent))).toBe('work-already-claimed/approval-required');
    const again = (await h.records.requestApproval({ issueId: id, reason: 'Once more', approvalFor: 'done' }, agent)).approval!;
    advance(1_000);
    await h.records.decideApproval({ issueId: id, approvalId: again.id, decision: 'rejected' }, member);
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ approval: 'rejected', ready: false });
    expect(await reasonOf(done(id, agent))).toBe('work-already-claimed/approval-required');
    const third = (await h.records.requestApproval({ issueId: id, reason: 'Fixed', approvalFor: 'done' }, agent)).approval!;
    advance(1_000);
    await h.records.decideApproval({ issueId: id, approvalId: third.id, decision: 'approved' }, member);
    expect((await h.tasks.getTaskContract({ issueId: id }, agent)).done).toMatchObject({ approval: 'approved', ready: true });
    expect((await done(id, agent)).task?.task?.status).toBe('done');
  });

  it('done policy: with doneGate in-review the move to in-review is gated too', async () => {
    await setPolicy('evidence', 'in-review');
    const created = await h.tasks.createTask({ projectId, title: 'Gate', acceptanceChecks: [{ title: 'c' }] }, owner);
    const id = created.task!.task!.id;
    await h.tasks.updateTask({ id, patch: { status: 'in-progress' } }, member);
    expect(await reasonOf(h.tasks.updateTask({ id, patch: { status: 'in-review' } }, agent))).toBe('work-already-claimed/evidence-missing');
    await evidence(id, created.task!.task!.acceptanceChecks[0]!.id);
    expect((await h.tasks.updateTask({ id, patch: { status: 'in-review' } }, agent)).task?.task?.status).toBe('in-review');
  });

  it('done policy: a member may override with a reason (audited); agents may not; an override needs a reason and a status move', async () => {
    await setPolicy('evidence-and-approval');
    const { id } = await inReview();
    const before = await state(id);
    expect(await reasonOf(done(id, agent, { override: { reason: 'trust me' } }))).toBe('forbidden/override-not-allowed');
    expect(await reasonOf(done(id, member, { override: { reason: '  ' } }))).toBe('invalid-input/override.reason');
    expect(await reasonOf(h.tasks.updateTask({ id, patch: { priority: 'high' }, override: { reason: 'x' } }, member))).toBe('invalid-input/status');
    expect(await state(id)).toEqual(before);
    const forced = await done(id, member, { override: { reason: 'Hotfix shipped; proof follows' } });
    expect(forced.task?.task?.status).toBe('done');
    const activity = await h.planning.tasks.listActivity(id, { limit: 50 });
    const entry = activity.find((a) => a.kind === 'done-policy-overridden');
    expect(entry?.actor).toEqual({ type: 'user', id: 'usr_member' });
    expect(entry?.changes).toEqual([
      { field: 'status', from: 'in-review', to: 'done' },
      { field: 'override', to: { reason: 'Hotfix shipped; proof follows', setAside: 'evidence-missing', missingCheckIds: expect.any(Array) } },
    ]);
    const events = await h.events('task.done-policy-overridden');
    expect(events.map((e) => e.data)).toEqual([{ subject: { type: 'task', id }, issueId: id, to: 'done', reason: 'evidence-missing' }]);
    // An override that sets nothing aside records nothing.
    await setPolicy('nothing');
    const other = await inReview();
    await done(other.id, member, { override: { reason: 'not needed' } });
    expect((await h.planning.tasks.listActivity(other.id, { limit: 50 })).map((a) => a.kind)).not.toContain('done-policy-overridden');
  });

  it('done policy: bulk updates are gated per target and name every refused id; a member overrides for all', async () => {
    await setPolicy('evidence');
    const a = await inReview(['x']);
    const b = await inReview(['y']);
    await evidence(a.id, a.checkIds[0]);
    const err = await failure(h.tasks.bulkUpdateTasks({ issueIds: [a.id, b.id], mode: 'apply', patch: { status: 'done' } }, member));
    expect([err.details.reason, err.details.failedIds]).toEqual(['evidence-missing', [b.id]]);
    expect((await h.planning.tasks.get(a.id))?.status).toBe('in-review');
    const forced = await h.tasks.bulkUpdateTasks({ issueIds: [a.id, b.id], mode: 'apply', patch: { status: 'done' }, override: { reason: 'release day' } }, member);
    expect(forced.updatedIssues.map((t) => t.task?.status)).toEqual(['done', 'done']);
    expect((await h.events('task.done-policy-overridden')).map((e) => e.data.issueId)).toEqual([b.id]);
    expect(await reasonOf(h.tasks.bulkUpdateTasks({ issueIds: [a.id], mode: 'apply', patch: { priority: 'low' }, override: { reason: 'x' } }, member))).toBe(
      'invalid-input/patch.status',
    );
  });
});

describe('approvals that gate', () => {
  it('approvals: a pending approval for done blocks done (whatever the policy) until a member decides it; rejecting releases it too', async () => {
    const { id } = await inReview();
    const { approval } = await h.records.requestApproval({ issueId: id, reason: 'Check the migration', approvalFor: 'done' }, agent);
    const before = await state(id);
    expect(await reasonOf(done(id, agent))).toBe('work-already-claimed/approval-pending');
    expect(await reasonOf(done(id, member))).toBe('work-already-claimed/approval-pending');
    expect(await state(id)).toEqual(before);
    // Approvals are decided by people: a token gets 403.
    expect(await reasonOf(h.records.decideApproval({ issueId: id, approvalId: approval!.id, decision: 'approved' }, agent))).toMatch(/^forbidden/);
    const decided = await h.records.decideApproval({ issueId: id, approvalId: approval!.id, decision: 'rejected', note: 'not yet' }, member);
    expect(decided.approval).toMatchObject({ status: 'rejected', decidedBy: 'usr_member', approvalFor: 'done' });
    expect((await h.events('approval.decided')).map((e) => e.data)).toEqual([
      { subject: { type: 'approval', id: approval!.id }, issueId: id, decision: 'rejected', for: 'done', requestedBy: 'key_agent-a' },
    ]);
    // The requesting agent sees the decision on the task.
    const viewed = await h.tasks.getTask({ id }, agent);
    expect(viewed.task?.task?.approvals).toEqual([expect.objectContaining({ id: approval!.id, approvalFor: 'done', status: 'rejected', requestedBy: 'key_agent-a' })]);
    expect((await done(id, agent)).task?.task?.status).toBe('done');
  });

  it('approvals: one for in-review blocks only that move; merge and custom block no move', async () => {
    const created = await h.tasks.createTask({ projectId, title: 'T' }, owner);
    const id = created.task!.task!.id;
    await h.tasks.updateTask({ id, patch: { status: 'in-progress' } }, member);
    for (const approvalFor of ['merge', 'custom', 'in-review']) await h.records.requestApproval({ issueId: id, reason: approvalFor, approvalFor }, agent);
    // Without `for`: custom.
    expect((await h.records.requestApproval({ issueId: id, reason: 'plain' }, agent)).approval?.approvalFor).toBe('custom');
    expect(await reasonOf(h.tasks.updateTask({ id, patch: { status: 'in-review' } }, agent))).toBe('work-already-claimed/approval-pending');
    expect((await h.tasks.updateTask({ id, patch: { status: 'blocked' } }, agent)).task?.task?.status).toBe('blocked');
  });

  it('approvals: a `for` that is not listed is 400 naming the field; nothing is stored', async () => {
    const { id } = await inReview();
    expect(await reasonOf(h.records.requestApproval({ issueId: id, reason: 'x', approvalFor: 'deploy' }, agent))).toBe('invalid-input/for');
    expect((await h.records.listApprovals({ issueId: id }, owner)).approvals).toEqual([]);
  });

  it('approvals: a pending request expires after 7 days: it stops blocking at once, and the sweep records it with an event', async () => {
    const { id } = await inReview();
    const { approval } = await h.records.requestApproval({ issueId: id, reason: 'Please look', approvalFor: 'done' }, agent);
    advance(7 * 86_400_000 - 1);
    expect(await reasonOf(done(id, agent))).toBe('work-already-claimed/approval-pending');
    advance(1);
    // Expired by its time, before any sweep: no longer blocking, shown as expired, not decidable.
    expect((await h.tasks.getTask({ id }, agent)).task?.task?.approvals[0]?.status).toBe('expired');
    expect(await reasonOf(h.records.decideApproval({ issueId: id, approvalId: approval!.id, decision: 'approved' }, member))).toBe('work-already-claimed/invalid-transition');
    const swept = await h.planning.records.expireDue(h.now);
    expect(swept.map((a) => a._id)).toEqual([approval!.id]);
    expect(await h.planning.records.expireDue(h.now)).toEqual([]);
    expect((await h.events('approval.expired')).map((e) => e.data)).toEqual([
      { subject: { type: 'approval', id: approval!.id }, issueId: id, for: 'done', requestedBy: 'key_agent-a' },
    ]);
    expect((await h.records.listApprovals({ issueId: id, status: 'expired' }, owner)).approvals.map((a) => a.id)).toEqual([approval!.id]);
    expect((await h.planning.tasks.listActivity(id, { limit: 50 })).map((a) => a.kind)).toContain('approval-expired');
    expect((await done(id, agent)).task?.task?.status).toBe('done');
  });

  it('approvals: a decision and the gated move racing: the move lands only if it saw the approval', async () => {
    for (let i = 0; i < 20; i++) {
      const { id } = await inReview([]);
      const { approval } = await h.records.requestApproval({ issueId: id, reason: 'race', approvalFor: 'done' }, agent);
      const [decision, move] = await Promise.all([
        h.records.decideApproval({ issueId: id, approvalId: approval!.id, decision: i % 2 === 0 ? 'approved' : 'rejected' }, member),
        done(id, agent).then(
          () => 'ok',
          (e: ServiceError) => e.details.reason,
        ),
      ]);
      expect(decision.approval?.status).not.toBe('pending');
      const task = await h.planning.tasks.get(id);
      expect(task?.status).toBe(move === 'ok' ? 'done' : 'in-review');
      if (move !== 'ok') expect(move).toBe('approval-pending');
    }
  });
});

describe('done status where agents read it', () => {
  it('done status: the task detail, the task contract and the context pack say what is still missing', async () => {
    await setPolicy('evidence-and-approval');
    const { id, checkIds } = await inReview(['One', 'Two']);
    await evidence(id, checkIds[0]);
    const expected = {
      requires: 'evidence-and-approval',
      gate: 'done',
      missingCheckIds: [checkIds[1]],
      evidencedChecks: 1,
      evidenceCount: 1,
      approval: 'missing',
      ready: false,
    };
    expect((await h.tasks.getTask({ id }, agent)).task?.task?.done).toMatchObject(expected);
    const contract = (await h.tasks.getTaskContract({ issueId: id }, agent)).done;
    expect(contract).toMatchObject(expected);
    expect(contract?.nextStep).toContain(checkIds[1]);
    expect(contract?.nextStep).toContain('request an approval for done');
  });
});
