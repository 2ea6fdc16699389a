/**
 * The fence of writes under claims, end to end in process: the agents-claims core decides (the one
 * rule), the issues service applies it inside each write's transaction, every call through the
 * protobuf codec. Covers every kind of agent write after expiry (swept or not), after a takeover
 * and with a stale token; 500 randomized expiry/takeover sequences with concurrent stale writes;
 * and the holder's completion racing its lease's expiry.
 */
import { ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ClaimRecord } from './store/claims.js';
import { createClaimsHarness, type ClaimsHarness } from './testing/claims-harness.js';
import { seededRandom as random } from '@planning/store/testing';

let h: ClaimsHarness;
let ws: string;
let projectId: string;
const owner: Principal = { type: 'user', id: 'usr_owner', userId: 'usr_owner', isAdmin: false, scopes: [] };
const LEASE_MS = 600_000;

const KINDS = ['field', 'status', 'bulk', 'contract', 'comment', 'time', 'evidence', 'approval'] as const;
type Kind = (typeof KINDS)[number];

let n = 0;
/** One write of each kind, as an agent's REST route or MCP tool makes it. */
function write(kind: Kind, issueId: string, who: Principal, fencingToken?: number): Promise<unknown> {
  const t = fencingToken !== undefined ? { fencingToken } : {};
  const tag = `w${++n}`;
  const { tasks, records } = h.planning;
  switch (kind) {
    case 'field':
      return tasks.updateTask({ id: issueId, patch: { title: `Title ${tag}` }, ...t }, who);
    case 'status':
      return tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, ...t }, who);
    case 'bulk':
      return tasks.bulkUpdateTasks({ issueIds: [issueId], mode: 'apply', patch: { addLabels: [tag] }, ...t }, who);
    case 'contract':
      return tasks.updateTaskContract({ issueId, instructions: { objective: `Goal ${tag}` }, ...t }, who);
    case 'comment':
      return records.addComment({ issueId, body: `Comment ${tag}`, ...t }, who);
    case 'time':
      return records.logTime({ issueId, minutes: 5, note: tag, ...t }, who);
    case 'evidence':
      return records.addEvidence({ issueId, kind: 'note', title: `Evidence ${tag}`, body: 'b', ...t }, who);
    case 'approval':
      return records.requestApproval({ issueId, reason: `Approval ${tag}`, ...t }, who);
  }
}

async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    return `${err.code}/${err.details.reason ?? ''}`;
  }
}

/** Everything a write could leave on a task: its version and its records and activity, by count. */
async function footprint(issueId: string) {
  const task = await h.taskRecord(issueId);
  const { store } = h.planning;
  const count = (c: string) => store.collection(c).countDocuments({ issueId });
  return {
    version: task?.version,
    status: task?.status,
    comments: await count('comments'),
    time: await count('time_entries'),
    evidence: await count('evidence'),
    approvals: await count('approvals'),
    activity: await count('activity'),
  };
}

const agent = (id: string) => h.agent(ws, id);
const claim = async (issueId: string, who: Principal) => (await h.rpc.claimWork({ issueId }, { principal: who })).claim!;
const advance = (ms: number) => {
  h.planning.now = new Date(h.planning.now.getTime() + ms);
};
const sweep = () => h.core.sweep({ reconcile: false });
const claimOf = async (id: string) => h.store.collection<ClaimRecord>('claims').findOne({ _id: id });

beforeEach(async () => {
  h = await createClaimsHarness({ leaseSeconds: LEASE_MS / 1000, startTimeoutMs: 5_000 });
  ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'enterprise' });
  await h.planning.addMember(ws, 'usr_member', 'member');
  projectId = await h.project(ws);
});

afterEach(async () => {
  await h.close();
});

