/** What the claims side shows of the done policy and approvals: ready work, heartbeats and status posts. */
import type { Principal } from '@planning/rpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClaimsHarness, type ClaimsHarness } from './testing/claims-harness.js';

let h: ClaimsHarness;
let ws: string;
let projectId: string;
const owner: Principal = { type: 'user', id: 'usr_owner', userId: 'usr_owner', isAdmin: false, scopes: [] };
const member: Principal = { type: 'user', id: 'usr_member', userId: 'usr_member', isAdmin: false, scopes: [] };

beforeEach(async () => {
  h = await createClaimsHarness({ leaseSeconds: 600 });
  ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'pro' });
  await h.planning.addMember(ws, 'usr_member', 'member');
  projectId = await h.project(ws);
  await h.planning.workspaceRpc.updateWorkspace({ id: ws, doneRequires: 'evidence-and-approval' }, owner);
});

afterEach(async () => {
  await h.close();
});

describe('claims: the done policy where agents read it', () => {
  it('ready work: doneEvidence and nextAction say what done still needs; the holder sees its approval decided, in ready work and in its heartbeat', async () => {
    const a = h.agent(ws, 'agent-a');
    const issueId = await h.task(projectId, { acceptanceChecks: [{ title: 'Tests pass' }, { title: 'Docs' }] });
    const checks = (await h.taskRecord(issueId))!.acceptanceChecks.map((c) => c.id);
    const queued = (await h.rpc.listReadyWork({}, { principal: a })).items.find((i) => i.id === issueId);
    expect(queued?.agentClaimQueue?.doneEvidence).toMatchObject({ completed: 0, total: 2, requires: 'evidence-and-approval', missingCheckIds: checks, approval: 'missing', ready: false });
    expect(queued?.agentClaimQueue?.nextAction).toContain('Before done: attach evidence for acceptance checks');
    const claim = (await h.rpc.claimWork({ issueId }, { principal: a })).claim!;
    await h.planning.records.addEvidence({ issueId, kind: 'test-result', title: 'CI', checkId: checks[0], fencingToken: claim.fencingToken }, a);
    await h.planning.records.addEvidence({ issueId, kind: 'note', title: 'Docs', checkId: checks[1], fencingToken: claim.fencingToken }, a);
    const { approval } = await h.planning.records.requestApproval({ issueId, reason: 'Ship it?', approvalFor: 'done', fencingToken: claim.fencingToken }, a);
    let held = (await h.rpc.listReadyWork({}, { principal: a })).items[0];
    expect(held?.id).toBe(issueId);
    expect(held?.agentClaimQueue?.doneEvidence).toMatchObject({ completed: 2, total: 2, missingCheckIds: [], approval: 'pending', ready: false });
    expect(held?.agentClaimQueue?.nextAction).toContain(`wait for a member to decide approval ${approval!.id}`);
    expect(held?.approvals.map((g) => [g.id, g.status])).toEqual([[approval!.id, 'pending']]);
    h.planning.now = new Date(h.planning.now.getTime() + 1_000);
    await h.planning.records.decideApproval({ issueId, approvalId: approval!.id, decision: 'approved' }, member);
    held = (await h.rpc.listReadyWork({}, { principal: a })).items[0];
    expect(held?.agentClaimQueue?.doneEvidence).toMatchObject({ approval: 'approved', ready: true });
    expect(held?.approvals.map((g) => [g.id, g.status, g.decidedAt])).toEqual([[approval!.id, 'approved', h.planning.now.toISOString()]]);
    const beat = await h.rpc.renewClaim({ issueId, fencingToken: claim.fencingToken }, { principal: a });
    expect(beat.issue?.approvals.map((g) => [g.id, g.approvalFor, g.status])).toEqual([[approval!.id, 'done', 'approved']]);
    const status = await h.rpc.postStatus({ issueId, message: 'Approved, finishing', fencingToken: claim.fencingToken }, { principal: a });
    expect(status.issue?.approvals.map((g) => g.status)).toEqual(['approved']);
  });
});
