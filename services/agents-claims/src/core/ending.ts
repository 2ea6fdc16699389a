/**
 * How claims end: here first, then on the task in the issues service. A claim that ends here is
 * marked `syncPending` until the issues service has applied the end, so a crash between the two
 * stores is finished by the next sweep. Every change is conditional, so two replicas (or a sweep
 * and a request) never end a claim twice.
 */
import type { ClaimTarget } from '@planning/proto/planning/issues/v1/claim_support_pb';
import { endOfMovedTask, type StoredState } from '../domain/claims.js';
import type { ClaimRecord, EndRequest } from '../store/claims.js';
import { asSystem, systemTarget, SYSTEM_ACTOR, type CoreDeps } from './context.js';

export class ClaimEnds {
  /** `syncPending` clears still being written after their request was answered (see `syncEnd`). */
  private readonly clearing = new Set<Promise<void>>();

  constructor(private readonly deps: CoreDeps) {}

  /** Waits for the `syncPending` clears still being written (before the store closes). */
  async settle(): Promise<void> {
    while (this.clearing.size > 0) await Promise.all([...this.clearing]);
  }

  /** Ends a claim here, then (when `sync`) in the issues service. Returns the ended claim, if this call ended it. */
  async endClaim(claim: ClaimRecord, request: Omit<EndRequest, 'meter'>): Promise<ClaimRecord | null> {
    const ended = await this.deps.claims.end(claim._id, { ...request, meter: this.deps.meter });
    if (ended && ended.syncPending) await this.syncEnd(ended, request.actor).catch((err: unknown) => this.deferred(ended, err));
    return ended;
  }

  /**
   * Tells the issues service a claim ended (the task returns to ready if it is still under it),
   * then clears the claim's `syncPending`. Idempotent; the sweeper retries what failed. The end of
   * a claim that never started carries its `startBy`: until then the task keeps a tombstone of the
   * claim, so a start still on its way (its request gave up, its transaction did not) is refused
   * there. Once the end is applied, no start of the claim can land any more: nothing is left to
   * wait for. A started claim's start was answered (its one start call returned before the claim
   * was marked started), so none of it is on its way: its end leaves no tombstone (one per claim
   * and release for `startBy`'s 15 s had grown the task document of an agent claiming and
   * releasing in a loop by about 90 entries).
   *
   * With `answerFirst`, the answer does not wait for the clear: the end is durable in both stores
   * by then, and a clear lost to a crash only makes the sweeper send the (idempotent) end again.
   */
  async syncEnd(claim: ClaimRecord, actor: { type: string; id: string } = SYSTEM_ACTOR, options: { answerFirst?: boolean } = {}): Promise<ClaimTarget | undefined> {
    let target: ClaimTarget | undefined;
    if (claim.state === 'released' || claim.state === 'expired' || claim.state === 'aborted') {
      const res = await this.deps.issues.endClaimedWork(
        { issueId: claim.issueId, claimId: claim._id, outcome: claim.state, actor, ...(claim.started ? {} : { startBy: claim.startBy.toISOString() }) },
        asSystem(),
      );
      target = res.target;
    }
    if (!options.answerFirst) {
      await this.deps.claims.clearSync(claim._id);
      return target;
    }
    const clear = this.deps.claims.clearSync(claim._id).then(
      () => undefined,
      (err: unknown) => this.deps.logger.warn({ err, claimId: claim._id }, "claim end applied to its task; its syncPending not cleared (the sweeper sends the end again)"),
    );
    this.clearing.add(clear);
    void clear.finally(() => this.clearing.delete(clear));
    return target;
  }

  /** Logs an end the issues service has not applied yet (the sweeper retries it). */
  deferred(claim: ClaimRecord, err: unknown): undefined {
    this.deps.logger.warn({ err, claimId: claim._id }, 'claim end not yet applied to its task; the sweeper retries');
    return undefined;
  }

