import type { Principal } from '@planning/rpc';
import type * as Telemetry from '@planning/telemetry';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ClaimRecord } from './store/claims.js';
import { createClaimsHarness, type ClaimsHarness } from './testing/claims-harness.js';

// The expired-claims counter, observed: the module's other exports stay real.
const expiredCounts = vi.hoisted(() => [] as number[]);
vi.mock('@planning/telemetry', async (importOriginal) => ({
  ...(await importOriginal<typeof Telemetry>()),
  recordClaimsExpired: (count: number) => expiredCounts.push(count),
}));
const expiredCounted = () => expiredCounts.reduce((a, b) => a + b, 0);

let h: ClaimsHarness;
let projectId: string;
let agent: Principal;

const advance = (ms: number) => {
  h.planning.now = new Date(h.planning.now.getTime() + ms);
};
const onlyClaim = async () => (await h.store.collection<ClaimRecord>('claims').find({}))[0];

beforeEach(async () => {
  expiredCounts.length = 0;
  h = await createClaimsHarness({ leaseSeconds: 60 });
  const ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'pro' });
  projectId = await h.project(ws);
  agent = h.agent(ws, 'agent-a');
});

afterEach(async () => {
  await h.close();
});

describe('claims: every passed lease is counted once, whichever path ends it', () => {
  it('claims: the task’s event ends the claim before the sweep’s own end: the sweep still did the work, and the expiry counts once', async () => {
    const issueId = await h.task(projectId);
    await h.rpc.claimWork({ issueId }, { principal: agent });
    advance(61_000);
    // The issues service ends the task's lease and its status event reaches this service before
    // the sweep writes its end (as over NATS under load).
    h.issuesHooks.around = async (method, call) => {
      const answer = await call();
      if (method === 'endClaimedWork') await h.deliverStatusEvents();
      return answer;
    };
    const swept = await h.core.sweep({ reconcile: false });
    expect(swept.expired).toBe(1);
    expect(await onlyClaim()).toMatchObject({ state: 'expired', endReason: 'lease-expired' });
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
    expect(expiredCounted()).toBe(1);
    // Nothing is left to do, and nothing is counted again.
    expect(await h.core.sweep({ reconcile: true })).toMatchObject({ expired: 0, released: 0 });
    expect(expiredCounted()).toBe(1);
  });

  it('claims: two sweeps, the task’s event and the agent’s own heartbeat racing on one passed lease count it once', async () => {
    const issueId = await h.task(projectId);
    await h.rpc.claimWork({ issueId }, { principal: agent });
    const second = await h.replica();
    advance(61_000);
    const results = await Promise.allSettled([
      h.core.sweep({ reconcile: false }),
      second.core.sweep({ reconcile: true }),
      h.deliverStatusEvents(),
      h.rpc.renewClaim({ issueId }, { principal: agent }),
      h.deliverStatusEvents(),
    ]);
    // The heartbeat comes too late: refused. The sweeps do not fail.
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    await h.deliverStatusEvents();
    expect(await onlyClaim()).toMatchObject({ state: 'expired' });
    expect((await h.taskRecord(issueId))?.status).toBe('ready');
    expect(expiredCounted()).toBe(1);
  });

  it('claims: a lease the agent’s own next call finds passed is counted there, and the sweep does not count it again', async () => {
    const issueId = await h.task(projectId);
    await h.rpc.claimWork({ issueId }, { principal: agent });
    advance(61_000);
    await expect(h.rpc.renewClaim({ issueId }, { principal: agent })).rejects.toThrow();
    expect(await onlyClaim()).toMatchObject({ state: 'expired' });
    expect(expiredCounted()).toBe(1);
    await h.deliverStatusEvents();
    await h.core.sweep({ reconcile: true });
    expect(expiredCounted()).toBe(1);
  });

  it('claims: a claim released in time is not counted as expired', async () => {
    const issueId = await h.task(projectId);
    await h.rpc.claimWork({ issueId }, { principal: agent });
    await h.rpc.releaseClaim({ issueId }, { principal: agent });
    advance(61_000);
    await h.deliverStatusEvents();
    await h.core.sweep({ reconcile: true });
    expect(await onlyClaim()).toMatchObject({ state: 'released' });
    expect(expiredCounted()).toBe(0);
  });
});