describe('write fence: every kind of agent write', () => {
  it('write fence: the holder writes every kind, with or without its token; another agent gets 409 active-claim for every kind', async () => {
    const a = agent('agent-a');
    const b = agent('agent-b');
    for (const kind of KINDS) {
      const issueId = await h.task(projectId);
      const held = await claim(issueId, a);
      const before = await footprint(issueId);
      expect(await outcome(write(kind, issueId, b)), `${kind} by another agent`).toBe('work-already-claimed/active-claim');
      expect(await outcome(write(kind, issueId, b, held.fencingToken)), `${kind} by another agent with the holder's token`).toBe('work-already-claimed/active-claim');
      expect(await footprint(issueId)).toEqual(before);
      if (kind !== 'status') expect(await outcome(write(kind, issueId, a)), `${kind} by the holder`).toBe('ok');
      expect(await outcome(write(kind, issueId, a, held.fencingToken)), `${kind} by the holder with its token`).toBe('ok');
      // The status write completed the claim; any other leaves it to release.
      if (kind !== 'status') await h.rpc.releaseClaim({ issueId }, { principal: a });
    }
  });

  it('write fence: after expiry and sweep the former holder is refused every work write (409 stale-claim, nothing stored); comments stay open', async () => {
    const a = agent('agent-a');
    for (const kind of KINDS) {
      const issueId = await h.task(projectId);
      const held = await claim(issueId, a);
      advance(LEASE_MS);
      expect((await sweep()).expired).toBe(1);
      expect((await h.taskRecord(issueId))?.status).toBe('ready');
      const before = await footprint(issueId);
      expect(await outcome(write(kind, issueId, a, held.fencingToken)), `${kind} with the expired token`).toBe('work-already-claimed/stale-claim');
      expect(await footprint(issueId)).toEqual(before);
      if (kind === 'comment') {
        expect(await outcome(write(kind, issueId, a))).toBe('ok');
        continue;
      }
      expect(await outcome(write(kind, issueId, a)), `${kind} without a token`).toBe('work-already-claimed/stale-claim');
      expect(await footprint(issueId)).toEqual(before);
      // A new claim of the task lets it work again.
      const again = await claim(issueId, a);
      expect(await outcome(write(kind, issueId, a, again.fencingToken))).toBe('ok');
      await h.rpc.releaseClaim({ issueId }, { principal: a });
    }
  });

  it('write fence: past its lease but before any sweep the holder is refused the same way', async () => {
    const a = agent('agent-a');
    for (const kind of KINDS) {
      const issueId = await h.task(projectId);
      const held = await claim(issueId, a);
      advance(LEASE_MS);
      const before = await footprint(issueId);
      expect(await outcome(write(kind, issueId, a, held.fencingToken))).toBe('work-already-claimed/stale-claim');
      expect(await outcome(write(kind, issueId, a))).toBe(kind === 'comment' ? 'ok' : 'work-already-claimed/stale-claim');
      const after = await footprint(issueId);
      expect({ ...after, comments: before.comments, activity: before.activity }).toEqual(before);
      expect((await h.taskRecord(issueId))?.status).toBe('in-progress');
      await sweep();
    }
  });

  it('write fence: after another agent\'s takeover the former holder gets 409 for every kind, and after the takeover ended still 409 for work writes', async () => {
    const a = agent('agent-a');
    const b = agent('agent-b');
    for (const kind of KINDS) {
      const issueId = await h.task(projectId);
      const first = await claim(issueId, a);
      advance(LEASE_MS);
      const second = await claim(issueId, b);
      expect(second.fencingToken).toBe(first.fencingToken + 1);
      let before = await footprint(issueId);
      expect(await outcome(write(kind, issueId, a))).toBe('work-already-claimed/active-claim');
      expect(await outcome(write(kind, issueId, a, first.fencingToken))).toBe('work-already-claimed/stale-claim');
      expect(await outcome(write(kind, issueId, a, second.fencingToken))).toBe('work-already-claimed/active-claim');
      expect(await footprint(issueId)).toEqual(before);
      // B finishes; A still may not do B's task's work.
      await h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: second.fencingToken }, b);
      await h.deliverStatusEvents();
      before = await footprint(issueId);
      expect(await outcome(write(kind, issueId, a, second.fencingToken))).toBe('work-already-claimed/stale-claim');
      expect(await outcome(write(kind, issueId, a))).toBe(kind === 'comment' ? 'ok' : 'work-already-claimed/stale-claim');
      if (kind !== 'comment') expect(await footprint(issueId)).toEqual(before);
    }
  });

  it('write fence: a member releasing the claim and another agent claiming is a takeover too; a released holder with no takeover may write', async () => {
    const a = agent('agent-a');
    const b = agent('agent-b');
    const member: Principal = { type: 'user', id: 'usr_member', userId: 'usr_member', isAdmin: false, scopes: [] };
    const issueId = await h.task(projectId);
    const first = await claim(issueId, a);
    await h.rpc.releaseClaim({ issueId }, { principal: member });
    expect(await outcome(write('time', issueId, a, first.fencingToken))).toBe('work-already-claimed/stale-claim');
    expect(await outcome(write('time', issueId, a))).toBe('ok');
    const second = await claim(issueId, b);
    await h.rpc.releaseClaim({ issueId }, { principal: b });
    expect(second.fencingToken).toBe(2);
    expect(await outcome(write('evidence', issueId, a))).toBe('work-already-claimed/stale-claim');
    expect(await outcome(write('comment', issueId, a))).toBe('ok');
    expect(await outcome(write('evidence', issueId, b))).toBe('ok');
  });

  it('write fence: right after its completion, before agents-claims hears of it, the holder writes as it will after (without a token); its spent token is stale; another agent is not let in', async () => {
    const a = agent('agent-a');
    const b = agent('agent-b');
    for (const kind of KINDS) {
      const issueId = await h.task(projectId);
      const held = await claim(issueId, a);
      await h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: held.fencingToken }, a);
      // The status event has not reached agents-claims: there the claim is still active.
      expect(await claimOf(held.id)).toMatchObject({ state: 'active' });
      const before = await footprint(issueId);
      expect(await outcome(write(kind, issueId, a, held.fencingToken)), `${kind} with the spent token`).toBe('work-already-claimed/stale-claim');
      expect(await outcome(write(kind, issueId, b)), `${kind} by another agent`).toBe('work-already-claimed/active-claim');
      expect(await footprint(issueId)).toEqual(before);
      // The status write moves the task on (in-review → in-progress is a person's move back, or the agent's own).
      const own = await outcome(write(kind === 'status' ? 'field' : kind, issueId, a));
      expect(own, `${kind} by the former holder, no token`).toBe('ok');
      await h.deliverStatusEvents();
      expect(await claimOf(held.id)).toMatchObject({ state: 'completed' });
      expect(await outcome(write(kind === 'status' ? 'field' : kind, issueId, a)), `${kind} once agents-claims knows`).toBe('ok');
    }
  });

  it('write fence: members are not fenced unless they present a token, which must be the current claim\'s', async () => {
    const a = agent('agent-a');
    const issueId = await h.task(projectId);
    const held = await claim(issueId, a);
    expect(await outcome(write('field', issueId, owner))).toBe('ok');
    expect(await outcome(write('time', issueId, owner, held.fencingToken + 1))).toBe('work-already-claimed/stale-claim');
    expect(await outcome(write('time', issueId, owner, held.fencingToken))).toBe('ok');
    advance(LEASE_MS);
    expect(await outcome(write('time', issueId, owner, held.fencingToken))).toBe('work-already-claimed/stale-claim');
  });

  it('write fence: a fencing token that is not a positive integer is 400 naming the field, before anything else', async () => {
    const a = agent('agent-a');
    const issueId = await h.task(projectId);
    await claim(issueId, a);
    for (const kind of KINDS) {
      for (const bad of [0, -3]) {
        const err = await write(kind, issueId, a, bad).catch((e: unknown) => e as ServiceError);
        expect(err, kind).toBeInstanceOf(ServiceError);
        expect([(err as ServiceError).code, (err as ServiceError).details.field]).toEqual(['invalid-input', 'fencingToken']);
      }
    }
  });

  it('write fence: a bulk update names every target a fence refuses and changes none of them', async () => {
    const a = agent('agent-a');
    const b = agent('agent-b');
    const mine = await h.task(projectId);
    const theirs = await h.task(projectId);
    const lost = await h.task(projectId);
    await claim(lost, a);
    advance(LEASE_MS);
    await sweep();
    await claim(theirs, b);
    await claim(mine, a);
    const err = await h.planning.tasks.bulkUpdateTasks({ issueIds: [mine, theirs, lost], mode: 'apply', patch: { priority: 'urgent' } }, a).catch((e: unknown) => e as ServiceError);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).details.failedIds?.sort()).toEqual([theirs, lost].sort());
    for (const id of [mine, theirs, lost]) expect((await h.taskRecord(id))?.priority).toBe('medium');
  });
});

