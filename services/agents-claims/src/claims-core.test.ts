import { ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import { configureFailpoints } from '@planning/runtime/failpoints';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ClaimsCore } from './claims-core.js';
import type { ClaimRecord } from './store/claims.js';
import { SweepFailedError } from './core/upkeep.js';
import { createSweeper } from './sweeper.js';
import { createClaimsHarness, type ClaimsHarness } from './testing/claims-harness.js';

let h: ClaimsHarness;
let ws: string;
let projectId: string;
const member: Principal = { type: 'user', id: 'usr_member', userId: 'usr_member', isAdmin: false, scopes: [] };
const viewer: Principal = { type: 'user', id: 'usr_viewer', userId: 'usr_viewer', isAdmin: false, scopes: [] };
const owner: Principal = { type: 'user', id: 'usr_owner', userId: 'usr_owner', isAdmin: false, scopes: [] };

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
  return `${err.code}/${err.details.reason ?? ''}`;
};

const agent = (id: string, scopes?: string[]) => h.agent(ws, id, scopes);
const claim = (issueId: string, who: Principal, key?: string) => h.rpc.claimWork({ issueId, ...(key ? { idempotencyKey: key } : {}) }, { principal: who });
const advance = (ms: number) => {
  h.planning.now = new Date(h.planning.now.getTime() + ms);
};
const allClaims = () => h.store.collection<ClaimRecord>('claims').find({}, { sort: { _id: 1 } });
const activeOn = async (issueId: string) => (await allClaims()).filter((c) => c.issueId === issueId && c.state === 'active');

beforeEach(async () => {
  h = await createClaimsHarness({ leaseSeconds: 600, startTimeoutMs: 5_000 });
  ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'pro' });
  await h.planning.addMember(ws, 'usr_member', 'member');
  await h.planning.addMember(ws, 'usr_viewer', 'viewer');
  projectId = await h.project(ws);
});

afterEach(async () => {
  configureFailpoints(undefined);
  await h.close();
});

describe('claims: claiming', () => {
  it('claims: a claim moves the task to in-progress, meters one run and returns the claim with its expiry and fencing token', async () => {
    const issueId = await h.task(projectId);
    const res = await claim(issueId, agent('agent-a'));
    expect(res.claim).toMatchObject({ issueId, agentId: 'agent-a', workspaceId: ws, state: 'active', fencingToken: 1, leaseSeconds: 600, expiresAt: '2025-06-02T10:10:00.000Z' });
    expect(res.issue).toMatchObject({ id: issueId, status: 'in-progress' });
    expect(res.metering).toMatchObject({ allowed: true, kind: 'agent-runs', used: 1, limit: 10_000, period: '2025-06' });
    expect(res.replayed).toBe(false);
    const task = await h.taskRecord(issueId);
    expect(task?.status).toBe('in-progress');
    expect(task?.claim).toMatchObject({ claimId: res.claim?.id, agentId: 'agent-a', fencingToken: 1, expiresAt: res.claim?.expiresAt });
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
    const [created] = await h.claimEvents('claim.created');
    expect(created?.data).toEqual({ subject: { type: 'claim', id: res.claim?.id }, issueId, agentId: 'agent-a' });
    expect(created?.actor).toEqual({ type: 'api-key', id: 'key_agent-a' });
  });

  it('claims: every refusal of DECISIONS §7 has its status and reason, and none leaves a claim, a run or a task change behind', async () => {
    const other = await h.planning.workspace({ ownerId: 'usr_other', planId: 'pro' });
    const issueId = await h.task(projectId);
    await h.planning.addAgent(ws, 'agent-b');
    const assigned = await h.task(projectId, { assignedAgentId: 'agent-b' });
    const dep = await h.task(projectId);
    const blocked = await h.task(projectId, { dependencies: [dep] });
    const backlog = await h.task(projectId, { status: 'backlog' });
    const cases: [string, Promise<unknown>][] = [
      ['unauthorized/', claim(issueId, { type: 'anonymous', id: 'anonymous', isAdmin: false, scopes: [] })],
      ['forbidden/token-required', claim(issueId, member)],
      ['forbidden/missing-scope', claim(issueId, agent('agent-a', ['issues:write', 'agents:read']))],
      ['forbidden/missing-scope', claim(issueId, agent('agent-a', ['agents:execute']))],
      ['not-found/', claim('iss_missing', agent('agent-a'))],
      ['not-found/', claim(issueId, h.agent(other, 'agent-a'))],
      ['forbidden/assigned-to-another-agent', claim(assigned, agent('agent-a'))],
      ['work-already-claimed/not-ready', claim(backlog, agent('agent-a'))],
      ['work-already-claimed/dependencies-open', claim(blocked, agent('agent-a'))],
      ['invalid-input/', claim('', agent('agent-a'))],
      ['invalid-input/', claim(issueId, agent('agent-a'), 'has spaces')],
    ];
    for (const [expected, promise] of cases) expect(await reasonOf(promise)).toBe(expected);
    expect(await allClaims()).toEqual([]);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(0);
    for (const id of [issueId, assigned, blocked, backlog]) expect((await h.taskRecord(id))?.version).toBe(1);
  });

  it('claims: a task in progress under a claim gives 409 not-ready (for the holder too, DECISIONS §7 order); a second claim of a busy agent 409 agent-busy', async () => {
    const first = await h.task(projectId);
    const second = await h.task(projectId);
    await claim(first, agent('agent-a'));
    const other = await failure(claim(first, agent('agent-b')));
    expect([other.details.reason, other.message]).toEqual(['not-ready', "Only ready issues can be claimed; this one is 'in-progress': another agent holds its claim"]);
    expect(await reasonOf(claim(first, agent('agent-a')))).toBe('work-already-claimed/not-ready');
    expect(await reasonOf(claim(second, agent('agent-a')))).toBe('work-already-claimed/agent-busy');
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
    expect((await h.taskRecord(second))?.status).toBe('ready');
  });

  it('claims: an exhausted agent-run quota gives 403 quota-exceeded with the quota object; nothing is claimed', async () => {
    const beginner = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'enterprise' });
    const project = await h.project(beginner);
    const issueId = await h.task(project);
    // The plan allows 10,000 runs a month; use them up the way the counter would.
    ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'pro' });
    const proProject = await h.project(ws);
    const limited = await h.task(proProject);
    await h.meter.tryConsume({ workspaceId: ws, kind: 'agent-runs', limit: 10_000, amount: 10_000, now: h.planning.now });
    const err = await failure(claim(limited, agent('agent-a')));
    expect(err.code).toBe('quota-exceeded');
    expect(err.details.quota).toEqual({ kind: 'agent-runs', limit: 10_000, used: 10_000, resetsAt: '2025-07-01T00:00:00.000Z' });
    expect(await activeOn(limited)).toEqual([]);
    expect((await h.taskRecord(limited))?.status).toBe('ready');
    // Unlimited plans are still counted.
    const ok = await claim(issueId, h.agent(beginner, 'agent-a'));
    expect(ok.metering).toMatchObject({ allowed: true, used: 1 });
    expect(ok.metering?.limit).toBeUndefined();
  });

  it('claims: a token carrying its plan (set by the gateway) is metered under that plan without a GetAccess call; without one, issues is asked', async () => {
    const getAccess = vi.spyOn(h.planning.workspaceRpc, 'getAccess');
    const withPlan = await claim(await h.task(projectId), { ...agent('agent-a'), planId: 'pro' });
    expect(withPlan.metering).toMatchObject({ allowed: true, used: 1, limit: 10_000 });
    expect(getAccess).not.toHaveBeenCalled();
    // The principal's plan is the one applied (the gateway admitted the request under it).
    const enterprise = await claim(await h.task(projectId), { ...agent('agent-b'), planId: 'enterprise' });
    expect(enterprise.metering?.limit).toBeUndefined();
    expect(getAccess).not.toHaveBeenCalled();
    const without = await claim(await h.task(projectId), agent('agent-c'));
    expect(without.metering).toMatchObject({ allowed: true, used: 3, limit: 10_000 });
    expect(getAccess).toHaveBeenCalledTimes(1);
    // A token of another workspace is still told the issue does not exist, whatever plan it carries.
    const other = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'pro' });
    expect(await reasonOf(claim(await h.task(projectId), { ...h.agent(other, 'agent-d'), planId: 'enterprise' }))).toBe('not-found/');
  });

  it('claims: a claim blocked by dependencies becomes claimable when they are done', async () => {
    const dep = await h.task(projectId);
    const issueId = await h.task(projectId, { dependencies: [dep] });
    expect(await reasonOf(claim(issueId, agent('agent-a')))).toBe('work-already-claimed/dependencies-open');
    await h.planning.tasks.updateTask({ id: dep, patch: { status: 'cancelled' } }, owner);
    expect(await reasonOf(claim(issueId, agent('agent-a')))).toBe('work-already-claimed/dependencies-open');
    await h.planning.tasks.updateTask({ id: dep, patch: { status: 'backlog' } }, owner);
    await h.planning.tasks.updateTask({ id: dep, patch: { status: 'ready' } }, owner);
    await h.planning.tasks.updateTask({ id: dep, patch: { status: 'in-progress' } }, owner);
    await h.planning.tasks.updateTask({ id: dep, patch: { status: 'in-review' } }, owner);
    await h.planning.tasks.updateTask({ id: dep, patch: { status: 'done' } }, owner);
    expect((await claim(issueId, agent('agent-a'))).issue?.status).toBe('in-progress');
  });
});

