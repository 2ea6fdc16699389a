import { ServiceError } from '@planning/errors';
import { validateIdempotencyKey } from '@planning/idempotency';
import type { Principal } from '@planning/rpc';
import { describe, expect, it } from 'vitest';
import {
  claimRefusal,
  endOfMovedTask,
  publicState,
  queueView,
  requestHash,
  requireAgent,
  storedFilterOf,
  validateFencingToken,
  validateLeaseSeconds,
  validateStatusMessage,
  type QueueFacts,
} from './claims.js';

const token = (scopes: string[], extra: Partial<Principal> = {}): Principal => ({
  type: 'api-key',
  id: 'key_1',
  keyId: 'key_1',
  workspaceId: 'ws_1',
  agentId: 'agent-a',
  isAdmin: false,
  scopes,
  ...extra,
});

function thrown(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    return err as ServiceError;
  }
  throw new Error('expected a ServiceError');
}

describe('claims domain: callers', () => {
  it('claims domain: an agent token with the scopes is the caller; others get 401 or 403 with a reason', () => {
    expect(requireAgent(token(['issues:write', 'agents:execute']), ['issues:write', 'agents:execute'])).toMatchObject({ workspaceId: 'ws_1', agentId: 'agent-a', keyId: 'key_1' });
    expect(thrown(() => requireAgent({ type: 'anonymous', id: 'anonymous', isAdmin: false, scopes: [] }, [])).code).toBe('unauthorized');
    const user = thrown(() => requireAgent({ type: 'user', id: 'usr_1', userId: 'usr_1', isAdmin: true, scopes: [] }, []));
    expect([user.code, user.details.reason]).toEqual(['forbidden', 'token-required']);
    const missing = thrown(() => requireAgent(token(['issues:write']), ['issues:write', 'agents:execute']));
    expect([missing.code, missing.details.reason]).toEqual(['forbidden', 'missing-scope']);
    expect(missing.message).toContain("'agents:execute'");
  });
});

describe('claims domain: input', () => {
  it('claims domain: idempotency keys are 1-255 printable characters without spaces', () => {
    expect(validateIdempotencyKey('retry-1:abc')).toBe('retry-1:abc');
    for (const bad of ['', 'has space', 'x'.repeat(256), 'tab\there', 'é']) {
      expect(thrown(() => validateIdempotencyKey(bad)).details.field).toBe('idempotency-key');
    }
  });

  it('claims domain: fencing tokens, leases and status messages are checked', () => {
    expect(validateFencingToken(undefined)).toBeUndefined();
    expect(validateFencingToken(4)).toBe(4);
    expect(thrown(() => validateFencingToken(0)).details.field).toBe('fencingToken');
    expect(validateLeaseSeconds(1)).toBe(1);
    expect(thrown(() => validateLeaseSeconds(86_401)).details.field).toBe('leaseSeconds');
    expect(thrown(() => validateLeaseSeconds(1.5)).details.field).toBe('leaseSeconds');
    expect(validateStatusMessage('Tests green')).toBe('Tests green');
    expect(thrown(() => validateStatusMessage('   ')).details.field).toBe('message');
    expect(thrown(() => validateStatusMessage('bell\u0007')).details.field).toBe('message');
  });

  it('claims domain: a request fingerprint ignores key order and sees every value', () => {
    expect(requestHash({ a: 1, issueId: 'x' })).toBe(requestHash({ issueId: 'x', a: 1 }));
    expect(requestHash({ issueId: 'x' })).not.toBe(requestHash({ issueId: 'y' }));
  });
});

