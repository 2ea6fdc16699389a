/**
 * The rules of claims that need no store (DECISIONS §7): who may claim, input checks, lease
 * arithmetic, the public state of a claim, idempotency fingerprints, and what the ready queue
 * tells an agent about each task.
 */
import { createHash } from 'node:crypto';
import { conflict, invalidInput, ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';

/** Stored states. `active` covers a claim still starting (its task not yet in progress). */
export const STORED_STATES = ['active', 'released', 'completed', 'expired', 'aborted'] as const;
export type StoredState = (typeof STORED_STATES)[number];

/**
 * States as the API shows them: `starting` is an active claim whose task is not in progress yet;
 * an active claim past its `expiresAt` is `expired` whether or not a sweep has ended it yet.
 */
export const PUBLIC_STATES = ['starting', 'active', 'released', 'completed', 'expired', 'aborted'] as const;
export type PublicState = (typeof PUBLIC_STATES)[number];

export function publicState(claim: { state: StoredState; started: boolean; expiresAt: Date }, now: Date): PublicState {
  if (claim.state !== 'active') return claim.state;
  if (claim.expiresAt <= now) return 'expired';
  return claim.started ? 'active' : 'starting';
}

/** The stored filters for public states at `now` (for listing): expiry is decided by `expiresAt`. */
export function storedFilterOf(states: readonly PublicState[], now: Date): Record<string, unknown>[] {
  return states.flatMap((s): Record<string, unknown>[] => {
    if (s === 'starting') return [{ state: 'active', started: false, expiresAt: { $gt: now } }];
    if (s === 'active') return [{ state: 'active', started: true, expiresAt: { $gt: now } }];
    if (s === 'expired') return [{ state: 'expired' }, { state: 'active', expiresAt: { $lte: now } }];
    return [{ state: s }];
  });
}

/** The agent a request acts for: an API token naming one, holding every scope in `scopes`. */
export interface AgentCaller {
  workspaceId: string;
  agentId: string;
  keyId: string;
  principal: Principal;
}

/** Refuses anything but an agent's API token with the scopes (401 anonymous, 403 otherwise). */
export function requireAgent(principal: Principal, scopes: readonly string[]): AgentCaller {
  if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
  if (principal.type !== 'api-key') {
    throw new ServiceError('forbidden', 'Claims are made by agents: call with the agent\'s API token', { reason: 'token-required' });
  }
  const missing = scopes.filter((s) => !principal.scopes.includes(s));
  if (missing.length > 0) {
    throw new ServiceError('forbidden', `The token lacks the scope ${missing.map((s) => `'${s}'`).join(', ')}`, { reason: 'missing-scope' });
  }
  if (!principal.workspaceId || !principal.agentId) {
    throw new ServiceError('forbidden', 'The token names no agent', { reason: 'token-required' });
  }
  return { workspaceId: principal.workspaceId, agentId: principal.agentId, keyId: principal.keyId ?? principal.id, principal };
}

/** The actor events and activity name for a principal: the user, the API key, or the service. */
export function actorOf(principal: Principal): { type: string; id: string } {
  if (principal.type === 'api-key') return { type: 'api-key', id: principal.keyId ?? principal.id };
  if (principal.type === 'system') return { type: 'system', id: 'agents-claims' };
  return { type: principal.type, id: principal.userId ?? principal.id };
}

const ID_PATTERN = /^[A-Za-z0-9_:.-]{1,64}$/;
const AGENT_ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function validateId(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) throw invalidInput(field, `'${field}' is required`);
  if (!ID_PATTERN.test(value)) throw invalidInput(field, `'${field}' is not a valid id`);
  return value;
}

export function validateAgentId(value: unknown, field = 'agentId'): string {
  if (typeof value !== 'string' || !AGENT_ID.test(value)) throw invalidInput(field, `'${field}' must match ^[a-z0-9][a-z0-9._-]{0,63}$`);
  return value;
}

export function validateFencingToken(value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 1) throw invalidInput('fencingToken', "'fencingToken' must be a positive integer");
  return value;
}

export const LEASE_LIMITS = { min: 1, max: 86_400 } as const;

export function validateLeaseSeconds(value: number): number {
  if (!Number.isInteger(value) || value < LEASE_LIMITS.min || value > LEASE_LIMITS.max) {
    throw invalidInput('leaseSeconds', `'leaseSeconds' must be an integer from ${LEASE_LIMITS.min} to ${LEASE_LIMITS.max}`);
  }
  return value;
}

export const STATUS_MESSAGE_MAX = 10_000;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

export function validateStatusMessage(value: unknown): string {
  if (typeof value !== 'string' || value.trim().length === 0) throw invalidInput('message', "'message' must not be empty");
  if (value.length > STATUS_MESSAGE_MAX) throw invalidInput('message', `'message' must be at most ${STATUS_MESSAGE_MAX} characters`);
  if (CONTROL.test(value)) throw invalidInput('message', "'message' must not contain control characters");
  return value;
}

/** A fingerprint of a request body (key order does not matter). */
export function requestHash(body: Record<string, unknown>): string {
  const canonical = JSON.stringify(Object.keys(body).sort().map((k) => [k, body[k]]));
  return createHash('sha256').update(canonical).digest('hex');
}

export function addSeconds(at: Date, seconds: number): Date {
  return new Date(at.getTime() + seconds * 1_000);
}

/** A task as a claim sees it (the issues service's ClaimTarget). */
export interface ClaimCandidate {
  status: string;
  assignedAgentId?: string;
  openDependencyCount: number;
  claim?: { agentId: string; expiresAt: string };
}

