/**
 * What the issues service knows about agent claims (DECISIONS §7). The agents-claims service owns
 * claims; a task in progress under one carries a mirror of it (claim id, agent, fencing token,
 * expiry), written together with the status. Agent writes carry a fence the agents-claims service
 * decided (the one rule of writes under claims); it is checked against the mirror here, inside the
 * write's transaction, so a claim that ends in between never lets a stale write land.
 */
import { conflict, ServiceError } from '@planning/errors';
import { PRIORITY_RANK, type Priority } from './tasks.js';
import type { TaskStatus } from './task-status.js';

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

/**
 * Where a write must land, as the agents-claims service decided it (ClaimService.CheckTaskWrites,
 * the one rule of writes under claims): under `claimId` before its expiry, or (no claim id) under
 * no other agent's unexpired claim.
 */
export interface WriteFence {
  claimId?: string;
  /** The writer presented a fencing token (it was `claimId`'s): only that claim, live, will do. */
  byToken?: boolean;
}

/** Who is writing, as far as claims care. */
export interface ClaimWriter {
  /** The writing agent; absent for people and services. */
  agentId?: string;
  /** The fence agents-claims gave the write; absent: the writer is not fenced (people and services without a token). */
  fence?: WriteFence;
  now: Date;
}

/**
 * Why the task, as it is inside the write's transaction, no longer matches the write's fence, or
 * undefined when it does. The fence was decided a moment before (by agents-claims); this check
 * makes it hold where the task is written: a claim that ended or changed in between (expiry,
 * sweep, completion, another agent's claim) makes the write fail instead of landing.
 */
export function fenceRefusal(task: { claim?: ClaimMirror; lastClaimEnd?: { claimId: string; end: ClaimEnd } }, writer: ClaimWriter): ServiceError | undefined {
  const fence = writer.fence;
  if (!fence) return undefined;
  const claim = task.claim;
  if (fence.claimId !== undefined) {
    // The claim ended on the task by its completion or a release that agents-claims has not heard
    // of yet (the status event is on its way): the holder, writing without a token, is answered as
    // it will be once agents-claims knows — a write under no claim (the rule's last step). A
    // presented token is spent; an expiry stays an expiry.
    const ended = task.lastClaimEnd;
    if (!claim && !fence.byToken && ended?.claimId === fence.claimId && (ended.end === 'completed' || ended.end === 'released')) return undefined;
    if (!claim || claim.claimId !== fence.claimId) return conflict('stale-claim', 'The claim this write was made under has ended; claim the issue again if it is ready');
    if (!isUnexpired(claim, writer.now)) return conflict('stale-claim', `The claim this write was made under expired at ${claim.expiresAt}`);
    return undefined;
  }
  // Fenced to no claim: only another agent's live claim is in the way (the writer's own claim,
  // live or lapsed, was weighed by agents-claims: e.g. a comment after its lease is allowed).
  if (claim && claim.agentId !== writer.agentId && isUnexpired(claim, writer.now)) {
    return conflict('active-claim', 'Another agent holds the active claim on this issue');
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
