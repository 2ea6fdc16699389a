import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import { ServiceError } from '@planning/errors';
import { ClaimSupportService } from '@planning/proto/planning/issues/v1/claim_support_pb';
import { SYSTEM_PRINCIPAL, type CallContext, type Principal, type ServiceImplementation } from '@planning/rpc';
import type { DocumentStore, StoreSession } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimSupportOf } from '../testing/claim-support-harness.js';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';

let h: PlanningHarness;
let impl: ServiceImplementation<typeof ClaimSupportService>;
let ws: string;
let projectId: string;
const owner: Principal = { type: 'user', id: 'usr_owner', userId: 'usr_owner', isAdmin: false, scopes: [] };
const SCOPES = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];
const actor = { type: 'api-key', id: 'key_agent-a' };

type Methods = (typeof ClaimSupportService)['method'];
/** Calls a method the way the gRPC server would: through the codec, with a principal. */
async function call<K extends keyof Methods>(
  method: K,
  request: MessageInitShape<Methods[K]['input']>,
  principal: Principal = SYSTEM_PRINCIPAL,
): Promise<MessageShape<Methods[K]['output']>> {
  const desc = ClaimSupportService.methods.find((m) => m.localName === method)!;
  const input = desc.input as DescMessage;
  const output = desc.output as DescMessage;
  const req = fromBinary(input, toBinary(input, create(input, request as never)));
  const res = await (impl[method] as (r: unknown, c: CallContext) => Promise<unknown>)(req, { principal } as CallContext);
  return fromBinary(output, toBinary(output, create(output, res as never))) as MessageShape<Methods[K]['output']>;
}

async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  return err as ServiceError;
}

const iso = (offsetMs: number) => new Date(h.now.getTime() + offsetMs).toISOString();

async function newTask(fields: Record<string, unknown> = {}): Promise<string> {
  const res = await h.tasks.createTask({ projectId, title: 'Claimable', ...fields }, owner);
  return res.task!.task!.id;
}

async function start(issueId: string, claimId = 'clm_a', agentId = 'agent-a', leaseMs = 60_000) {
  return call('startClaimedWork', { issueId, claimId, agentId, expiresAt: iso(leaseMs), startBy: iso(5_000), actor });
}

beforeEach(async () => {
  h = await createPlanningHarness();
  impl = await claimSupportOf(h);
  ws = await h.workspace({ ownerId: 'usr_owner' });
  for (const agent of ['agent-a', 'agent-b']) await h.addAgent(ws, agent);
  projectId = (await h.projects.createProject({ workspaceId: ws, name: 'P' }, owner)).project!.id;
});

afterEach(async () => {
  await h.close();
});