describe('claims: races', () => {
  it('claims: 50 agents racing for one task, 40 times over two replicas: exactly one claim per race, fencing tokens 1..40, one run each', async () => {
    const second = await h.replica();
    const agents = Array.from({ length: 50 }, (_, i) => agent(`racer-${i}`));
    const issueId = await h.task(projectId);
    for (let race = 1; race <= 40; race++) {
      const results = await Promise.allSettled(
        agents.map((a, i) => (i % 2 === 0 ? h.rpc : second.rpc).claimWork({ issueId }, { principal: a })),
      );
      const won = results.filter((r): r is PromiseFulfilledResult<Awaited<ReturnType<typeof h.rpc.claimWork>>> => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).toHaveLength(1);
      // Losers meet the claim being taken (active-claim) or the task already in progress (not-ready).
      const reasons = new Set(lost.map((r) => `${(r.reason as ServiceError).code}/${(r.reason as ServiceError).details.reason}`));
      expect([...reasons].every((x) => x === 'work-already-claimed/active-claim' || x === 'work-already-claimed/not-ready')).toBe(true);
      const winner = won[0]!.value.claim!;
      expect(winner.fencingToken).toBe(race);
      expect(await activeOn(issueId)).toHaveLength(1);
      const holder = agents.find((a) => a.agentId === winner.agentId)!;
      await h.rpc.releaseClaim({ issueId }, { principal: holder });
    }
    expect(await h.meter.used(ws, 'agent-runs')).toBe(40);
    expect(await h.claimEvents('claim.created')).toHaveLength(40);
  });

  it('claims: 20 agents over two replicas racing for the last 5 runs of the quota: 5 claims, 15 quota-exceeded, the counter at the limit, nothing left by a refused claim', async () => {
    const second = await h.replica();
    ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'pro' });
    const project = await h.project(ws);
    const tasks = await Promise.all(Array.from({ length: 20 }, () => h.task(project)));
    await h.meter.tryConsume({ workspaceId: ws, kind: 'agent-runs', limit: 10_000, amount: 9_995, now: h.planning.now });
    const results = await Promise.allSettled(
      tasks.map((issueId, i) => (i % 2 === 0 ? h.rpc : second.rpc).claimWork({ issueId }, { principal: h.agent(ws, `runner-${i}`) })),
    );
    const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.claim!] : []));
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as ServiceError).code] : []));
    expect(won).toHaveLength(5);
    expect(refused).toEqual(Array.from({ length: 15 }, () => 'quota-exceeded'));
    expect(await h.meter.used(ws, 'agent-runs')).toBe(10_000);
    const stored = (await allClaims()).filter((c) => c.workspaceId === ws);
    expect(stored.map((c) => [c._id, c.state, c.meteredPeriod]).sort()).toEqual(won.map((c) => [c.id, 'active', '2025-06']).sort());
    for (const [i, issueId] of tasks.entries()) {
      expect((await h.taskRecord(issueId))?.status).toBe(won.some((c) => c.issueId === issueId) ? 'in-progress' : 'ready');
      if (!won.some((c) => c.issueId === issueId)) expect(await activeOn(issueId), `task ${i}`).toEqual([]);
    }
  });

  it('claims: 30 agents racing for 10 tasks at once: no task held twice, no agent holding two', async () => {
    const second = await h.replica();
    const tasks = await Promise.all(Array.from({ length: 10 }, () => h.task(projectId)));
    const agents = Array.from({ length: 30 }, (_, i) => agent(`agent-${i}`));
    const attempts = agents.flatMap((a, i) => tasks.map((t, j) => ((i + j) % 2 === 0 ? h.rpc : second.rpc).claimWork({ issueId: t }, { principal: a }).then((r) => r.claim!, () => undefined)));
    const won = (await Promise.all(attempts)).filter((c) => c !== undefined);
    expect(new Set(won.map((c) => c.issueId)).size).toBe(won.length);
    expect(new Set(won.map((c) => c.agentId)).size).toBe(won.length);
    expect(won.length).toBeGreaterThan(0);
    const active = (await allClaims()).filter((c) => c.state === 'active');
    expect(active.map((c) => c._id).sort()).toEqual(won.map((c) => c.id).sort());
    for (const t of tasks) {
      const record = await h.taskRecord(t);
      const holder = won.find((c) => c.issueId === t);
      expect(record?.status).toBe(holder ? 'in-progress' : 'ready');
      expect(record?.claim?.claimId).toBe(holder?.id);
    }
    expect(await h.meter.used(ws, 'agent-runs')).toBe(won.length);
  });

  it('claims: a release, a heartbeat, a status post and an expiry racing on one claim leave it ended once and the task ready', async () => {
    const second = await h.replica();
    for (let round = 0; round < 10; round++) {
      const issueId = await h.task(projectId);
      const a = agent(`agent-r${round}`);
      const { claim: c } = await claim(issueId, a);
      advance(600_000);
      await Promise.allSettled([
        h.rpc.releaseClaim({ issueId }, { principal: a }),
        second.rpc.renewClaim({ issueId }, { principal: a }),
        h.rpc.postStatus({ issueId, message: 'still here' }, { principal: a }),
        h.core.sweep({ reconcile: false }),
        second.core.sweep({ reconcile: true }),
      ]);
      const stored = (await allClaims()).find((x) => x._id === c?.id);
      expect(stored?.state).toBe('expired');
      expect(stored?.syncPending).toBeUndefined();
      const task = await h.taskRecord(issueId);
      expect(task?.status).toBe('ready');
      expect(task?.claim).toBeUndefined();
      const ends = (await h.claimEvents()).filter((e) => e.data.subject && (e.data.subject as { id: string }).id === c?.id && e.type !== 'claim.created');
      expect(ends.map((e) => e.type)).toEqual(['claim.expired']);
      const comments = await h.planning.records.listComments({ issueId }, owner);
      expect(comments.comments).toEqual([]);
    }
  });
});