describe('claims domain: states and refusals', () => {
  it('claims domain: an active claim not yet started shows as starting; past its expiry, as expired, swept or not', () => {
    const now = new Date('2025-06-02T10:00:00Z');
    const later = new Date('2025-06-02T10:00:01Z');
    expect(publicState({ state: 'active', started: false, expiresAt: later }, now)).toBe('starting');
    expect(publicState({ state: 'active', started: true, expiresAt: later }, now)).toBe('active');
    expect(publicState({ state: 'active', started: true, expiresAt: now }, now)).toBe('expired');
    expect(publicState({ state: 'released', started: true, expiresAt: later }, now)).toBe('released');
    expect(storedFilterOf(['starting', 'expired'], now)).toEqual([
      { state: 'active', started: false, expiresAt: { $gt: now } },
      { state: 'expired' },
      { state: 'active', expiresAt: { $lte: now } },
    ]);
  });

  it('claims domain: claim refusals follow DECISIONS §7 order', () => {
    const now = new Date('2025-06-02T10:00:00Z');
    const ready = { status: 'ready', openDependencyCount: 0 };
    expect(claimRefusal(ready, 'agent-a', now)).toBeUndefined();
    const assigned = claimRefusal({ status: 'done', openDependencyCount: 3, assignedAgentId: 'agent-b' }, 'agent-a', now);
    expect([assigned?.code, assigned?.details.reason]).toEqual(['forbidden', 'assigned-to-another-agent']);
    expect(claimRefusal({ status: 'backlog', openDependencyCount: 3 }, 'agent-a', now)?.details.reason).toBe('not-ready');
    expect(claimRefusal({ ...ready, openDependencyCount: 2 }, 'agent-a', now)?.details.reason).toBe('dependencies-open');
    // A task in progress under another agent's (or this agent's) claim is not ready: not-ready, saying whose claim it is.
    const held = { status: 'in-progress', openDependencyCount: 0, claim: { agentId: 'agent-b', expiresAt: '2025-06-02T10:00:01Z' } };
    expect(claimRefusal(held, 'agent-a', now)?.details.reason).toBe('not-ready');
    expect(claimRefusal(held, 'agent-a', now)?.message).toMatch(/another agent holds its claim/);
    expect(claimRefusal(held, 'agent-b', now)?.message).toMatch(/this agent already holds its claim/);
    expect(claimRefusal({ ...held, openDependencyCount: 2 }, 'agent-a', now)?.details.reason).toBe('not-ready');
    expect(claimRefusal({ ...held, claim: { agentId: 'agent-b', expiresAt: '2025-06-02T10:00:00Z' } }, 'agent-a', now)?.details.reason).toBe('not-ready');
    // Dependencies come before a claim; a ready task still carrying an unexpired claim answers active-claim.
    expect(claimRefusal({ ...held, status: 'ready', openDependencyCount: 1 }, 'agent-a', now)?.details.reason).toBe('dependencies-open');
    expect(claimRefusal({ ...held, status: 'ready' }, 'agent-a', now)?.details.reason).toBe('active-claim');
  });

  it('claims domain: a claim whose task moved on ends as the task says', () => {
    expect(endOfMovedTask('done')).toEqual({ state: 'completed', reason: 'moved-to-done' });
    expect(endOfMovedTask('in-review').state).toBe('completed');
    expect(endOfMovedTask('ready')).toEqual({ state: 'released', reason: 'moved-to-ready' });
    expect(endOfMovedTask(undefined)).toEqual({ state: 'released', reason: 'task-deleted' });
  });
});

describe('claims domain: the ready queue', () => {
  const base: QueueFacts = {
    openDependencyCount: 0,
    claimedByOther: false,
    heldByYou: false,
    quotaState: 'within-run-budget',
    resetsAt: '2025-07-01T00:00:00.000Z',
    needsBrief: false,
  };

  it('claims domain: claimable, blocked and claimed with the reason a claim would fail', () => {
    expect(queueView(base)).toMatchObject({ state: 'claimable', nextAction: expect.stringContaining('POST /api/agents/claim') });
    expect(queueView(base).whyNotClaimable).toBeUndefined();
    expect(queueView({ ...base, openDependencyCount: 2 })).toMatchObject({ state: 'blocked', whyNotClaimable: { reason: 'dependencies-open' } });
    expect(queueView({ ...base, claimedByOther: true })).toMatchObject({ state: 'claimed', whyNotClaimable: { reason: 'active-claim' } });
    // The first refusal a claim would meet: open dependencies before a claim being taken (DECISIONS §7).
    expect(queueView({ ...base, claimedByOther: true, openDependencyCount: 1 })).toMatchObject({ state: 'blocked', whyNotClaimable: { reason: 'dependencies-open' } });
    expect(queueView({ ...base, heldByYou: true, heldExpiresAt: 'T' })).toMatchObject({ state: 'claimed', whyNotClaimable: { reason: 'held-by-you' } });
    expect(queueView({ ...base, busyWith: 'iss_1' })).toMatchObject({ state: 'claimable', whyNotClaimable: { reason: 'agent-busy' } });
    const exhausted = queueView({ ...base, quotaState: 'run-budget-exhausted' });
    expect(exhausted).toMatchObject({ state: 'claimable', whyNotClaimable: { reason: 'run-budget-exhausted' } });
    expect(exhausted.nextAction).toContain(base.resetsAt);
    expect(queueView({ ...base, needsBrief: true }).nextAction).toContain('task contract');
  });
});