describe('claim support: starting work', () => {
  it('claim support: a start moves the task to in-progress under the claim with fencing token 1, activity and a status event naming the claim', async () => {
    const id = await newTask();
    const { target } = await start(id);
    expect(target).toMatchObject({ issueId: id, workspaceId: ws, status: 'in-progress', lastFencingToken: 1, claim: { claimId: 'clm_a', agentId: 'agent-a', fencingToken: 1 } });
    const task = await h.planning.tasks.get(id);
    expect(task?.claim).toEqual({ claimId: 'clm_a', agentId: 'agent-a', fencingToken: 1, expiresAt: iso(60_000) });
    const activity = await h.planning.tasks.listActivity(id, { limit: 10 });
    expect(activity.map((a) => a.kind)).toEqual(['created', 'claimed']);
    expect(activity[1]?.actor).toEqual(actor);
    const [event] = await h.events('task.status-changed');
    expect(event?.data).toEqual({ subject: { type: 'task', id }, issueId: id, from: 'ready', to: 'in-progress', claimId: 'clm_a', agentId: 'agent-a', claimStart: true });
  });

  it('claim support: the same claim again answers the same; another claim, a late start and every refusal change nothing', async () => {
    const id = await newTask();
    await start(id);
    const again = await start(id);
    expect(again.target?.claim?.fencingToken).toBe(1);
    // In progress under another claim: not ready (DECISIONS §7 order).
    expect((await failure(start(id, 'clm_b', 'agent-b'))).details.reason).toBe('not-ready');
    const other = await newTask();
    const late = await failure(call('startClaimedWork', { issueId: other, claimId: 'clm_c', agentId: 'agent-a', expiresAt: iso(60_000), startBy: iso(-1), actor }));
    expect(late.details.reason).toBe('stale-claim');
    // A claim whose lease passed before its work started never starts it.
    const lapsed = await failure(call('startClaimedWork', { issueId: other, claimId: 'clm_g', agentId: 'agent-a', expiresAt: iso(0), startBy: iso(5_000), actor }));
    expect(lapsed.details.reason).toBe('stale-claim');
    const blocked = await newTask({ dependencies: [other] });
    expect((await failure(start(blocked, 'clm_d'))).details.reason).toBe('dependencies-open');
    const backlog = await newTask({ status: 'backlog' });
    expect((await failure(start(backlog, 'clm_e'))).details.reason).toBe('not-ready');
    const assigned = await newTask({ assignedAgentId: 'agent-b' });
    const refused = await failure(start(assigned, 'clm_f'));
    expect([refused.code, refused.details.reason]).toEqual(['forbidden', 'assigned-to-another-agent']);
    for (const t of [other, blocked, backlog, assigned]) {
      const task = await h.planning.tasks.get(t);
      expect(task?.claim).toBeUndefined();
      expect(task?.version).toBe(1);
    }
  });

  it('claim support: fencing tokens grow with every claim of a task', async () => {
    const id = await newTask();
    const tokens: number[] = [];
    for (const n of [1, 2, 3]) {
      const { target } = await start(id, `clm_${n}`);
      tokens.push(target!.claim!.fencingToken);
      await call('endClaimedWork', { issueId: id, claimId: `clm_${n}`, outcome: 'released', actor });
    }
    expect(tokens).toEqual([1, 2, 3]);
  });

  it('claim support: writing methods are for the agents-claims service only', async () => {
    const id = await newTask();
    const token: Principal = { type: 'api-key', id: 'key_a', keyId: 'key_a', workspaceId: ws, agentId: 'agent-a', isAdmin: false, scopes: SCOPES };
    for (const principal of [token, owner]) {
      const err = await failure(call('startClaimedWork', { issueId: id, claimId: 'clm_x', agentId: 'agent-a', expiresAt: iso(1), startBy: iso(1), actor }, principal));
      expect([err.code, err.details.reason]).toEqual(['forbidden', 'service-only']);
      expect((await failure(call('releaseExpiredClaims', { limit: 1 }, principal))).code).toBe('forbidden');
    }
    expect((await failure(call('endClaimedWork', { issueId: id, claimId: 'clm_x', outcome: 'released', actor }, { ...owner, type: 'anonymous' }))).code).toBe('unauthorized');
  });

  it('claim support: the target answers a token of the workspace, 404 to a token of another one', async () => {
    const id = await newTask();
    const other = await h.workspace({ ownerId: 'usr_other' });
    const token = (workspaceId: string): Principal => ({ type: 'api-key', id: 'key_a', keyId: 'key_a', workspaceId, agentId: 'agent-a', isAdmin: false, scopes: SCOPES });
    expect((await call('getClaimTarget', { issueId: id }, token(ws))).target?.status).toBe('ready');
    expect((await failure(call('getClaimTarget', { issueId: id }, token(other)))).code).toBe('not-found');
    expect((await failure(call('getClaimTarget', { issueId: 'iss_missing' }))).code).toBe('not-found');
  });
});