describe('write fence: tasks no claim has started on', () => {
  it('write fence: an agent PATCH to a never-claimed task asks agents-claims nothing; with a token, or once claimed, it asks', async () => {
    const checks = vi.spyOn(h.rpc, 'checkTaskWrites');
    const a = agent('agent-a');
    const issueId = await h.task(projectId);
    expect(await outcome(write('field', issueId, a))).toBe('ok');
    expect(await outcome(h.planning.tasks.updateTask({ id: issueId, patch: { status: 'backlog' } }, a))).toBe('ok');
    expect(checks).not.toHaveBeenCalled();
    // A presented token is always checked (here: stale, the issue was never claimed).
    expect(await outcome(write('field', issueId, a, 1))).toBe('work-already-claimed/stale-claim');
    expect(checks).toHaveBeenCalledTimes(1);
    const other = await h.task(projectId);
    const held = await claim(other, a);
    await h.rpc.releaseClaim({ issueId: other }, { principal: a });
    expect(held.fencingToken).toBe(1);
    // Claimed once: the rule decides (here the released holder may write).
    expect(await outcome(write('field', other, a))).toBe('ok');
    expect(checks).toHaveBeenCalledTimes(2);
  });

  it('write fence: another agent claiming between the read of a never-claimed task and its write: the write is refused (409 active-claim) and leaves nothing', async () => {
    const a = agent('agent-a');
    const b = agent('agent-b');
    const tasks = h.planning.planning.tasks;
    const get = tasks.get.bind(tasks);
    for (const kind of ['field', 'status'] as const) {
      const issueId = await h.task(projectId);
      // The PATCH reads the task as it was; the claim lands before the PATCH writes.
      let claimed: Awaited<ReturnType<typeof footprint>> | undefined;
      vi.spyOn(tasks, 'get').mockImplementationOnce(async (id, session) => {
        const before = await get(id, session);
        await claim(issueId, b);
        claimed = await footprint(issueId);
        return before;
      });
      expect(await outcome(write(kind, issueId, a)), kind).toBe('work-already-claimed/active-claim');
      expect(claimed?.status).toBe('in-progress');
      expect(await footprint(issueId)).toEqual(claimed);
      expect((await h.taskRecord(issueId))?.claim?.agentId).toBe('agent-b');
      vi.restoreAllMocks();
      // The holder itself, in the same race, writes (as the rule answers it).
      const own = await h.task(projectId);
      await h.rpc.releaseClaim({ issueId }, { principal: b });
      vi.spyOn(tasks, 'get').mockImplementationOnce(async (id, session) => {
        const before = await get(id, session);
        await claim(own, a);
        return before;
      });
      expect(await outcome(write('field', own, a)), kind).toBe('ok');
      vi.restoreAllMocks();
      await h.rpc.releaseClaim({ issueId: own }, { principal: a });
    }
  });
});

