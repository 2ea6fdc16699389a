/**
 * Keeping claims in line with their tasks when nobody asks: the status-move events of the issues
 * service, the periodic sweep (expiries, failed starts, ends not yet applied) and reconciliation.
 */
import type { EventEnvelope } from '@planning/bus';
import { START_REPAIR_MARGIN_MS, type StoredState } from '../domain/claims.js';
import { asSystem, SYSTEM_ACTOR, type CoreDeps } from './context.js';
import type { ClaimEnds } from './ending.js';

/** How long one sweep keeps going through full batches before it leaves the rest to the next. */
const SWEEP_BUDGET_MS = 5_000;

/** What one sweep did: claims ended at expiry, tasks released, starts repaired, ends synced, claims reconciled. */
export interface SweepResult {
  expired: number;
  released: number;
  repaired: number;
  synced: number;
  reconciled: number;
}

/**
 * A sweep in which at least one step failed: the first failure (its message, and as `cause`),
 * how many steps failed, and what the sweep did all the same (`done`), so the run's work is still
 * logged and counted.
 */
export class SweepFailedError extends Error {
  constructor(
    cause: unknown,
    readonly done: SweepResult,
    readonly failedSteps: number,
  ) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'SweepFailedError';
  }
}

export class ClaimUpkeep {
  constructor(
    private readonly deps: CoreDeps,
    private readonly ends: ClaimEnds,
  ) {}

  /**
   * A task's status move ended the claim it was under (the issues service cleared the mirror in
   * the same change): end the claim here too. Idempotent (conditional on the claim being active).
   */
  async onTaskStatusChanged(event: EventEnvelope): Promise<void> {
    const data = event.data;
    const claimId = data.claimId;
    const claimEnd = data.claimEnd;
    if (typeof claimId !== 'string' || typeof claimEnd !== 'string') return;
    const state: Exclude<StoredState, 'active'> =
      claimEnd === 'completed' || claimEnd === 'expired' || claimEnd === 'aborted' ? claimEnd : 'released';
    const to = typeof data.to === 'string' ? data.to : 'unknown';
    const reason =
      state === 'expired' ? 'lease-expired' : state === 'aborted' ? 'start-failed' : state === 'released' && to === 'ready' ? 'released' : `moved-to-${to}`;
    await this.deps.claims.end(claimId, {
      state,
      reason,
      now: this.deps.clock(),
      actor: event.actor ?? SYSTEM_ACTOR,
      sync: false,
    });
  }

  /**
   * One sweep (see sweeper.ts); returns what it did, for logs and tests. Each step runs even when
   * another failed (at the end a SweepFailedError carries the first failure and what the other
   * steps did): a task service that cannot be reached must not hold up, say, the claims whose
   * lease passed.
   */
  async sweep(options: { reconcile: boolean; batch?: number; budgetMs?: number }): Promise<SweepResult> {
    const { claims, clock } = this.deps;
    const batch = options.batch ?? 100;
    // Each step goes on through full batches (a backlog is cleared in one sweep, within the bound
    // of DECISIONS §7) until its batch comes back short, nothing changed, or the budget is spent.
    const budgetEnds = Date.now() + (options.budgetMs ?? SWEEP_BUDGET_MS);
    const again = (found: number, changed: number) => found >= batch && changed > 0 && Date.now() < budgetEnds;
    const out = { expired: 0, released: 0, repaired: 0, synced: 0, reconciled: 0 };
    const failures: unknown[] = [];
    const step = async (fn: () => Promise<void>): Promise<void> => {
      await fn().catch((err: unknown) => {
        failures.push(err);
      });
    };
    // 1. Claims whose lease passed end, and their tasks go back to ready.
    await step(async () => {
      for (;;) {
        const due = await claims.dueExpired(clock(), batch);
        let changed = 0;
        for (const claim of due) {
          if (await this.ends.expire(claim, clock())) changed += 1;
        }
        out.expired += changed;
        if (!again(due.length, changed)) break;
      }
    });
    // 2. Tasks whose mirrored lease passed go back to ready (whatever the claims store says).
    await step(async () => {
      for (;;) {
        const released = await this.deps.issues.releaseExpiredClaims({ limit: batch }, asSystem());
        for (const r of released.released) {
          out.released += 1;
          const claim = await claims.get(r.claimId);
          if (claim?.state === 'active') {
            await claims.end(claim._id, { state: 'expired', reason: 'lease-expired', now: clock(), actor: SYSTEM_ACTOR, sync: false });
          }
        }
        if (!again(released.released.length, released.released.length)) break;
      }
    });
    // 3. Claims whose start never finished (their process died): end them, give their run back.
    await step(async () => {
      for (;;) {
        const cutoff = new Date(clock().getTime() - START_REPAIR_MARGIN_MS);
        const due = await claims.dueStarts(cutoff, batch);
        let changed = 0;
        for (const claim of due) {
          if (await this.ends.abortStart(claim, 'start-failed', { startBy: { $lte: cutoff } })) changed += 1;
        }
        out.repaired += changed;
        if (!again(due.length, changed)) break;
      }
    });
    // 4. Ends not yet applied to their tasks (the issues service was not reached).
    await step(async () => {
      for (;;) {
        const pending = await claims.pendingSync(batch);
        for (const claim of pending) {
          await this.ends.syncEnd(claim);
          out.synced += 1;
        }
        if (!again(pending.length, pending.length)) break;
      }
    });
    if (options.reconcile) {
      await step(async () => {
        out.reconciled = await this.reconcileAll(batch);
      });
    }
    if (failures.length > 0) throw new SweepFailedError(failures[0], out, failures.length);
    return out;
  }

  /**
   * The safety net: tasks under a claim that is not active here go back to ready; answered active
   * claims whose task moved on end. (Events and the steps above normally leave nothing to do.)
   */
  async reconcileAll(batch = 100): Promise<number> {
    const { claims, clock } = this.deps;
    let fixed = 0;
    let after: string | undefined;
    do {
      const page = await this.deps.issues.listClaimedTasks({ after, limit: batch }, asSystem());
      const known = new Map((await claims.getMany(page.tasks.map((t) => t.claim?.claimId ?? ''))).map((c) => [c._id, c]));
      for (const t of page.tasks) {
        const mirror = t.claim;
        if (!mirror) continue;
        const claim = known.get(mirror.claimId);
        if (claim?.state === 'active') continue;
        const outcome = claim?.state === 'expired' ? 'expired' : claim?.state === 'released' ? 'released' : 'aborted';
        const res = await this.deps.issues.endClaimedWork(
          { issueId: t.issueId, claimId: mirror.claimId, outcome, actor: SYSTEM_ACTOR, ...(claim ? { startBy: claim.startBy.toISOString() } : {}) },
          asSystem(),
        );
        if (res.ended) fixed += 1;
      }
      after = page.nextAfter;
    } while (after);
    // Claims answered more than a sweep ago whose task is no longer under them.
    const settledBefore = new Date(clock().getTime() - 5_000);
    let cursor: string | undefined;
    for (;;) {
      const page = await claims.settledActive(settledBefore, cursor, batch);
      for (const claim of page) if (!(await this.ends.reconcile(claim, clock()))) fixed += 1;
      if (page.length < batch) break;
      cursor = page[page.length - 1]?._id;
    }
    return fixed;
  }
}