describe('claim support: renewing, ending, status posts', () => {
  it('claim support: renewal moves the mirrored expiry only while the claim is active and unexpired', async () => {
    const id = await newTask();
    await start(id);
    await call('renewClaimedWork', { issueId: id, claimId: 'clm_a', expiresAt: iso(120_000), renewal: 1 });
    expect((await h.planning.tasks.get(id))?.claim?.expiresAt).toBe(iso(120_000));
    expect((await failure(call('renewClaimedWork', { issueId: id, claimId: 'clm_other', expiresAt: iso(1), renewal: 2 }))).details.reason).toBe('stale-claim');
    expect((await failure(call('renewClaimedWork', { issueId: id, claimId: 'clm_a', expiresAt: iso(1) }))).details.field).toBe('renewal');
    h.now = new Date(h.now.getTime() + 120_000);
    expect((await failure(call('renewClaimedWork', { issueId: id, claimId: 'clm_a', expiresAt: iso(60_000), renewal: 2 }))).details.reason).toBe('stale-claim');
  });

  it('claim support: the mirror takes the newest renewal’s expiry, also an earlier one (a lowered lease); a late, older renewal changes nothing', async () => {
    const id = await newTask();
    await start(id, 'clm_a', 'agent-a', 600_000);
    // The lease was lowered: renewal 2 ends earlier than the start's expiry, and the mirror follows it.
    await call('renewClaimedWork', { issueId: id, claimId: 'clm_a', expiresAt: iso(60_000), renewal: 2 });
    expect((await h.planning.tasks.get(id))?.claim).toMatchObject({ expiresAt: iso(60_000), renewal: 2 });
    // Renewal 1 (the old, longer lease) arrives late: still answered, but the mirror keeps renewal 2.
    const late = await call('renewClaimedWork', { issueId: id, claimId: 'clm_a', expiresAt: iso(600_000), renewal: 1 });
    expect(late.target?.claim?.expiresAt).toBe(iso(60_000));
    const post = await call('postClaimStatus', { issueId: id, claimId: 'clm_a', message: 'late post', expiresAt: iso(600_000), actor, renewal: 1 });
    expect(post.target?.claim?.expiresAt).toBe(iso(60_000));
    await call('postClaimStatus', { issueId: id, claimId: 'clm_a', message: 'newer post', expiresAt: iso(30_000), actor, renewal: 3 });
    expect((await h.planning.tasks.get(id))?.claim).toMatchObject({ expiresAt: iso(30_000), renewal: 3 });
  });

  it('claim support: ending returns the task to ready once, recording activity and the claim end; other claims and moved tasks are left alone', async () => {
    const id = await newTask();
    await start(id);
    expect((await call('endClaimedWork', { issueId: id, claimId: 'clm_other', outcome: 'released', actor })).ended).toBe(false);
    const first = await call('endClaimedWork', { issueId: id, claimId: 'clm_a', outcome: 'released', actor });
    expect(first.ended).toBe(true);
    expect(first.target).toMatchObject({ status: 'ready', lastFencingToken: 1 });
    expect(first.target?.claim).toBeUndefined();
    expect((await call('endClaimedWork', { issueId: id, claimId: 'clm_a', outcome: 'released', actor })).ended).toBe(false);
    const events = await h.events('task.status-changed');
    expect(events.at(-1)?.data).toMatchObject({ from: 'in-progress', to: 'ready', claimId: 'clm_a', claimEnd: 'released' });
    const kinds = (await h.planning.tasks.listActivity(id, { limit: 10 })).map((a) => a.kind);
    expect(kinds).toEqual(['created', 'claimed', 'claim-released']);
    expect((await call('endClaimedWork', { issueId: 'iss_gone', claimId: 'clm_a', outcome: 'expired', actor })).ended).toBe(false);
  });

  it('claim support: an end before the start leaves a tombstone until startBy: that claim never starts, others do; pruned later, never shown, not a change of the task', async () => {
    const id = await newTask();
    const aborted = await call('endClaimedWork', { issueId: id, claimId: 'clm_a', outcome: 'aborted', actor, startBy: iso(5_000) });
    expect([aborted.ended, aborted.target?.status]).toEqual([false, 'ready']);
    let task = await h.planning.tasks.get(id);
    expect(task?.endedClaims).toEqual([{ claimId: 'clm_a', until: iso(5_000) }]);
    expect(task?.version).toBe(1);
    expect((await h.planning.tasks.listActivity(id, { limit: 10 })).map((a) => a.kind)).toEqual(['created']);
    // The start of the aborted claim arrives late, before its startBy: refused, nothing changes.
    const late = await failure(start(id));
    expect([late.details.reason, late.message]).toEqual(['stale-claim', 'The claim was ended before its work started; claim the issue again']);
    expect((await h.planning.tasks.get(id))?.version).toBe(1);
    // Not part of the task as anyone sees it.
    const shown = JSON.stringify(await h.tasks.getTask({ id }, owner));
    expect(shown).not.toContain('clm_a');
    expect(shown).not.toMatch(/endedClaims|ended_claims/);
    // Another claim starts; its end (a release) records its own tombstone beside the first.
    expect((await start(id, 'clm_b', 'agent-b')).target?.claim?.fencingToken).toBe(1);
    expect((await call('endClaimedWork', { issueId: id, claimId: 'clm_b', outcome: 'released', actor, startBy: iso(5_000) })).ended).toBe(true);
    expect((await h.planning.tasks.get(id))?.endedClaims?.map((e) => e.claimId)).toEqual(['clm_a', 'clm_b']);
    // Past their startBy the entries go with the next write; ends without startBy (or past it) record nothing.
    h.now = new Date(h.now.getTime() + 5_001);
    await call('endClaimedWork', { issueId: id, claimId: 'clm_c', outcome: 'aborted', actor, startBy: iso(5_000) });
    expect((await h.planning.tasks.get(id))?.endedClaims).toEqual([{ claimId: 'clm_c', until: iso(5_000) }]);
    await call('endClaimedWork', { issueId: id, claimId: 'clm_d', outcome: 'aborted', actor, startBy: iso(-1) });
    await call('endClaimedWork', { issueId: id, claimId: 'clm_e', outcome: 'expired', actor });
    expect((await h.planning.tasks.get(id))?.endedClaims?.map((e) => e.claimId)).toEqual(['clm_c']);
    h.now = new Date(h.now.getTime() + 5_001);
    expect((await start(id, 'clm_f')).target?.claim?.fencingToken).toBe(2);
    task = await h.planning.tasks.get(id);
    expect(task?.endedClaims).toBeUndefined();
    expect((await failure(call('endClaimedWork', { issueId: id, claimId: 'clm_f', outcome: 'aborted', actor, startBy: 'soon' }))).details.field).toBe('startBy');
  });

  it('claim support: a start and an end of one claim racing: exactly one wins on the task document, and the task always ends ready without the claim', async () => {
    // Counts transaction attempts: a retried attempt is a write conflict between the two.
    const store = h.store as DocumentStore;
    const original = store.withTransaction.bind(store);
    let transactions = 0;
    let attempts = 0;
    store.withTransaction = <R,>(fn: (session: StoreSession) => Promise<R>) => {
      transactions += 1;
      return original((session) => {
        attempts += 1;
        return fn(session);
      });
    };
    const outcomes = { startedThenEnded: 0, refused: 0 };
    try {
      for (let round = 0; round < 40; round++) {
        const id = await newTask();
        const claimId = `clm_race${round}`;
        // Both at once (their transactions overlap), or one a moment after the other (either order).
        const later = (mine: number) => (round % 3 === mine ? new Promise((r) => setTimeout(r, 0)) : Promise.resolve());
        const startCall = later(1).then(() => start(id, claimId));
        const endCall = later(2).then(() => call('endClaimedWork', { issueId: id, claimId, outcome: 'aborted', actor, startBy: iso(5_000) }));
        const [started, ended] = await Promise.allSettled([startCall, endCall]);
        if (ended.status !== 'fulfilled') throw ended.reason;
        if (started.status === 'fulfilled') {
          // The start committed first: the end found it and ended it on the spot.
          expect(ended.value.ended).toBe(true);
          outcomes.startedThenEnded += 1;
        } else {
          // The tombstone committed first: the start read it (after its write conflict, again) and was refused.
          expect((started.reason as ServiceError).details.reason).toBe('stale-claim');
          expect(ended.value.ended).toBe(false);
          outcomes.refused += 1;
        }
        const task = await h.planning.tasks.get(id);
        expect([task?.status, task?.claim]).toEqual(['ready', undefined]);
        expect(task?.endedClaims?.map((e) => e.claimId)).toEqual([claimId]);
        // And it stays so: the same start again is refused.
        expect((await failure(start(id, claimId))).details.reason).toBe('stale-claim');
      }
    } finally {
      store.withTransaction = original;
    }
    expect(outcomes.startedThenEnded).toBeGreaterThan(0);
    expect(outcomes.refused).toBeGreaterThan(0);
    expect(attempts).toBeGreaterThan(transactions);
  });

  it('claim support: a status post is a comment by the holder and renews the mirror, in one change; refused once the claim is gone', async () => {
    const id = await newTask();
    await start(id);
    const res = await call('postClaimStatus', { issueId: id, claimId: 'clm_a', message: 'Halfway there', expiresAt: iso(90_000), actor, renewal: 1 });
    expect(res.comment).toMatchObject({ issueId: id, body: 'Halfway there', authorId: actor.id, authorType: 'api-key' });
    expect((await h.planning.tasks.get(id))?.claim?.expiresAt).toBe(iso(90_000));
    const [event] = await h.events('comment.added');
    expect(event?.data).toEqual({ subject: { type: 'comment', id: res.comment?.id }, issueId: id, statusPost: true });
    await call('endClaimedWork', { issueId: id, claimId: 'clm_a', outcome: 'released', actor });
    expect((await failure(call('postClaimStatus', { issueId: id, claimId: 'clm_a', message: 'late', expiresAt: iso(90_000), actor, renewal: 2 }))).details.reason).toBe('stale-claim');
    expect((await h.records.listComments({ issueId: id }, owner)).comments).toHaveLength(1);
    expect((await failure(call('postClaimStatus', { issueId: id, claimId: 'clm_a', message: '', expiresAt: iso(1), actor }))).details.field).toBe('message');
  });

  it('claim support: expired mirrors go back to ready in one sweep, each once, and renewed ones stay', async () => {
    const ids = [await newTask(), await newTask(), await newTask()];
    await start(ids[0]!, 'clm_0', 'agent-a', 1_000);
    await start(ids[1]!, 'clm_1', 'agent-b', 1_000);
    await start(ids[2]!, 'clm_2', 'agent-a', 60_000);
    await call('renewClaimedWork', { issueId: ids[1]!, claimId: 'clm_1', expiresAt: iso(60_000), renewal: 1 });
    h.now = new Date(h.now.getTime() + 2_000);
    const [a, b] = await Promise.all([call('releaseExpiredClaims', { limit: 10 }), call('releaseExpiredClaims', { limit: 10 })]);
    const released = [...a.released, ...b.released];
    expect(released.map((r) => r.claimId)).toEqual(['clm_0']);
    expect((await h.planning.tasks.get(ids[0]!))?.status).toBe('ready');
    expect((await h.planning.tasks.get(ids[1]!))?.status).toBe('in-progress');
    const events = (await h.events('task.status-changed')).filter((e) => e.data.claimEnd);
    expect(events.map((e) => [e.data.claimId, e.data.claimEnd])).toEqual([['clm_0', 'expired']]);
    expect((await h.planning.tasks.listActivity(ids[0]!, { limit: 10 })).map((x) => x.kind)).toContain('claim-expired');
  });

  it('claim support: claimed tasks are listed by claim id, in pages', async () => {
    for (const n of [1, 2, 3]) await start(await newTask(), `clm_${n}`, `agent-${n === 2 ? 'b' : 'a'}-${n}`);
    const first = await call('listClaimedTasks', { limit: 2 });
    expect(first.tasks.map((t) => t.claim?.claimId)).toEqual(['clm_1', 'clm_2']);
    const second = await call('listClaimedTasks', { limit: 2, after: first.nextAfter });
    expect(second.tasks.map((t) => t.claim?.claimId)).toEqual(['clm_3']);
    expect(second.nextAfter).toBeUndefined();
  });
});