describe('claims: releases answered before their bookkeeping', () => {
  it('claims: a release is answered before its syncPending clear; sweeps and a new claim racing the clear leave one end, the task ready (then claimed), the clear done', async () => {
    const second = await h.replica();
    for (let round = 0; round < 10; round++) {
      const issueId = await h.task(projectId);
      const a = agent(`agent-q${round}`);
      const { claim: c } = await claim(issueId, a);
      const [released, , , again] = await Promise.allSettled([
        h.rpc.releaseClaim({ issueId }, { principal: a }).then(async (r) => {
          // Answered: the end is in both stores whatever the clear's progress.
          expect((await allClaims()).find((x) => x._id === c?.id)?.state).toBe('released');
          expect((await h.taskRecord(issueId))?.claim?.claimId).not.toBe(c?.id);
          return r;
        }),
        h.core.sweep({ reconcile: false }),
        second.core.sweep({ reconcile: true }),
        second.rpc.claimWork({ issueId }, { principal: agent(`agent-p${round}`) }),
      ]);
      expect(released.status).toBe('fulfilled');
      await h.core.settle();
      await second.core.settle();
      const stored = (await allClaims()).find((x) => x._id === c?.id);
      expect([stored?.state, stored?.syncPending]).toEqual(['released', undefined]);
      const task = await h.taskRecord(issueId);
      if (again.status === 'fulfilled') expect([task?.status, task?.claim?.claimId]).toEqual(['in-progress', again.value.claim?.id]);
      else expect([task?.status, task?.claim]).toEqual(['ready', undefined]);
      const activity = await h.planning.planning.tasks.listActivity(issueId, { limit: 20 });
      expect(activity.filter((x) => x.kind === 'claim-released')).toHaveLength(1);
      const ends = (await h.claimEvents()).filter((e) => (e.data.subject as { id: string } | undefined)?.id === c?.id && e.type !== 'claim.created');
      expect(ends.map((e) => e.type)).toEqual(['claim.released']);
    }
  });
});

describe('claims: leases and the stale holder', () => {
  it('claims: a stale holder cannot write after its lease: another agent claims, the first one’s status post, completion, heartbeat and release get 409', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    const b = agent('agent-b');
    const first = await claim(issueId, a);
    advance(600_000); // exactly at expiresAt: expired
    const second = await claim(issueId, b);
    expect(second.claim?.fencingToken).toBe(2);
    expect(await reasonOf(h.rpc.postStatus({ issueId, message: 'late work' }, { principal: a }))).toBe('work-already-claimed/stale-claim');
    expect(await reasonOf(h.rpc.renewClaim({ issueId, fencingToken: 1 }, { principal: a }))).toBe('work-already-claimed/stale-claim');
    expect(await reasonOf(h.rpc.releaseClaim({ issueId }, { principal: a }))).toBe('work-already-claimed/active-claim');
    expect(await reasonOf(h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: 1 }, a))).toBe('work-already-claimed/stale-claim');
    expect(await reasonOf(h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' } }, a))).toBe('work-already-claimed/active-claim');
    expect(await reasonOf(h.planning.records.addEvidence({ issueId, kind: 'note', title: 'mine' }, a))).toBe('work-already-claimed/active-claim');
    // B's work is what the task shows.
    await h.rpc.postStatus({ issueId, message: 'B is on it', fencingToken: 2 }, { principal: b });
    await h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: 2 }, b);
    const task = await h.taskRecord(issueId);
    expect(task?.status).toBe('in-review');
    const comments = await h.planning.records.listComments({ issueId }, owner);
    expect(comments.comments.map((c) => [c.authorId, c.body])).toEqual([['key_agent-b', 'B is on it']]);
    const stored = await allClaims();
    expect(stored.find((c) => c._id === first.claim?.id)).toMatchObject({ state: 'expired', endReason: 'lease-expired' });
    await h.deliverStatusEvents();
    expect((await allClaims()).find((c) => c._id === second.claim?.id)).toMatchObject({ state: 'completed', endReason: 'moved-to-in-review' });
  });

  it('claims: heartbeats and status posts renew the lease on both sides; a stale token or an expired claim is refused', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    await claim(issueId, a);
    advance(300_000);
    const renewed = await h.rpc.renewClaim({ issueId, fencingToken: 1 }, { principal: a });
    expect(renewed.claim?.expiresAt).toBe('2025-06-02T10:15:00.000Z');
    expect((await h.taskRecord(issueId))?.claim?.expiresAt).toBe('2025-06-02T10:15:00.000Z');
    advance(300_000);
    const posted = await h.rpc.postStatus({ issueId, message: 'Tests written' }, { principal: a });
    expect(posted.claim?.expiresAt).toBe('2025-06-02T10:20:00.000Z');
    expect(posted.note?.body).toBe('Tests written');
    expect((await h.taskRecord(issueId))?.claim?.expiresAt).toBe('2025-06-02T10:20:00.000Z');
    expect(await reasonOf(h.rpc.renewClaim({ issueId, fencingToken: 2 }, { principal: a }))).toBe('work-already-claimed/stale-claim');
    expect(await reasonOf(h.rpc.renewClaim({ issueId }, { principal: agent('agent-b') }))).toBe('work-already-claimed/stale-claim');
    expect((await h.claimEvents('claim.renewed')).map((e) => e.data.reason)).toEqual(['heartbeat', 'status-post']);
    advance(600_000);
    expect(await reasonOf(h.rpc.renewClaim({ issueId }, { principal: a }))).toBe('work-already-claimed/stale-claim');
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
  });

  it('claims: the sweeper returns expired claims’ tasks to ready with activity and one claim.expired event, however many replicas sweep', async () => {
    const second = await h.replica();
    const ids = await Promise.all([h.task(projectId), h.task(projectId), h.task(projectId)]);
    for (const [i, id] of ids.entries()) await claim(id, agent(`agent-${i}`));
    advance(300_000);
    await h.rpc.renewClaim({ issueId: ids[2]! }, { principal: agent('agent-2') }); // now expires at 900 s
    advance(299_999);
    await Promise.all([h.core.sweep({ reconcile: false }), second.core.sweep({ reconcile: false })]);
    expect((await h.taskRecord(ids[0]!))?.status).toBe('in-progress');
    advance(1);
    await Promise.all([h.core.sweep({ reconcile: false }), second.core.sweep({ reconcile: false }), h.core.sweep({ reconcile: true })]);
    for (const id of ids.slice(0, 2)) {
      const task = await h.taskRecord(id);
      expect(task?.status).toBe('ready');
      expect(task?.claim).toBeUndefined();
      expect((await h.planning.planning.tasks.listActivity(id, { limit: 10 })).map((a) => a.kind)).toEqual(['created', 'claimed', 'claim-expired']);
    }
    expect((await h.taskRecord(ids[2]!))?.status).toBe('in-progress');
    expect(await h.claimEvents('claim.expired')).toHaveLength(2);
    expect((await allClaims()).filter((c) => c.state === 'active').map((c) => c.issueId)).toEqual([ids[2]]);
    // Expired claims' runs are not given back: the work was handed out.
    expect(await h.meter.used(ws, 'agent-runs')).toBe(3);
  });

  it('claims: a workspace’s lease policy applies to later claims and renewals; an admin sets it, a member cannot', async () => {
    const issueId = await h.task(projectId);
    expect((await h.rpc.getClaimPolicy({ workspaceId: ws }, { principal: viewer })).policy).toMatchObject({ leaseSeconds: 600, defaultLeaseSeconds: 600, custom: false });
    expect(await reasonOf(h.rpc.setClaimPolicy({ workspaceId: ws, leaseSeconds: 30 }, { principal: member }))).toBe('forbidden/insufficient-role');
    expect(await reasonOf(h.rpc.setClaimPolicy({ workspaceId: ws, leaseSeconds: 30 }, { principal: agent('agent-a') }))).toBe('forbidden/missing-scope');
    expect(await reasonOf(h.rpc.setClaimPolicy({ workspaceId: ws, leaseSeconds: 0 }, { principal: owner }))).toBe('invalid-input/');
    const set = await h.rpc.setClaimPolicy({ workspaceId: ws, leaseSeconds: 30 }, { principal: owner });
    expect(set.policy).toMatchObject({ leaseSeconds: 30, custom: true, updatedAt: h.planning.now.toISOString() });
    const res = await claim(issueId, agent('agent-a'));
    expect(res.claim).toMatchObject({ leaseSeconds: 30, expiresAt: '2025-06-02T10:00:30.000Z' });
    const reset = await h.rpc.setClaimPolicy({ workspaceId: ws }, { principal: agent('agent-admin', ['admin']) });
    expect(reset.policy).toMatchObject({ leaseSeconds: 600, custom: false });
  });
});