describe('write fence: randomized expiry and takeover sequences', () => {
  it('write fence: 500 expiry/takeover sequences with concurrent stale writes: 0 accepted', async () => {
    const rnd = random(14);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
    const a = agent('agent-a');
    const agents = ['agent-b', 'agent-c', 'agent-d'].map(agent);
    const workKinds = KINDS.filter((k) => k !== 'comment');
    let stale = 0;
    const accepted: string[] = [];
    const refusals = new Map<string, number>();
    const shapes = new Map<string, number>();
    for (let seq = 0; seq < 500; seq++) {
      const issueId = await h.task(projectId);
      const held = await claim(issueId, a);
      // The holder works (control: these must land).
      expect(await outcome(write(pick(workKinds.filter((k) => k !== 'status')), issueId, a, rnd() < 0.5 ? held.fencingToken : undefined))).toBe('ok');
      advance(LEASE_MS + Math.floor(rnd() * 5_000));
      const before = await footprint(issueId);
      const fields = (t: Awaited<ReturnType<ClaimsHarness['taskRecord']>>) => [t?.title, t?.labels, t?.agent.instructions.objective, t?.timeLoggedMinutes, t?.evidenceCount];
      const fieldsBefore = fields(await h.taskRecord(issueId));
      // What happens to the task now, at the same time as the stale holder's writes.
      const sweepFirst = rnd() < 0.5;
      const takeover = rnd() < 0.6;
      const finish = takeover && rnd() < 0.5;
      const other = pick(agents);
      shapes.set(`${sweepFirst}/${takeover}/${finish}`, (shapes.get(`${sweepFirst}/${takeover}/${finish}`) ?? 0) + 1);
      const staleWrites = () =>
        Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => {
          const withToken = rnd() < 0.5;
          // A comment is stale only with the lost claim's token (without one it is allowed by design).
          const kind = withToken ? pick(KINDS) : pick(workKinds);
          return outcome(write(kind, issueId, a, withToken ? held.fencingToken : undefined)).then((o) => ({ kind, withToken, o }));
        });
      // Stale writes race the sweep and the other agent's claim, then its work and its end.
      const transition = (async () => {
        if (sweepFirst) await sweep();
        return takeover ? claim(issueId, other) : undefined;
      })();
      const [next, first] = await Promise.all([transition, Promise.all(staleWrites())]);
      const ending = (async () => {
        if (!next) return sweep();
        if (finish) await h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: next.fencingToken }, other);
        else await h.planning.records.logTime({ issueId, minutes: 1, fencingToken: next.fencingToken }, other);
        return undefined;
      })();
      const [, second] = await Promise.all([ending, Promise.all(staleWrites())]);
      for (const r of [...first, ...second]) {
        stale += 1;
        if (r.o === 'ok') accepted.push(`sequence ${seq}: ${r.kind}${r.withToken ? ' with token' : ''}`);
        else refusals.set(r.o, (refusals.get(r.o) ?? 0) + 1);
      }
      // Nothing of the stale holder's is stored: only the other agent's claim, time and completion changed the task.
      const after = await footprint(issueId);
      const otherTime = next && !finish ? 1 : 0;
      expect({ comments: after.comments, time: after.time, evidence: after.evidence, approvals: after.approvals }).toEqual({
        comments: before.comments,
        time: before.time + otherTime,
        evidence: before.evidence,
        approvals: before.approvals,
      });
      const task = await h.taskRecord(issueId);
      expect(fields(task)).toEqual([...fieldsBefore.slice(0, 3), (fieldsBefore[3] as number) + otherTime, fieldsBefore[4]]);
      expect(task?.status).toBe(finish ? 'in-review' : next ? 'in-progress' : 'ready');
      // End the other agent's claim so it is free for the next sequence.
      if (next && !finish) await h.rpc.releaseClaim({ issueId }, { principal: other });
      await h.deliverStatusEvents();
      if (!takeover) await sweep();
    }
    expect(accepted).toEqual([]);
    expect(stale).toBeGreaterThan(1_500);
    // Both refusals occur (a takeover's active claim, and staleness), and every shape of sequence ran.
    expect([...refusals.keys()].sort()).toEqual(['work-already-claimed/active-claim', 'work-already-claimed/stale-claim']);
    expect(shapes.size).toBe(6);
  }, 240_000);
});