describe('claim support: status moves and ends of the claim on the task', () => {
  it('claim support: a member moving a claimed task on ends the claim in the same write and notes how', async () => {
    const id = await newTask();
    await start(id);
    const moved = await h.tasks.updateTask({ id, patch: { status: 'ready' } }, owner);
    expect(moved.task?.task?.status).toBe('ready');
    expect((await h.events('task.status-changed')).at(-1)?.data).toMatchObject({ claimId: 'clm_a', claimEnd: 'released' });
    const target = (await call('getClaimTarget', { issueId: id })).target;
    expect(target?.claim).toBeUndefined();
    expect(target?.lastClaimEnd).toEqual({ claimId: 'clm_a', end: 'released', $typeName: 'planning.issues.v1.ClaimEndNote' });
  });

  it('claim support: moving a claimed task to blocked releases the claim; to in-review completes it', async () => {
    const blocked = await newTask();
    await start(blocked);
    await h.tasks.updateTask({ id: blocked, patch: { status: 'blocked' } }, owner);
    expect((await h.events('task.status-changed')).at(-1)?.data).toMatchObject({ to: 'blocked', claimEnd: 'released' });
    const reviewed = await newTask();
    await start(reviewed, 'clm_b', 'agent-b');
    await h.tasks.updateTask({ id: reviewed, patch: { status: 'in-review' } }, owner);
    expect((await call('getClaimTarget', { issueId: reviewed })).target?.lastClaimEnd?.end).toBe('completed');
  });

  it('claim support: an expiry end only applies once the mirror expired; a completed task is left alone and says so', async () => {
    const id = await newTask();
    await start(id, 'clm_a', 'agent-a', 60_000);
    const early = await call('endClaimedWork', { issueId: id, claimId: 'clm_a', outcome: 'expired', actor, onlyIfExpired: true });
    expect(early.ended).toBe(false);
    expect(early.target?.claim?.claimId).toBe('clm_a');
    await h.tasks.updateTask({ id, patch: { status: 'in-review' } }, owner);
    h.now = new Date(h.now.getTime() + 61_000);
    const late = await call('endClaimedWork', { issueId: id, claimId: 'clm_a', outcome: 'expired', actor, onlyIfExpired: true });
    expect([late.ended, late.target?.status, late.target?.lastClaimEnd?.end]).toEqual([false, 'in-review', 'completed']);
    const other = await newTask();
    await start(other, 'clm_c', 'agent-a', 1_000);
    h.now = new Date(h.now.getTime() + 2_000);
    const expired = await call('endClaimedWork', { issueId: other, claimId: 'clm_c', outcome: 'expired', actor, onlyIfExpired: true });
    expect([expired.ended, expired.target?.status, expired.target?.lastClaimEnd?.end]).toEqual([true, 'ready', 'expired']);
  });
});