describe('claims: release and completion', () => {
  it('claims: the holder or a member releases; another agent gets 409 active-claim, a viewer 403, no claim 409 stale-claim', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    await claim(issueId, a);
    expect(await reasonOf(h.rpc.releaseClaim({ issueId }, { principal: agent('agent-b') }))).toBe('work-already-claimed/active-claim');
    expect(await reasonOf(h.rpc.releaseClaim({ issueId }, { principal: viewer }))).toBe('forbidden/insufficient-role');
    expect(await reasonOf(h.rpc.releaseClaim({ issueId, fencingToken: 5 }, { principal: a }))).toBe('work-already-claimed/stale-claim');
    const released = await h.rpc.releaseClaim({ issueId, fencingToken: 1 }, { principal: a });
    expect(released.claim).toMatchObject({ state: 'released', endReason: 'released-by-agent' });
    expect(released.issue?.status).toBe('ready');
    expect(await reasonOf(h.rpc.releaseClaim({ issueId }, { principal: a }))).toBe('work-already-claimed/stale-claim');
    await claim(issueId, agent('agent-b'));
    const byMember = await h.rpc.releaseClaim({ issueId }, { principal: member });
    expect(byMember.claim).toMatchObject({ state: 'released', endReason: 'released-by-member', agentId: 'agent-b' });
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
    expect((await h.claimEvents('claim.released')).map((e) => e.actor)).toEqual([{ type: 'api-key', id: 'key_agent-a' }, { type: 'user', id: 'usr_member' }]);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(2);
  });

  it('claims: completing the task ends the claim; the agent is free at once, before the event arrives', async () => {
    const first = await h.task(projectId);
    const second = await h.task(projectId);
    const a = agent('agent-a');
    const c = await claim(first, a);
    await h.planning.tasks.updateTask({ id: first, patch: { status: 'done' } }, owner).catch(() => undefined);
    await h.planning.tasks.updateTask({ id: first, patch: { status: 'in-review' }, fencingToken: 1 }, a);
    // No event delivered yet: the busy check asks the task and frees the agent.
    const next = await claim(second, a);
    expect(next.claim?.issueId).toBe(second);
    expect((await allClaims()).find((x) => x._id === c.claim?.id)).toMatchObject({ state: 'completed', endReason: 'moved-to-in-review' });
    expect(await h.deliverStatusEvents()).toBeGreaterThan(0);
    expect(await h.claimEvents('claim.completed')).toHaveLength(1);
  });

  it('claims: ready work stops counting a claim as held once its task moved on, before the status event ends the record', async () => {
    const first = await h.task(projectId);
    const second = await h.task(projectId);
    const a = agent('agent-a');
    await claim(first, a);
    const holding = await h.rpc.listReadyWork({}, { principal: a });
    expect(holding.queueSummary).toMatchObject({ heldByYou: 1 });
    expect(holding.items.find((i) => i.id === second)?.agentClaimQueue?.whyNotClaimable?.reason).toBe('agent-busy');
    await h.planning.tasks.updateTask({ id: first, patch: { status: 'in-review' }, fencingToken: 1 }, a);
    // No event delivered: the claim record is still active, the task is not under it any more.
    expect((await allClaims()).find((x) => x.issueId === first)).toMatchObject({ state: 'active' });
    const after = await h.rpc.listReadyWork({}, { principal: a });
    expect(after.queueSummary).toMatchObject({ heldByYou: 0 });
    expect(after.items.map((i) => i.id)).not.toContain(first);
    expect(after.items.find((i) => i.id === second)?.agentClaimQueue).toMatchObject({ state: 'claimable' });
    expect(after.items.find((i) => i.id === second)?.agentClaimQueue?.whyNotClaimable).toBeUndefined();
    await h.deliverStatusEvents();
    expect((await h.rpc.listReadyWork({}, { principal: a })).queueSummary).toMatchObject({ heldByYou: 0 });
  });

  it('claims: a member moving a claimed task back to ready releases the claim through the status event', async () => {
    const issueId = await h.task(projectId);
    const c = await claim(issueId, agent('agent-a'));
    await h.planning.tasks.updateTask({ id: issueId, patch: { status: 'ready' } }, member);
    await h.deliverStatusEvents();
    await h.deliverStatusEvents();
    expect((await allClaims()).find((x) => x._id === c.claim?.id)).toMatchObject({ state: 'released', endReason: 'released' });
    expect(await h.claimEvents('claim.released')).toHaveLength(1);
  });
});

