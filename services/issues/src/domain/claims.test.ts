import type { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import { claimEndOf, fenceRefusal, queueKeyOf, startRefusal, type ClaimMirror } from './claims.js';
import { compareQueue } from './ranking.js';
import { PRIORITIES, type Priority } from './tasks.js';

const now = new Date('2025-06-02T10:00:00.000Z');
const claim: ClaimMirror = { claimId: 'clm_1', agentId: 'agent-a', fencingToken: 3, expiresAt: '2025-06-02T10:30:00.000Z' };
const expired: ClaimMirror = { ...claim, expiresAt: '2025-06-02T09:59:59.999Z' };

function reasonOf(err: ServiceError | undefined): string | undefined {
  return err ? `${err.code}/${err.details.reason ?? ''}` : undefined;
}

describe('claims: the write fence, applied where the task is written', () => {
  it('claims: a write fenced to the task\'s claim lands while the mirror is that claim, unexpired', () => {
    expect(fenceRefusal({ claim }, { agentId: 'agent-a', fence: { claimId: 'clm_1' }, now })).toBeUndefined();
    // A member presenting the current token is fenced the same way.
    expect(fenceRefusal({ claim }, { fence: { claimId: 'clm_1' }, now })).toBeUndefined();
  });

  it('claims: a fenced claim that ended, changed or expired in between refuses the write 409 stale-claim', () => {
    expect(reasonOf(fenceRefusal({}, { agentId: 'agent-a', fence: { claimId: 'clm_1' }, now }))).toBe('work-already-claimed/stale-claim');
    expect(reasonOf(fenceRefusal({ claim: { ...claim, claimId: 'clm_2', agentId: 'agent-b' } }, { agentId: 'agent-a', fence: { claimId: 'clm_1' }, now }))).toBe(
      'work-already-claimed/stale-claim',
    );
    expect(reasonOf(fenceRefusal({ claim: expired }, { agentId: 'agent-a', fence: { claimId: 'clm_1' }, now }))).toBe('work-already-claimed/stale-claim');
    // Exactly at expiresAt the claim is over.
    expect(reasonOf(fenceRefusal({ claim }, { agentId: 'agent-a', fence: { claimId: 'clm_1' }, now: new Date(claim.expiresAt) }))).toBe('work-already-claimed/stale-claim');
  });

  it('claims: a claim the task saw complete or be released, not yet known to agents-claims: its holder without a token writes under no claim; with a token, or after an expiry, 409 stale-claim', () => {
    const fence = { claimId: 'clm_1' };
    for (const end of ['completed', 'released'] as const) {
      expect(fenceRefusal({ lastClaimEnd: { claimId: 'clm_1', end } }, { agentId: 'agent-a', fence, now }), end).toBeUndefined();
      expect(reasonOf(fenceRefusal({ lastClaimEnd: { claimId: 'clm_1', end } }, { agentId: 'agent-a', fence: { ...fence, byToken: true }, now }))).toBe('work-already-claimed/stale-claim');
      // Another claim since: the task carries it, and the old fence does not hold.
      expect(reasonOf(fenceRefusal({ claim: { ...claim, claimId: 'clm_2', agentId: 'agent-b' }, lastClaimEnd: { claimId: 'clm_1', end } }, { agentId: 'agent-a', fence, now }))).toBe(
        'work-already-claimed/stale-claim',
      );
    }
    expect(reasonOf(fenceRefusal({ lastClaimEnd: { claimId: 'clm_1', end: 'expired' } }, { agentId: 'agent-a', fence, now }))).toBe('work-already-claimed/stale-claim');
    expect(reasonOf(fenceRefusal({ lastClaimEnd: { claimId: 'clm_0', end: 'completed' } }, { agentId: 'agent-a', fence, now }))).toBe('work-already-claimed/stale-claim');
  });

  it('claims: a write fenced to no claim is refused only under another agent\'s live claim', () => {
    expect(reasonOf(fenceRefusal({ claim }, { agentId: 'agent-b', fence: {}, now }))).toBe('work-already-claimed/active-claim');
    expect(reasonOf(fenceRefusal({ claim }, { fence: {}, now }))).toBe('work-already-claimed/active-claim');
    expect(fenceRefusal({ claim: expired }, { agentId: 'agent-b', fence: {}, now })).toBeUndefined();
    // The writer's own claim was weighed by agents-claims (a comment after its lease is allowed).
    expect(fenceRefusal({ claim: expired }, { agentId: 'agent-a', fence: {}, now })).toBeUndefined();
    expect(fenceRefusal({ claim }, { agentId: 'agent-a', fence: {}, now })).toBeUndefined();
    expect(fenceRefusal({}, { agentId: 'agent-b', fence: {}, now })).toBeUndefined();
  });

  it('claims: writers without a fence (people and services) may change a claimed task', () => {
    expect(fenceRefusal({ claim }, { now })).toBeUndefined();
    expect(fenceRefusal({ claim: expired }, { now })).toBeUndefined();
  });
});

describe('claims: starting work', () => {
  const ready = { status: 'ready' as const, openDependencyCount: 0 };

  it('claims: a ready task without dependencies, unassigned or assigned to the agent, can start', () => {
    expect(startRefusal(ready, 'agent-a', now)).toBeUndefined();
    expect(startRefusal({ ...ready, assignedAgentId: 'agent-a' }, 'agent-a', now)).toBeUndefined();
  });

  it('claims: refusals come in the order of DECISIONS §7', () => {
    // Assigned to another agent beats everything else.
    expect(reasonOf(startRefusal({ status: 'done', openDependencyCount: 2, assignedAgentId: 'agent-b' }, 'agent-a', now))).toBe('forbidden/assigned-to-another-agent');
    expect(reasonOf(startRefusal({ status: 'backlog', openDependencyCount: 2 }, 'agent-a', now))).toBe('work-already-claimed/not-ready');
    expect(reasonOf(startRefusal({ ...ready, openDependencyCount: 1 }, 'agent-a', now))).toBe('work-already-claimed/dependencies-open');
  });

  it('claims: a task in progress under a claim answers not-ready (DECISIONS §7 order), saying whose claim it is; a ready task with an unexpired claim, active-claim', () => {
    const held = { status: 'in-progress' as const, openDependencyCount: 0, claim };
    expect(reasonOf(startRefusal(held, 'agent-b', now))).toBe('work-already-claimed/not-ready');
    expect(startRefusal(held, 'agent-b', now)?.message).toMatch(/another agent holds its claim/);
    expect(reasonOf(startRefusal(held, 'agent-a', now))).toBe('work-already-claimed/not-ready');
    expect(startRefusal(held, 'agent-a', now)?.message).toMatch(/already holds/);
    expect(reasonOf(startRefusal({ ...held, claim: expired }, 'agent-b', now))).toBe('work-already-claimed/not-ready');
    expect(reasonOf(startRefusal({ ...held, status: 'ready', openDependencyCount: 1 }, 'agent-b', now))).toBe('work-already-claimed/dependencies-open');
    expect(reasonOf(startRefusal({ ...held, status: 'ready' }, 'agent-b', now))).toBe('work-already-claimed/active-claim');
  });

  it('claims: a move out of in-progress completes the claim (review, done, cancelled) or releases it', () => {
    expect(claimEndOf('in-review')).toBe('completed');
    expect(claimEndOf('done')).toBe('completed');
    expect(claimEndOf('cancelled')).toBe('completed');
    expect(claimEndOf('ready')).toBe('released');
    expect(claimEndOf('blocked')).toBe('released');
  });
});

describe('claims: queue key', () => {
  it('claims: queue keys sort exactly as the work-queue order (priority, due date, age, id)', () => {
    const dates = [undefined, '2025-06-01', '2025-06-10', '2026-01-01'];
    const created = ['2025-01-01T00:00:00.000Z', '2025-03-01T00:00:00.000Z'];
    const tasks = [];
    let n = 0;
    for (const priority of PRIORITIES) {
      for (const dueDate of dates) {
        for (const createdAt of created) {
          tasks.push({ id: `iss_${String(++n).padStart(3, '0')}`, priority: priority as Priority, createdAt, ...(dueDate ? { dueDate } : {}) });
        }
      }
    }
    const shuffled = [...tasks].sort((a, b) => (a.id.charCodeAt(5) * 7 + a.id.charCodeAt(6)) % 11 - (b.id.charCodeAt(5) * 7 + b.id.charCodeAt(6)) % 11);
    const byKey = [...shuffled].sort((a, b) => (queueKeyOf(a) < queueKeyOf(b) ? -1 : 1)).map((t) => t.id);
    const byRank = [...shuffled].sort(compareQueue).map((t) => t.id);
    expect(byKey).toEqual(byRank);
    expect(byKey[0]).toBe(tasks.find((t) => t.priority === 'urgent' && t.dueDate === '2025-06-01')?.id);
  });
});