describe('claim support: the ready queue', () => {
  const token = (agentId: string, scopes = SCOPES): Principal => ({ type: 'api-key', id: `key_${agentId}`, keyId: `key_${agentId}`, workspaceId: ws, agentId, isAdmin: false, scopes });

  it('claim support: ready tasks for the agent or nobody, ranked by priority, due date, age; counts and pages; the held task apart', async () => {
    const low = await newTask({ priority: 'low' });
    const urgentLate = await newTask({ priority: 'urgent', dueDate: '2025-07-01' });
    const urgentSoon = await newTask({ priority: 'urgent', dueDate: '2025-06-05' });
    const mine = await newTask({ priority: 'high', assignedAgentId: 'agent-a' });
    await newTask({ priority: 'urgent', assignedAgentId: 'agent-b' });
    await newTask({ priority: 'urgent', status: 'backlog' });
    const blocked = await newTask({ priority: 'medium', dependencies: [low] });
    h.now = new Date(h.now.getTime() + 1_000);
    const older = await newTask({ priority: 'medium' });
    const held = await newTask({ priority: 'urgent' });
    await start(held);
    const page1 = await call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a', limit: 3 }, token('agent-a'));
    expect(page1.tasks.map((t) => [t.task?.id, t.rank])).toEqual([[urgentSoon, 1], [urgentLate, 2], [mine, 3]]);
    expect([page1.total, page1.blocked, page1.starting]).toEqual([6, 1, 0]);
    // Tasks under a starting claim count only if they are in this agent's queue and not blocked.
    const others = await newTask({ priority: 'low', assignedAgentId: 'agent-b' });
    const counted = await call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a', limit: 3, startingIssueIds: [low, blocked, others, held] }, token('agent-a'));
    expect(counted.starting).toBe(1);
    expect((await failure(call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a', startingIssueIds: ['bad id'] }, token('agent-a')))).details.field).toBe('startingIssueIds');
    expect(page1.held?.id).toBe(held);
    expect(page1.heldClaim?.claimId).toBe('clm_a');
    const page2 = await call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a', limit: 3, cursor: page1.nextCursor }, token('agent-a'));
    expect(page2.tasks.map((t) => [t.task?.id, t.rank])).toEqual([[blocked, 4], [older, 5], [low, 6]]);
    expect(page2.nextCursor).toBeUndefined();
  });

  it('claim support: tasks stored before the queue key or the queue agent existed get them when the service opens, once per store', async () => {
    const id = await newTask({ priority: 'urgent' });
    const mine = await newTask({ priority: 'low', assignedAgentId: 'agent-a' });
    const key = (await h.planning.tasks.get(id))?.queueKey;
    await h.store.collection('tasks').updateOne({ _id: id }, { $unset: { queueKey: '', queueAgent: '' } });
    await h.store.collection('tasks').updateOne({ _id: mine }, { $unset: { queueAgent: '' } });
    expect((await h.planning.tasks.get(id))?.queueKey).toBeUndefined();
    expect((await call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a' }, token('agent-a'))).total).toBe(0);
    // This store's first open recorded the backfill as done: a later open skips it (it reads every task)...
    impl = await claimSupportOf(h);
    expect((await h.planning.tasks.get(id))?.queueKey).toBeUndefined();
    // ...and a store from before has no such record: its tasks get their keys.
    await h.store.collection('issues_migrations').deleteOne({ _id: 'queue-keys' });
    impl = await claimSupportOf(h);
    expect(await h.store.collection('issues_migrations').findOne({ _id: 'queue-keys' })).toMatchObject({ _id: 'queue-keys' });
    expect((await h.planning.tasks.get(id))?.queueKey).toBe(key);
    expect([(await h.planning.tasks.get(id))?.queueAgent, (await h.planning.tasks.get(mine))?.queueAgent]).toEqual(['', 'agent-a']);
    const page = await call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a' }, token('agent-a'));
    expect([page.tasks.map((t) => t.task?.id), page.total]).toEqual([[id, mine], 2]);
  });

  it('claim support: an assignment moves the task between queues, in its pages and its counts', async () => {
    const shared = await newTask({ priority: 'high' });
    const blocker = await newTask({ priority: 'low', assignedAgentId: 'agent-b' });
    const task = await newTask({ priority: 'urgent', dependencies: [blocker] });
    const queue = async (agentId: string) => {
      const ids: string[] = [];
      let cursor: string | undefined;
      let counts: number[];
      do {
        const page = await call('listReadyTasks', { workspaceId: ws, agentId, limit: 1, ...(cursor ? { cursor } : {}) }, token(agentId));
        ids.push(...page.tasks.map((t) => t.task?.id ?? ''));
        counts = [page.total, page.blocked];
        cursor = page.nextCursor;
      } while (cursor);
      return { ids, counts };
    };
    expect(await queue('agent-a')).toEqual({ ids: [task, shared], counts: [2, 1] });
    expect(await queue('agent-b')).toEqual({ ids: [task, shared, blocker], counts: [3, 1] });
    await h.tasks.updateTask({ id: task, patch: { assignedAgentId: 'agent-b' } }, owner);
    expect(await queue('agent-a')).toEqual({ ids: [shared], counts: [1, 0] });
    expect(await queue('agent-b')).toEqual({ ids: [task, shared, blocker], counts: [3, 1] });
    await h.tasks.updateTask({ id: task, patch: { clearFields: ['agent.assignedAgentId'] } }, owner);
    await h.tasks.updateTask({ id: blocker, patch: { assignedAgentId: 'agent-a' } }, owner);
    expect(await queue('agent-a')).toEqual({ ids: [task, shared, blocker], counts: [3, 1] });
    expect(await queue('agent-b')).toEqual({ ids: [task, shared], counts: [2, 1] });
  });

  it('claim support: the queue is the token agent’s own: another agent id, a missing scope or another workspace is refused', async () => {
    expect((await failure(call('listReadyTasks', { workspaceId: ws, agentId: 'agent-b' }, token('agent-a')))).code).toBe('forbidden');
    expect((await failure(call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a' }, token('agent-a', ['issues:read'])))).details.reason).toBe('missing-scope');
    const other = await h.workspace({ ownerId: 'usr_other' });
    expect((await failure(call('listReadyTasks', { workspaceId: other, agentId: 'agent-a' }, token('agent-a')))).code).toBe('not-found');
    expect((await failure(call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a', cursor: 'bogus' }, token('agent-a')))).details.field).toBe('cursor');
    expect((await failure(call('listReadyTasks', { workspaceId: ws, agentId: 'agent-a', limit: 0 }, token('agent-a')))).details.field).toBe('limit');
  });
});