describe('claims: idempotency', () => {
  it('claims: the same key and body return the first response (replayed), once metered; another body 400; per token', async () => {
    const issueId = await h.task(projectId);
    const otherIssue = await h.task(projectId);
    const a = agent('agent-a');
    const first = await claim(issueId, a, 'key-1');
    const again = await claim(issueId, a, 'key-1');
    expect(again.replayed).toBe(true);
    expect({ ...again, replayed: false }).toEqual(first);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
    const mismatch = await failure(claim(otherIssue, a, 'key-1'));
    expect([mismatch.code, mismatch.details.field]).toEqual(['invalid-input', 'idempotency-key']);
    // Errors are answers too: the same key replays the 409, and says it is a replay.
    const b = agent('agent-b');
    const refused = await failure(claim(issueId, b, 'key-1'));
    expect([refused.details.reason, (refused.details as { replayed?: boolean }).replayed]).toEqual(['not-ready', undefined]);
    await h.rpc.releaseClaim({ issueId }, { principal: a });
    const replayed = await failure(claim(issueId, b, 'key-1'));
    expect([replayed.details.reason, (replayed.details as { replayed?: boolean }).replayed]).toEqual(['not-ready', true]);
    expect((await claim(issueId, b, 'key-2')).claim?.agentId).toBe('agent-b');
    // After 24 h the key answers no more.
    advance(24 * 3_600_000);
    expect((await claim(issueId, a, 'key-1')).replayed).toBe(false);
  });

  it('claims: concurrent retries with one key run the claim once; the others get the answer or 409 idempotency-in-flight', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    const second = await h.replica();
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => (i % 2 ? second.rpc : h.rpc).claimWork({ issueId, idempotencyKey: 'same' }, { principal: a })));
    const ok = outcomes.filter((o) => o.status === 'fulfilled').map((o) => (o as PromiseFulfilledResult<Awaited<ReturnType<typeof h.rpc.claimWork>>>).value);
    const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => (o.reason as ServiceError).details.reason);
    expect(ok.length).toBeGreaterThan(0);
    expect(new Set(ok.map((r) => r.claim?.id)).size).toBe(1);
    expect(ok.filter((r) => !r.replayed)).toHaveLength(1);
    expect(new Set(failed)).toEqual(failed.length > 0 ? new Set(['idempotency-in-flight']) : new Set());
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
    expect(await h.claimEvents('claim.created')).toHaveLength(1);
  });

  it('claims: a request still running holds its key (409 idempotency-in-flight) until it finishes; a dead request’s key is taken over after its lease', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    let releaseStart!: () => void;
    const gate = new Promise<void>((resolve) => (releaseStart = resolve));
    h.issuesHooks.before = async (method) => {
      if (method === 'startClaimedWork') await gate;
    };
    const running = claim(issueId, a, 'slow');
    await new Promise((r) => setTimeout(r, 20));
    expect(await reasonOf(claim(issueId, a, 'slow'))).toBe('work-already-claimed/idempotency-in-flight');
    releaseStart();
    const done = await running;
    h.issuesHooks.before = undefined;
    expect((await claim(issueId, a, 'slow')).claim?.id).toBe(done.claim?.id);

    // A request whose process died after the claim was granted: the retry answers with that claim.
    const next = await h.task(projectId);
    await h.rpc.releaseClaim({ issueId }, { principal: a });
    configureFailpoints('claims.after-start=throw');
    await expect(claim(next, a, 'crashy')).rejects.toThrow('failpoint claims.after-start');
    configureFailpoints(undefined);
    expect(await reasonOf(claim(next, a, 'crashy'))).toBe('work-already-claimed/idempotency-in-flight');
    advance(30_000);
    const taken = await claim(next, a, 'crashy');
    expect(taken.claim).toMatchObject({ issueId: next, state: 'active', fencingToken: 1 });
    expect((await h.taskRecord(next))?.claim?.claimId).toBe(taken.claim?.id);
    expect(await h.claimEvents('claim.created')).toHaveLength(2);
    expect((await claim(next, a, 'crashy')).replayed).toBe(true);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(2);
  });
});

describe('claims: crashes mid-claim', () => {
  it('claims: a retry with the idempotency key of a request that died after the insert waits for the repair, then claims', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    configureFailpoints('claims.after-insert=throw');
    await expect(claim(issueId, a, 'retry-me')).rejects.toThrow('failpoint claims.after-insert');
    configureFailpoints(undefined);
    // The dead request still owns the key; past its lease, the claim it left may still start.
    expect(await reasonOf(claim(issueId, a, 'retry-me'))).toBe('work-already-claimed/idempotency-in-flight');
    advance(4_000);
    expect(await reasonOf(claim(issueId, a, 'retry-me'))).toBe('work-already-claimed/idempotency-in-flight');
    advance(30_000);
    const res = await claim(issueId, a, 'retry-me');
    expect(res.claim).toMatchObject({ issueId, state: 'active', fencingToken: 1 });
    expect((await allClaims()).map((c) => c.state)).toEqual(['aborted', 'active']);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
  });

  it('claims: a process dying after the insert leaves no task stuck: the next sweep after the start deadline ends the claim', async () => {
    const issueId = await h.task(projectId);
    const survivor = await h.replica();
    configureFailpoints('claims.after-insert=throw');
    await expect(claim(issueId, agent('agent-a'))).rejects.toThrow('failpoint claims.after-insert');
    configureFailpoints(undefined);
    expect(await activeOn(issueId)).toHaveLength(1);
    expect(await reasonOf(claim(issueId, agent('agent-b')))).toBe('work-already-claimed/active-claim');
    await survivor.core.sweep({ reconcile: false });
    expect(await activeOn(issueId)).toHaveLength(1); // still within its start deadline
    advance(6_001);
    await survivor.core.sweep({ reconcile: false });
    expect(await activeOn(issueId)).toEqual([]);
    expect((await allClaims())[0]).toMatchObject({ state: 'aborted', endReason: 'start-failed' });
    expect(await h.meter.used(ws, 'agent-runs')).toBe(0);
    expect((await claim(issueId, agent('agent-b'))).claim?.fencingToken).toBe(1);
  });

  it('claims: a process dying after the task moved to in-progress: the sweep ends the claim, returns the task to ready and gives the run back', async () => {
    const issueId = await h.task(projectId);
    const survivor = await h.replica();
    configureFailpoints('claims.after-start=throw');
    await expect(claim(issueId, agent('agent-a'))).rejects.toThrow('failpoint claims.after-start');
    configureFailpoints(undefined);
    expect((await h.taskRecord(issueId))?.status).toBe('in-progress');
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
    advance(6_001);
    const swept = await survivor.core.sweep({ reconcile: false });
    expect(swept.repaired).toBe(1);
    const task = await h.taskRecord(issueId);
    expect(task?.status).toBe('ready');
    expect(task?.claim).toBeUndefined();
    expect(await h.meter.used(ws, 'agent-runs')).toBe(0);
    expect((await h.planning.planning.tasks.listActivity(issueId, { limit: 10 })).map((a) => a.kind)).toEqual(['created', 'claimed', 'claim-aborted']);
    expect((await claim(issueId, agent('agent-b'))).claim?.fencingToken).toBe(2);
  });

  it('claims: an end the issues service did not hear of is applied by the next sweep', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    await claim(issueId, a);
    h.issuesHooks.before = async (method) => {
      if (method === 'endClaimedWork') throw new ServiceError('unavailable', 'issues is down');
    };
    const released = await h.rpc.releaseClaim({ issueId }, { principal: a });
    expect(released.issue?.status).toBe('in-progress');
    expect((await allClaims())[0]).toMatchObject({ state: 'released', syncPending: true });
    h.issuesHooks.before = undefined;
    const swept = await h.core.sweep({ reconcile: false });
    expect(swept.synced).toBe(1);
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
    expect((await allClaims())[0]?.syncPending).toBeUndefined();
  });

  it('claims: reconciliation returns a task under an unknown claim to ready, and ends an answered claim whose task moved on', async () => {
    const orphan = await h.task(projectId);
    const moved = await h.task(projectId);
    const a = await claim(orphan, agent('agent-a'));
    const b = await claim(moved, agent('agent-b'));
    await h.store.collection<ClaimRecord>('claims').deleteOne({ _id: a.claim!.id });
    await h.planning.tasks.updateTask({ id: moved, patch: { status: 'in-review' } }, owner);
    advance(10_000);
    const swept = await h.core.sweep({ reconcile: true });
    expect(swept.reconciled).toBe(2);
    expect((await h.taskRecord(orphan))?.status).toBe('ready');
    expect((await allClaims()).find((c) => c._id === b.claim?.id)).toMatchObject({ state: 'completed', endReason: 'moved-to-in-review' });
  });
});