  /**
   * Ends an active claim whose lease passed, and its task if still under it. An answered claim's
   * task decides first (in issues, one transaction): it returns to ready only if it is still in
   * progress under the claim with the mirror's expiry passed. If it is not (the holder completed it
   * just before, or a member moved it on), the claim ends the way the task saw it end, never as
   * expired: of a completion and the lease's expiry, exactly one wins, everywhere. A crash between
   * the two stores leaves the claim active and past its lease, and the next sweep finishes it.
   * A claim that never started has no task to ask: it ends here first (and tells the task after).
   * True when this call ended something: the task's lease, or the claim. (The task's event may end
   * the claim here before this call does; the expiry was still this call's work.)
   */
  async expire(claim: ClaimRecord, now: Date): Promise<boolean> {
    if (!claim.started) {
      return (await this.endClaim(claim, { state: 'expired', reason: 'lease-expired', now, actor: SYSTEM_ACTOR, sync: true, where: { expiresAt: { $lte: now } } })) !== null;
    }
    const res = await this.deps.issues.endClaimedWork(
      { issueId: claim.issueId, claimId: claim._id, outcome: 'expired', actor: SYSTEM_ACTOR, startBy: claim.startBy.toISOString(), onlyIfExpired: true },
      asSystem(),
    );
    const end = res.ended ? { state: 'expired' as const, reason: 'lease-expired' } : endAsTaskSaw(claim, res.target);
    // Still under the claim with an unexpired mirror (the clocks of two processes differ): the next sweep looks again.
    if (!end) return false;
    const ended = await this.deps.claims.end(claim._id, { ...end, now, actor: SYSTEM_ACTOR, sync: false });
    return res.ended || ended !== null;
  }

  /** Ends a claim whose start did not finish (the agent never got it); its run is given back. */
  async abortStart(claim: ClaimRecord, reason: string, where: Record<string, unknown> = {}): Promise<ClaimRecord | null> {
    return this.endClaim(claim, { state: 'aborted', reason, now: this.deps.clock(), actor: SYSTEM_ACTOR, sync: true, where: { started: false, ...where } });
  }

  /**
   * Brings an answered active claim in line with its task: under it and unexpired, nothing to do;
   * under it but past the mirrored expiry, it expires; not under it (the task was completed,
   * released or moved on, and the event is still on its way), it ends as the task says.
   * Returns true when the claim is still active afterwards.
   */
  async reconcile(claim: ClaimRecord, now: Date): Promise<boolean> {
    if (!claim.started) return true;
    const task = await systemTarget(this.deps.issues, claim.issueId);
    if (task && task.status === 'in-progress' && task.claim?.claimId === claim._id) {
      if (Date.parse(task.claim.expiresAt) > now.getTime()) return true;
      // The task's mirror expired (its renewal was lost): the claim has lost the task.
      await this.endClaim(claim, { state: 'expired', reason: 'lease-expired', now, actor: SYSTEM_ACTOR, sync: true });
      return false;
    }
    const end = endOfMovedTask(task?.status);
    await this.deps.claims.end(claim._id, { ...end, now, actor: SYSTEM_ACTOR, sync: false, where: { started: true } });
    return false;
  }

  /** A task still under a claim whose mirrored expiry passed returns to ready now, and the claim ends. */
  async expireMirror(target: ClaimTarget, now: Date): Promise<void> {
    const mirror = target.claim;
    if (!mirror) return;
    const claim = await this.deps.claims.get(mirror.claimId);
    if (claim && claim.state === 'active') {
      if (claim.expiresAt <= now) await this.expire(claim, now);
      else await this.reconcile(claim, now);
      return;
    }
    // No active claim behind the mirror: end it on the task.
    await this.deps.issues.endClaimedWork(
      { issueId: target.issueId, claimId: mirror.claimId, outcome: 'expired', actor: SYSTEM_ACTOR, ...(claim ? { startBy: claim.startBy.toISOString() } : {}) },
      asSystem(),
    );
  }
}

/**
 * How a claim the task is no longer under ended, as the task saw it: the task's note of its last
 * claim's end, or (a task deleted, or past another claim since) from its status. Undefined while
 * the task is still under the claim.
 */
function endAsTaskSaw(claim: ClaimRecord, target: ClaimTarget | undefined): { state: Exclude<StoredState, 'active'>; reason: string } | undefined {
  if (target?.claim?.claimId === claim._id) return undefined;
  const noted = target?.lastClaimEnd?.claimId === claim._id ? target.lastClaimEnd.end : undefined;
  if (noted === 'expired') return { state: 'expired', reason: 'lease-expired' };
  if (noted === 'aborted') return { state: 'aborted', reason: 'start-failed' };
  if (noted === 'completed' || noted === 'released') {
    const moved = endOfMovedTask(target?.status);
    return { state: noted, reason: noted === moved.state ? moved.reason : noted };
  }
  return endOfMovedTask(target?.status);
}
