/**
 * What the issues service knows about agent claims (DECISIONS §7). The agents-claims service owns
 * claims; a task in progress under one carries a mirror of it (claim id, agent, fencing token,
 * expiry), written together with the status. Agent writes are checked against that mirror here,
 * where the task is written, so an expired or replaced holder can never change the task.
 */
import { conflict, ServiceError } from '@planning/errors';
import { PRIORITY_RANK, type Priority } from './tasks.js';
import type { MoveActor, TaskStatus } from './task-status.js';

/** The claim a task is in progress under, as the task records it. */
export interface ClaimMirror {
  claimId: string;
  agentId: string;
  /** Grows by one with every claim of the task. */
  fencingToken: number;
  /** RFC 3339 (UTC, fixed width, so string order is time order). */
  expiresAt: string;
  /**
   * The claim's renewal count `expiresAt` came from (absent: none since the start). A renewal
   * moves the mirror only when it is newer, so renewals arriving out of order, or after a lowered
   * lease, leave the mirror at the claim's latest expiry, never later.
   */
  renewal?: number;
}

/** How a claim ended, as the task's status event reports it. */
export type ClaimEnd = 'completed' | 'released' | 'expired' | 'aborted';

/** Ways the agents-claims service ends a claim on a task (the task returns to ready). */
export const END_OUTCOMES = ['released', 'expired', 'aborted'] as const;
export type EndOutcome = (typeof END_OUTCOMES)[number];

/**
 * A claim that ended on the task while its start may still be on its way: until `until` (the
 * claim's `startBy`, RFC 3339) a start of it is refused. After that the start is refused anyway
 * (no start after `startBy`), so the entry can go: the list only holds the ends of the last few
 * seconds.
 */
export interface EndedClaim {
  claimId: string;
  until: string;
}

/** The tombstones still needed at `now` (entries past `until` are dropped). */
export function liveEndedClaims(list: readonly EndedClaim[] | undefined, now: Date): EndedClaim[] {
  const at = now.toISOString();
  return (list ?? []).filter((e) => e.until >= at);
}

/**
 * The task's tombstones with `claimId` ended, pruned at `now`; undefined when there is nothing to
 * record (its `startBy` passed, or unknown: no start of it can land any more).
 */
export function withEndedClaim(list: readonly EndedClaim[] | undefined, claimId: string, startBy: string | undefined, now: Date): EndedClaim[] | undefined {
  if (startBy === undefined || startBy < now.toISOString()) return undefined;
  return [...liveEndedClaims(list, now).filter((e) => e.claimId !== claimId), { claimId, until: startBy }];
}

/** True when the task refuses a start of `claimId`: the claim ended there before it started. */
export function endedBeforeStart(list: readonly EndedClaim[] | undefined, claimId: string): boolean {
  return (list ?? []).some((e) => e.claimId === claimId);
}

export function isUnexpired(claim: Pick<ClaimMirror, 'expiresAt'>, now: Date): boolean {
  return claim.expiresAt > now.toISOString();
}

/**
 * What a status move out of in-progress does to the claim the task is under: review, done and
 * cancelled complete it; back to ready (or to blocked) releases it.
 */
export function claimEndOf(to: TaskStatus): ClaimEnd {
  return to === 'in-review' || to === 'done' || to === 'cancelled' ? 'completed' : 'released';
}

/** Who is writing, as far as claims care. */
export interface ClaimWriter {
  moveActor: MoveActor;
  agentId?: string;
  /** The fencing token the writer presented, if any. */
  fencingToken?: number;
  now: Date;
}

/**
 * Why a write to a task is refused because of its claim, or undefined when it is not:
 * - a presented fencing token must be the current claim's (409 `stale-claim`), whoever presents it;
 *   without a claim on the task there is nothing it can match;
 * - an agent may change a task under a claim only as the holder, and only before the lease ends
 *   (another agent: 409 `active-claim`; the holder after expiry: 409 `stale-claim`).
 * People (sessions) and services may change a claimed task: a member moving it on ends the claim.
 */
export function claimWriteRefusal(task: { claim?: ClaimMirror }, writer: ClaimWriter): ServiceError | undefined {
  const claim = task.claim;
  // A presented token speaks for the claim it came with: not the current one, it is stale.
  if (writer.fencingToken !== undefined && writer.fencingToken !== claim?.fencingToken) {
    return conflict(
      'stale-claim',
      claim
        ? `Fencing token ${writer.fencingToken} is stale: the current claim's token is ${claim.fencingToken}`
        : `Fencing token ${writer.fencingToken} is stale: the issue is not under an active claim`,
    );
  }
  if (!claim || writer.moveActor !== 'agent') return undefined;
  if (writer.agentId !== claim.agentId) return conflict('active-claim', 'Another agent holds the active claim on this issue');
  if (!isUnexpired(claim, writer.now)) {
    return conflict('stale-claim', `Your claim on this issue expired at ${claim.expiresAt}; claim it again if it is ready`);
  }
  return undefined;
}

/** Facts a claim's start depends on. */
export interface StartCandidate {
  status: TaskStatus;
  openDependencyCount: number;
  assignedAgentId?: string;
  claim?: ClaimMirror;
}

/**
 * Why a task cannot start under a claim of `agentId` now, in the order of DECISIONS §7: assigned
 * to another agent (403), not ready (409 `not-ready`), open dependencies (409
 * `dependencies-open`), an active claim (409 `active-claim`); or undefined. A task in progress
 * under someone's claim is not ready: it answers `not-ready` (the message names the claim).
 * `active-claim` is left for a ready task that still carries an unexpired claim.
 */
export function startRefusal(task: StartCandidate, agentId: string, now: Date): ServiceError | undefined {
  if (task.assignedAgentId !== undefined && task.assignedAgentId !== agentId) {
    return new ServiceError('forbidden', 'The issue is assigned to another agent', { reason: 'assigned-to-another-agent' });
  }
  const held = task.claim && isUnexpired(task.claim, now) ? task.claim : undefined;
  if (task.status !== 'ready') {
    const why = held ? (held.agentId === agentId ? ': this agent already holds its claim' : ': another agent holds its claim') : '';
    return conflict('not-ready', `Only ready issues can be claimed; this one is '${task.status}'${why}`);
  }
  if (task.openDependencyCount > 0) {
    return conflict(
      'dependencies-open',
      `${task.openDependencyCount} dependenc${task.openDependencyCount === 1 ? 'y is' : 'ies are'} not done yet`,
    );
  }
  if (held) {
    return held.agentId === agentId
      ? conflict('active-claim', 'This agent already holds the active claim on this issue')
      : conflict('active-claim', 'Another agent holds the active claim on this issue');
  }
  return undefined;
}

/** Separates the parts of a queue key; below every character a date or timestamp contains. */
const SEP = '\u0001';

/**
 * The work-queue order as one ascending string key: priority (urgent first), due date (earliest
 * first, undated last), age (oldest first), id. Stored on each task so the ready queue is an
 * ordered index walk that pages by key.
 */
export function queueKeyOf(task: { id: string; priority: Priority; dueDate?: string; createdAt: string }): string {
  return `${4 - PRIORITY_RANK[task.priority]}${SEP}${task.dueDate ?? '~'}${SEP}${task.createdAt}${SEP}${task.id}`;
}