describe('claims: ready work and listing', () => {
  it('claims: ready work ranks the agent’s queue, says why items are not claimable, summarises it and shows the held task first', async () => {
    const urgent = await h.task(projectId, { priority: 'urgent', acceptanceChecks: [{ id: '', title: 'one', done: true }, { id: '', title: 'two' }] });
    const dep = await h.task(projectId, { priority: 'low' });
    const blocked = await h.task(projectId, { priority: 'high', dependencies: [dep] });
    const claimedByOther = await h.task(projectId, { priority: 'medium' });
    await h.task(projectId, { priority: 'urgent', assignedAgentId: 'agent-z' }).catch(() => undefined);
    const a = agent('agent-a');
    const first = await h.rpc.listReadyWork({}, { principal: a });
    expect(first.items.map((i) => [i.id, i.rank, i.agentClaimQueue?.state])).toEqual([
      [urgent, 1, 'claimable'],
      [blocked, 2, 'blocked'],
      [claimedByOther, 3, 'claimable'],
      [dep, 4, 'claimable'],
    ]);
    expect(first.items[0]?.agentClaimQueue).toMatchObject({ quotaState: 'within-run-budget', doneEvidence: { completed: 1, total: 2 } });
    expect(first.items[0]?.agentClaimQueue?.whyNotClaimable).toBeUndefined();
    expect(first.items[1]?.agentClaimQueue?.whyNotClaimable).toMatchObject({ reason: 'dependencies-open', message: '1 dependency is not done yet' });
    expect(first.queueSummary).toMatchObject({ total: 4, claimable: 3, blocked: 1, heldByYou: 0, quotaState: 'within-run-budget' });
    expect(first.claimQueue.map((e) => [e.issueId, e.rank, e.state])).toEqual(first.items.map((i) => [i.id, i.rank, i.agentClaimQueue?.state]));
    await claim(urgent, a);
    const held = await h.rpc.listReadyWork({ limit: 2 }, { principal: a });
    expect(held.items.map((i) => [i.id, i.rank, i.agentClaimQueue?.state, i.agentClaimQueue?.whyNotClaimable?.reason])).toEqual([
      [urgent, 0, 'claimed', 'held-by-you'],
      [blocked, 1, 'blocked', 'dependencies-open'],
      [claimedByOther, 2, 'claimable', 'agent-busy'],
    ]);
    expect(held.items[0]?.claim?.fencingToken).toBe(1);
    expect(held.queueSummary).toMatchObject({ total: 3, heldByYou: 1 });
    const page2 = await h.rpc.listReadyWork({ limit: 2, cursor: held.nextCursor }, { principal: a });
    expect(page2.items.map((i) => [i.id, i.rank])).toEqual([[dep, 3]]);
    expect(page2.nextCursor).toBeUndefined();
  });

  it('claims: ready work shows an exhausted run budget and needs agents:read', async () => {
    await h.task(projectId);
    await h.meter.tryConsume({ workspaceId: ws, kind: 'agent-runs', limit: null, amount: 10_000, now: h.planning.now });
    const res = await h.rpc.listReadyWork({}, { principal: agent('agent-a') });
    expect(res.queueSummary?.quotaState).toBe('run-budget-exhausted');
    expect(res.items[0]?.agentClaimQueue).toMatchObject({ quotaState: 'run-budget-exhausted', whyNotClaimable: { reason: 'run-budget-exhausted' } });
    expect(res.metering).toMatchObject({ allowed: false, used: 10_000, limit: 10_000 });
    expect(await reasonOf(h.rpc.listReadyWork({}, { principal: agent('agent-a', ['agents:execute']) }))).toBe('forbidden/missing-scope');
    expect(await reasonOf(h.rpc.listReadyWork({}, { principal: member }))).toBe('forbidden/token-required');
  });

  it('claims: a claim past its expiry lists as expired before any sweep has ended it', async () => {
    const issueId = await h.task(projectId);
    const c = await claim(issueId, agent('agent-a'));
    advance(600_000);
    expect((await h.rpc.listClaims({ workspaceId: ws }, { principal: owner })).claims).toEqual([]);
    const expired = await h.rpc.listClaims({ workspaceId: ws, states: ['expired'] }, { principal: owner });
    expect(expired.claims.map((x) => [x.id, x.state])).toEqual([[c.claim?.id, 'expired']]);
    expect((await allClaims())[0]?.state).toBe('active');
  });

  it('claims: claims are listed per workspace, newest first, by state, issue and agent', async () => {
    const one = await h.task(projectId);
    const two = await h.task(projectId);
    const a = agent('agent-a');
    await claim(one, a);
    await h.rpc.releaseClaim({ issueId: one }, { principal: a });
    advance(1);
    await claim(two, a);
    const active = await h.rpc.listClaims({ workspaceId: ws }, { principal: viewer });
    expect(active.claims.map((c) => [c.issueId, c.state])).toEqual([[two, 'active']]);
    const all = await h.rpc.listClaims({ states: ['active', 'released'] }, { principal: a });
    expect(all.claims.map((c) => [c.issueId, c.state])).toEqual([[two, 'active'], [one, 'released']]);
    const paged = await h.rpc.listClaims({ workspaceId: ws, states: ['active', 'released'], limit: 1 }, { principal: member });
    const rest = await h.rpc.listClaims({ workspaceId: ws, states: ['active', 'released'], limit: 1, cursor: paged.nextCursor }, { principal: member });
    expect([...paged.claims, ...rest.claims].map((c) => c.issueId)).toEqual([two, one]);
    expect((await h.rpc.listClaims({ workspaceId: ws, issueId: one, states: ['released'] }, { principal: owner })).claims).toHaveLength(1);
    expect(await reasonOf(h.rpc.listClaims({ workspaceId: ws, states: ['nope'] }, { principal: owner }))).toBe('invalid-input/');
    expect(await reasonOf(h.rpc.listClaims({}, { principal: owner }))).toBe('invalid-input/');
    const other = await h.planning.workspace({ ownerId: 'usr_other' });
    expect(await reasonOf(h.rpc.listClaims({ workspaceId: other }, { principal: owner }))).toBe('forbidden/not-a-member');
    expect(await reasonOf(h.rpc.listClaims({ workspaceId: other }, { principal: a }))).toBe('not-found/');
  });
});