/**
 * Why `agentId` cannot claim the task now, in the order of DECISIONS §7: assigned to another agent
 * (403), not ready (409 `not-ready`), open dependencies (409 `dependencies-open`), an unexpired
 * claim on it (409 `active-claim`); or undefined. A task in progress under someone's claim is not
 * ready, so it answers `not-ready` (the message says whose claim it is). (The issues service
 * applies the same rule again when it starts the work, atomically.)
 */
export function claimRefusal(task: ClaimCandidate, agentId: string, now: Date): ServiceError | undefined {
  if (task.assignedAgentId !== undefined && task.assignedAgentId !== agentId) {
    return new ServiceError('forbidden', 'The issue is assigned to another agent', { reason: 'assigned-to-another-agent' });
  }
  const held = task.claim && Date.parse(task.claim.expiresAt) > now.getTime() ? task.claim : undefined;
  if (task.status !== 'ready') {
    const why = held ? (held.agentId === agentId ? ': this agent already holds its claim' : ': another agent holds its claim') : '';
    return conflict('not-ready', `Only ready issues can be claimed; this one is '${task.status}'${why}`);
  }
  if (task.openDependencyCount > 0) {
    const n = task.openDependencyCount;
    return conflict('dependencies-open', `${n} dependenc${n === 1 ? 'y is' : 'ies are'} not done yet`);
  }
  if (held) {
    return held.agentId === agentId
      ? conflict('active-claim', 'This agent already holds the active claim on this issue')
      : conflict('active-claim', 'Another agent holds the active claim on this issue');
  }
  return undefined;
}

/**
 * Slack for clocks of different processes (and a start's commit) when deciding that a start can
 * no longer land: the issues service refuses a start after its `startBy`.
 */
export const START_REPAIR_MARGIN_MS = 1_000;

/** How a claim whose task moved on ended, from the task's status. */
export function endOfMovedTask(status: string | undefined): { state: 'completed' | 'released'; reason: string } {
  if (status === undefined) return { state: 'released', reason: 'task-deleted' };
  return status === 'in-review' || status === 'done' || status === 'cancelled'
    ? { state: 'completed', reason: `moved-to-${status}` }
    : { state: 'released', reason: `moved-to-${status}` };
}

// ---- the ready queue -------------------------------------------------------------------------

export type QueueState = 'claimable' | 'blocked' | 'claimed';
export type QuotaState = 'within-run-budget' | 'run-budget-exhausted';
export type NotClaimableReason = 'dependencies-open' | 'active-claim' | 'held-by-you' | 'agent-busy' | 'run-budget-exhausted';

export interface QueueFacts {
  openDependencyCount: number;
  /** Someone's claim on the task is starting. */
  claimedByOther: boolean;
  /** The calling agent holds this task. */
  heldByYou: boolean;
  heldExpiresAt?: string;
  /** The calling agent holds another task (its id). */
  busyWith?: string;
  quotaState: QuotaState;
  resetsAt: string;
  /** The task's brief is incomplete (its readiness `needs-brief`). */
  needsBrief: boolean;
  /** What the done policy still needs before the task may be completed (absent: nothing). */
  doneStep?: string;
}

export interface QueueView {
  state: QueueState;
  whyNotClaimable?: { reason: NotClaimableReason; message: string };
  nextAction: string;
}

/** What the ready queue says about one task to the calling agent (the first reason a claim would fail wins, in the order of DECISIONS §7). */
export function queueView(f: QueueFacts): QueueView {
  if (f.heldByYou) {
    return {
      state: 'claimed',
      whyNotClaimable: { reason: 'held-by-you', message: 'You hold this claim' },
      nextAction: f.doneStep
        ? `Work on it: post status or heartbeat before ${f.heldExpiresAt ?? 'the lease ends'}. ${f.doneStep} Then move it on (or release it).`
        : `Work on it: post status or heartbeat before ${f.heldExpiresAt ?? 'the lease ends'}, attach evidence, then move it to in-review (or release it).`,
    };
  }
  if (f.openDependencyCount > 0) {
    const n = f.openDependencyCount;
    return {
      state: 'blocked',
      whyNotClaimable: { reason: 'dependencies-open', message: `${n} dependenc${n === 1 ? 'y is' : 'ies are'} not done yet` },
      nextAction: `Finish the ${n} open dependenc${n === 1 ? 'y' : 'ies'} first, or pick other ready work.`,
    };
  }
  if (f.claimedByOther) {
    return {
      state: 'claimed',
      whyNotClaimable: { reason: 'active-claim', message: 'Another agent is claiming this task' },
      nextAction: 'Pick other ready work.',
    };
  }
  if (f.busyWith) {
    return {
      state: 'claimable',
      whyNotClaimable: { reason: 'agent-busy', message: `You already hold a claim (on ${f.busyWith}); an agent holds one at a time` },
      nextAction: `Finish (move to in-review) or release your claim on ${f.busyWith} first.`,
    };
  }
  if (f.quotaState === 'run-budget-exhausted') {
    return {
      state: 'claimable',
      whyNotClaimable: { reason: 'run-budget-exhausted', message: `The workspace's agent runs for this month are used up (until ${f.resetsAt})` },
      nextAction: `Wait for the agent-run budget to reset (${f.resetsAt}) or ask an owner to upgrade the plan.`,
    };
  }
  const claimIt = f.needsBrief
    ? 'Claim it (POST /api/agents/claim), then complete the task contract (goal, expected output, verification) before coding.'
    : 'Claim it (POST /api/agents/claim) and start work.';
  return { state: 'claimable', nextAction: f.doneStep ? `${claimIt} ${f.doneStep}` : claimIt };
}
