/**
 * The fence of writes to a task (docs/claims.md, "Writes under claims"): the one rule that decides
 * whether a writer may change a task now, given the claims of that task. The issues service asks
 * for it before every agent write and applies the answer (a claim the write must land under) in
 * the write's own transaction, so a claim that ends in between makes the write fail, never land.
 */
import { conflict, type ServiceError } from '@planning/errors';

/** The kinds of task writes. Only comments are open to an agent locked out by its lost claim. */
export const WRITE_KINDS = ['field', 'status', 'bulk', 'contract', 'comment', 'time', 'evidence', 'approval'] as const;
export type WriteKind = (typeof WRITE_KINDS)[number];

/** A claim of the task as the rule sees it (only answered claims: the agent was told it holds them). */
export interface FenceClaim {
  id: string;
  agentId: string;
  state: 'active' | 'released' | 'completed' | 'expired';
  fencingToken: number;
  expiresAt: Date;
}

export interface FenceFacts {
  /** The writing agent; absent for people and services. */
  agentId?: string;
  /** The token the writer presented. */
  fencingToken?: number;
  kind: WriteKind;
  now: Date;
  /** The task's latest answered claim (the active one, if any, is always the latest). */
  latest?: FenceClaim;
  /** The writer's own latest answered claim of the task, when `latest` is another agent's. */
  ownLatest?: FenceClaim;
}

/** Where the write must land: under `claimId` (before its expiry), or under no other agent's claim. */
export interface Fence {
  claimId?: string;
}

const live = (c: FenceClaim | undefined, now: Date): c is FenceClaim => c !== undefined && c.state === 'active' && c.expiresAt > now;

/**
 * The rule, in order:
 * 1. A presented token must be the current (active, unexpired) claim's, else 409 `stale-claim`;
 *    an agent presenting another agent's current token gets 409 `active-claim`.
 * 2. Under another agent's active claim an agent may not write at all: 409 `active-claim`.
 * 3. The holder writes under its claim (the fence names it).
 * 4. An agent whose latest claim of the task ended by expiry (swept or not), or whose claim was
 *    followed by another agent's (a takeover), may not do work writes — everything but comments —
 *    until it claims the task again: 409 `stale-claim`. Comments stay open, so it can say what
 *    happened.
 * 5. Anything else writes under no claim (the fence only keeps other agents' claims out).
 * People and services without a token are not fenced (they may move a claimed task on).
 */
export function writeFence(f: FenceFacts): Fence | ServiceError {
  const current = live(f.latest, f.now) ? f.latest : undefined;
  if (f.fencingToken !== undefined) {
    if (!current || current.fencingToken !== f.fencingToken) {
      return conflict(
        'stale-claim',
        current
          ? `Fencing token ${f.fencingToken} is stale: the current claim's token is ${current.fencingToken}`
          : `Fencing token ${f.fencingToken} is stale: the issue is not under an active claim`,
      );
    }
    if (f.agentId !== undefined && current.agentId !== f.agentId) return conflict('active-claim', 'Another agent holds the active claim on this issue');
    return { claimId: current.id };
  }
  if (f.agentId === undefined) return {};
  if (current) {
    return current.agentId === f.agentId ? { claimId: current.id } : conflict('active-claim', 'Another agent holds the active claim on this issue');
  }
  if (f.kind === 'comment') return {};
  const own = f.latest?.agentId === f.agentId ? f.latest : f.ownLatest;
  if (!own) return {};
  if (own.state === 'expired' || (own.state === 'active' && own.expiresAt <= f.now)) {
    return conflict('stale-claim', `Your claim on this issue expired at ${own.expiresAt.toISOString()}; claim it again before working on it`);
  }
  if (own !== f.latest) {
    return conflict('stale-claim', 'Another agent has claimed this issue since your claim; claim it again before working on it');
  }
  return {};
}