describe('write fence: the holder\'s completion against its lease\'s expiry', () => {
  it('write fence: completion racing expiry and sweeps: exactly one wins every time, and the loser leaves nothing', async () => {
    const rnd = random(7);
    const a = agent('agent-a');
    const wins = { completion: 0, expiry: 0 };
    const second = await h.replica();
    for (let i = 0; i < 200; i++) {
      const issueId = await h.task(projectId);
      const held = await claim(issueId, a);
      // Just before the expiry; the clock passes it after a random number of steps of the racing
      // calls (microtasks: the embedded store and the in-process codec hop on them).
      h.planning.now = new Date(Date.parse(held.expiresAt) - 1);
      const before = await footprint(issueId);
      const runsBefore = await h.meter.used(ws, 'agent-runs', h.planning.now);
      const ticks = (async () => {
        const steps = Math.floor(rnd() * 40);
        for (let t = 0; t < steps; t++) await Promise.resolve();
        h.planning.now = new Date(held.expiresAt);
      })();
      // Two replicas sweep over and over until the race is decided.
      let racing = true;
      const sweeper = async (core: typeof h.core) => {
        while (racing) await core.sweep({ reconcile: false }).catch(() => undefined);
      };
      const completionRun = outcome(h.planning.tasks.updateTask({ id: issueId, patch: { status: 'in-review' }, fencingToken: held.fencingToken }, a)).finally(() => {
        racing = false;
      });
      const [completion] = await Promise.all([completionRun, sweeper(h.core), sweeper(second.core), ticks]);
      // Whatever is left is finished by later sweeps and the status event.
      advance(10_000);
      await sweep();
      await h.deliverStatusEvents();
      const task = await h.taskRecord(issueId);
      const stored = await claimOf(held.id);
      const kinds = (await h.planning.planning.tasks.listActivity(issueId, { limit: 20 })).map((x) => x.kind);
      const expiredEvents = (await h.claimEvents('claim.expired')).filter((e) => e.data.subject && (e.data.subject as { id: string }).id === held.id);
      // Metering: the run was counted by the claim; neither ending gives it back or counts another.
      expect(await h.meter.used(ws, 'agent-runs', h.planning.now)).toBe(runsBefore);
      expect(await h.claims.latestAnswered(issueId)).toMatchObject({ _id: held.id });
      if (completion === 'ok') {
        wins.completion += 1;
        expect(task?.status).toBe('in-review');
        expect(stored).toMatchObject({ state: 'completed' });
        expect(kinds).not.toContain('claim-expired');
        expect(expiredEvents).toEqual([]);
      } else {
        wins.expiry += 1;
        expect(completion).toBe('work-already-claimed/stale-claim');
        expect(task?.status).toBe('ready');
        expect(stored).toMatchObject({ state: 'expired', endReason: 'lease-expired' });
        expect(kinds.filter((k) => k === 'claim-expired')).toHaveLength(1);
        expect(kinds).not.toContain('updated');
        expect(expiredEvents).toHaveLength(1);
        expect(task?.version).toBe((before.version ?? 0) + 1);
      }
    }
    console.log(`completion vs expiry: ${JSON.stringify(wins)}`);
    // Both sides won some races: the test ran the race, not one order.
    expect(wins.completion).toBeGreaterThan(5);
    expect(wins.expiry).toBeGreaterThan(5);
  }, 240_000);
});