describe('claims: review findings', () => {
  /** The next startClaimedWork answers `unavailable` at once (its deadline passed); the real call is kept for later. */
  function loseNextStartAnswer(): { late: () => Promise<unknown> } {
    const held: { late: () => Promise<unknown> } = { late: () => Promise.reject(new Error('no start was held')) };
    h.issuesHooks.around = (method, call) => {
      if (method !== 'startClaimedWork') return call();
      h.issuesHooks.around = undefined;
      held.late = call;
      return Promise.reject(new ServiceError('unavailable', 'ClaimSupportService: deadline exceeded'));
    };
    return held;
  }

  /** Holds the next startClaimedWork until `open()`. */
  function gateNextStart(): { open: () => void } {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let used = false;
    h.issuesHooks.before = async (method) => {
      if (method !== 'startClaimedWork' || used) return;
      used = true;
      await gate;
    };
    return { open };
  }

  it('tombstones: the end of a claim whose start went unanswered leaves one on the task until startBy; the release of a started claim leaves none', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    // Started and answered: no start of it can be on its way, so its release records nothing.
    for (let i = 0; i < 3; i++) {
      await claim(issueId, a);
      await h.rpc.releaseClaim({ issueId }, { principal: a });
    }
    expect((await h.taskRecord(issueId))?.endedClaims).toBeUndefined();
    // A start whose answer was lost: the abort's end keeps the claim from ever starting.
    const lost = loseNextStartAnswer();
    expect(await reasonOf(claim(issueId, a))).toBe('unavailable/');
    const aborted = (await allClaims()).find((c) => c.state === 'aborted');
    expect(aborted?.started).toBe(false);
    expect((await h.taskRecord(issueId))?.endedClaims).toEqual([{ claimId: aborted?._id, until: aborted?.startBy.toISOString() }]);
    expect(await reasonOf(lost.late())).toBe('work-already-claimed/stale-claim');
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
  });

  it('finding 1: a start that lands after the request gave up while the abort could not reach the task is ended by the next sweep; the key waits for it, then claims again', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    const lost = loseNextStartAnswer();
    // The abort's end does not reach the issues service either: no tombstone on the task.
    h.issuesHooks.before = async (method) => {
      if (method === 'endClaimedWork') throw new ServiceError('unavailable', 'issues is down');
    };
    expect(await reasonOf(claim(issueId, a, 'k1'))).toBe('unavailable/');
    expect((await allClaims())[0]).toMatchObject({ state: 'aborted', refunded: true, syncPending: true });
    await lost.late(); // issues' transaction commits after the abort, before startBy
    expect((await h.taskRecord(issueId))?.status).toBe('in-progress');
    // The key is not forgotten: a retry waits while the aborted claim's end has not reached the task.
    expect(await reasonOf(claim(issueId, a, 'k1'))).toBe('work-already-claimed/idempotency-in-flight');
    h.issuesHooks.before = undefined;
    // The next sweep applies the end (no need to wait for startBy: the task keeps a tombstone).
    expect((await h.core.sweep({ reconcile: false })).synced).toBe(1);
    const task = await h.taskRecord(issueId);
    expect(task?.status).toBe('ready');
    expect(task?.claim).toBeUndefined();
    expect((await allClaims())[0]?.syncPending).toBeUndefined();
    // The aborted claim's token is dead; the retry with the same key claims anew.
    expect(await reasonOf(h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: 1 }, a))).toBe('work-already-claimed/stale-claim');
    const retried = await claim(issueId, a, 'k1');
    expect(retried.claim).toMatchObject({ state: 'active', fencingToken: 2 });
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
  });

  it('finding 1: a start that would land after its claim was aborted is refused on the task itself; the aborted agent cannot write under it and another agent claims at once', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    const lost = loseNextStartAnswer();
    expect(await reasonOf(claim(issueId, a))).toBe('unavailable/');
    // The issues transaction "still runs" and reaches the task only now, after the abort, before startBy.
    const late = await lost.late().then(
      () => 'started',
      (e: ServiceError) => `${e.code}/${e.details.reason ?? ''}`,
    );
    expect(late).toBe('work-already-claimed/stale-claim');
    // No sweep has run: the task never went in progress under the aborted claim.
    const task = await h.taskRecord(issueId);
    expect([task?.status, task?.claim]).toEqual(['ready', undefined]);
    expect(await reasonOf(h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: 1 }, a))).toBe('work-already-claimed/stale-claim');
    const b = await claim(issueId, agent('agent-b'));
    expect(b.claim).toMatchObject({ agentId: 'agent-b', state: 'active', fencingToken: 1 });
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
    // The sweeps that follow change nothing: b keeps the task.
    advance(6_001);
    await h.core.sweep({ reconcile: true });
    expect((await h.taskRecord(issueId))?.claim).toMatchObject({ claimId: b.claim?.id, agentId: 'agent-b' });
  });

  it('finding 1: a start still running while its claim is aborted either lands first and is ended on the spot, or is refused; a retry with the same key claims at once', async () => {
    for (let round = 0; round < 12; round++) {
      const issueId = await h.task(projectId);
      const agentId = `agent-race${round}`;
      const a = agent(agentId);
      let racing: Promise<string> = Promise.resolve('not called');
      h.issuesHooks.around = (method, call) => {
        if (method !== 'startClaimedWork') return call();
        h.issuesHooks.around = undefined;
        // The real start runs on (at once, or a moment later) while the caller has given up.
        const later = round % 2 === 0 ? Promise.resolve() : new Promise((r) => setTimeout(r, 0));
        racing = later.then(call).then(
          () => 'started',
          (e: ServiceError) => `${e.code}/${e.details.reason ?? ''}`,
        );
        return Promise.reject(new ServiceError('unavailable', 'ClaimSupportService: deadline exceeded'));
      };
      expect(await reasonOf(claim(issueId, a, `race-${round}`))).toBe('unavailable/');
      expect(['started', 'work-already-claimed/stale-claim']).toContain(await racing);
      const task = await h.taskRecord(issueId);
      expect([task?.status, task?.claim]).toEqual(['ready', undefined]);
      const [aborted] = (await allClaims()).filter((c) => c.issueId === issueId);
      expect(aborted).toMatchObject({ state: 'aborted', refunded: true });
      expect(aborted?.syncPending).toBeUndefined();
      // No waiting for startBy: the same key claims again now.
      const retried = await claim(issueId, a, `race-${round}`);
      expect(retried.claim).toMatchObject({ state: 'active', agentId });
      expect((await h.taskRecord(issueId))?.claim?.claimId).toBe(retried.claim?.id);
    }
    expect(await h.meter.used(ws, 'agent-runs')).toBe(12);
  });

  it('finding 3: after the lease is lowered, a heartbeat and a status post leave the task’s mirror at the claim’s expiry', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    await claim(issueId, a); // 600 s
    await h.rpc.setClaimPolicy({ workspaceId: ws, leaseSeconds: 60 }, { principal: owner });
    advance(1_000);
    const beat = await h.rpc.renewClaim({ issueId }, { principal: a });
    expect(beat.claim?.expiresAt).toBe('2025-06-02T10:01:01.000Z');
    expect((await h.taskRecord(issueId))?.claim?.expiresAt).toBe(beat.claim?.expiresAt);
    advance(1_000);
    const post = await h.rpc.postStatus({ issueId, message: 'shorter lease' }, { principal: a });
    expect((await h.taskRecord(issueId))?.claim?.expiresAt).toBe(post.claim?.expiresAt);
    advance(60_000);
    expect(await reasonOf(h.planning.records.addEvidence({ issueId, kind: 'note', title: 'after expiry' }, a))).toBe('work-already-claimed/stale-claim');
  });

  it('finding 4: a request that outlived its lease cannot forget or answer for the retry that took its key over', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    const first = gateNextStart();
    const slow = claim(issueId, a, 'k4').then(
      () => 'ok',
      (e: ServiceError) => `${e.code}/${e.details.reason ?? ''}`,
    );
    await new Promise((r) => setTimeout(r, 20));
    advance(30_000);
    const second = gateNextStart();
    const retry = claim(issueId, a, 'k4');
    await new Promise((r) => setTimeout(r, 20));
    first.open();
    expect(await slow).toBe('unavailable/'); // its start came after startBy
    // The slow request did not delete the retry's record: a third request waits instead of claiming.
    expect(await reasonOf(claim(issueId, a, 'k4'))).toBe('work-already-claimed/idempotency-in-flight');
    second.open();
    const won = await retry;
    const again = await claim(issueId, a, 'k4');
    expect([again.replayed, again.claim?.id]).toEqual([true, won.claim?.id]);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
  });

  it('finding 4: a takeover whose claim was granted and has ended answers with that claim; no second claim, no second run', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    const granted = await claim(issueId, a, 'k5');
    // As if the process died between the claim and storing the answer.
    await h.store.collection('idempotency_keys').updateOne({}, { $set: { state: 'in-flight', ownerUntil: h.planning.now, owner: 'dead' }, $unset: { answer: '' } });
    await h.rpc.releaseClaim({ issueId }, { principal: a });
    advance(1);
    const res = await claim(issueId, a, 'k5');
    expect(res.claim).toMatchObject({ id: granted.claim?.id, state: 'released' });
    expect((await allClaims()).map((c) => c.state)).toEqual(['released']);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(1);
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
  });

  it('finding 5: a member releasing an expired claim not yet swept gets 409 stale-claim; the claim ends expired, not released', async () => {
    const issueId = await h.task(projectId);
    await claim(issueId, agent('agent-a'));
    advance(600_000);
    expect(await reasonOf(h.rpc.releaseClaim({ issueId }, { principal: member }))).toBe('work-already-claimed/stale-claim');
    expect((await allClaims())[0]).toMatchObject({ state: 'expired', endReason: 'lease-expired' });
    expect(await h.claimEvents('claim.released')).toEqual([]);
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
  });

  it('finding 6: one sweep goes through full batches until the backlog of expired claims is cleared', async () => {
    const ids = await Promise.all(Array.from({ length: 5 }, () => h.task(projectId)));
    for (const [i, id] of ids.entries()) await claim(id, agent(`agent-${i}`));
    advance(600_000);
    const swept = await h.core.sweep({ reconcile: false, batch: 2 });
    expect(swept.expired).toBe(5);
    for (const id of ids) expect((await h.taskRecord(id))?.status).toBe('ready');
  });

  it('a sweep with a failed step still ends the expired claims, and reports and logs what it did', async () => {
    const ids = await Promise.all(Array.from({ length: 3 }, () => h.task(projectId)));
    for (const [i, id] of ids.entries()) await claim(id, agent(`agent-${i}`));
    advance(600_000);
    h.issuesHooks.before = async (method) => {
      if (method === 'releaseExpiredClaims') throw new ServiceError('unavailable', 'issues is down');
    };
    const failed = await h.core.sweep({ reconcile: false }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(SweepFailedError);
    expect(failed).toMatchObject({ message: 'issues is down', failedSteps: 1, done: { expired: 3, released: 0 } });
    expect((failed as SweepFailedError).cause).toBeInstanceOf(ServiceError);
    for (const id of ids) expect((await h.taskRecord(id))?.status).toBe('ready');

    // Through the sweeper: the run's work is logged, then its failure.
    const more = await Promise.all(Array.from({ length: 2 }, () => h.task(projectId)));
    for (const [i, id] of more.entries()) await claim(id, agent(`agent-${i}`));
    advance(600_000);
    const lines: { level: string; obj: unknown; msg: string }[] = [];
    const logger = {
      info: (obj: unknown, msg: string) => lines.push({ level: 'info', obj, msg }),
      warn: (obj: unknown, msg: string) => lines.push({ level: 'warn', obj, msg }),
      error: (obj: unknown, msg: string) => lines.push({ level: 'error', obj, msg }),
    };
    const sweeper = createSweeper(h.core, { intervalMs: 60_000, reconcileIntervalMs: 60_000, logger });
    await sweeper.sweepOnce();
    h.issuesHooks.before = undefined;
    expect(lines.map((l) => `${l.level} ${l.msg}`)).toEqual(['info claims swept', 'warn claim sweep failed; the next sweep retries']);
    expect(lines[0]?.obj).toMatchObject({ expired: 2, failedSteps: 1 });
  });

  it('finding 6: reconciliation runs in a loop of its own, so a long one never holds up the sweeps', async () => {
    const sweeps: boolean[] = [];
    let reconciles = 0;
    let finishReconcile!: () => void;
    const fake = {
      sweep: async (o: { reconcile: boolean }) => {
        sweeps.push(o.reconcile);
        return { expired: 0, released: 0, repaired: 0, synced: 0, reconciled: 0 };
      },
      reconcileAll: async () => {
        reconciles += 1;
        await new Promise<void>((resolve) => (finishReconcile = resolve));
        return 0;
      },
    };
    const sweeper = createSweeper(fake as unknown as ClaimsCore, { intervalMs: 100, reconcileIntervalMs: 60_000, logger: { info() {}, warn() {}, error() {} } });
    sweeper.start();
    await new Promise((r) => setTimeout(r, 450));
    expect(reconciles).toBe(1); // one sweep interval after start, and still running
    expect(sweeps.length).toBeGreaterThanOrEqual(2);
    expect(sweeps.every((r) => r === false)).toBe(true);
    finishReconcile();
    await sweeper.stop();
  });

  it('finding 7: refusals in the order of DECISIONS §7: an in-progress task is not-ready, a ready task whose claim is being taken active-claim', async () => {
    const issueId = await h.task(projectId);
    const gate = gateNextStart();
    const taking = claim(issueId, agent('agent-a'));
    await new Promise((r) => setTimeout(r, 20));
    expect(await reasonOf(claim(issueId, agent('agent-b')))).toBe('work-already-claimed/active-claim');
    gate.open();
    await taking;
    expect(await reasonOf(claim(issueId, agent('agent-b')))).toBe('work-already-claimed/not-ready');
  });

  it('finding 8: a starting claim: another agent releasing it gets active-claim; ready work counts it only when it is in the agent’s queue', async () => {
    await h.planning.addAgent(ws, 'agent-c');
    const elsewhere = await h.task(projectId, { assignedAgentId: 'agent-c' });
    const mine = await h.task(projectId);
    const gate = gateNextStart();
    const taking = claim(elsewhere, agent('agent-c'));
    await new Promise((r) => setTimeout(r, 20));
    expect(await reasonOf(h.rpc.releaseClaim({ issueId: elsewhere }, { principal: agent('agent-b') }))).toBe('work-already-claimed/active-claim');
    const work = await h.rpc.listReadyWork({}, { principal: agent('agent-b') });
    expect(work.items.map((i) => i.id)).toEqual([mine]);
    expect(work.queueSummary).toMatchObject({ total: 1, claimable: 1, blocked: 0 });
    gate.open();
    await taking;
  });

  it('finding 8: a heartbeat whose task renewal failed writes no claim.renewed event', async () => {
    const issueId = await h.task(projectId);
    const a = agent('agent-a');
    await claim(issueId, a);
    h.issuesHooks.before = async (method) => {
      if (method === 'renewClaimedWork') throw new ServiceError('unavailable', 'issues is down');
    };
    expect(await reasonOf(h.rpc.renewClaim({ issueId }, { principal: a }))).toBe('unavailable/');
    expect(await h.claimEvents('claim.renewed')).toEqual([]);
    h.issuesHooks.before = undefined;
    await h.rpc.renewClaim({ issueId }, { principal: a });
    expect((await h.claimEvents('claim.renewed')).map((e) => e.data.reason)).toEqual(['heartbeat']);
  });
});
