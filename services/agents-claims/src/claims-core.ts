/**
 * The claim operations of the agents-claims service, shared by its gRPC handlers, its sweeper and
 * its event consumer. The design (docs/claims.md): one insert against two partial unique indexes
 * decides every race; each later step is a conditional change of the claim and, in the issues
 * service, of the task (which carries a mirror of the claim and checks agent writes against it);
 * a claim that ends here is marked `syncPending` until the issues service has applied the end, so
 * a crash between the two stores is finished by the next sweep.
 *
 * One part per concern under core/: taking a claim (claiming.ts), holding it (holding.ts), ending
 * it (ending.ts), fencing writes to tasks (fencing.ts), the ready queue (ready-work.ts), listing and policy (listing.ts), and keeping
 * claims in line with their tasks (upkeep.ts). This class is the one surface the rest uses.
 */
import type { EventEnvelope } from '@planning/bus';
import type { ClaimTarget } from '@planning/proto/planning/issues/v1/claim_support_pb';
import type { CallContext } from '@planning/rpc';
import type { ClaimRecord, EndRequest } from './store/claims.js';
import type { ClaimPolicy } from './store/policies.js';
import { ClaimTaking } from './core/claiming.js';
import type { CoreDeps } from './core/context.js';
import { ClaimEnds } from './core/ending.js';
import { ClaimFencing, type FenceAnswer } from './core/fencing.js';
import { ClaimHolding } from './core/holding.js';
import { ClaimListing } from './core/listing.js';
import { ReadyQueue } from './core/ready-work.js';
import { ClaimUpkeep, type SweepResult } from './core/upkeep.js';
import type { ClaimResult, ClaimView, IssueRefView, ReadyWork } from './core/views.js';

export { CLAIM_SCOPES, type CoreDeps, type CoreLogger, type IssuesClient } from './core/context.js';
export { claimView, type ClaimResult, type IssueRefView, type ClaimView, type MeteringView, type ReadyItem, type ReadyWork } from './core/views.js';

/** The claim operations (see the module comment). */
export class ClaimsCore {
  private readonly ends: ClaimEnds;
  private readonly taking: ClaimTaking;
  private readonly holding: ClaimHolding;
  private readonly queue: ReadyQueue;
  private readonly listing: ClaimListing;
  private readonly upkeep: ClaimUpkeep;
  private readonly fencing: ClaimFencing;

  constructor(deps: CoreDeps) {
    this.ends = new ClaimEnds(deps);
    this.taking = new ClaimTaking(deps, this.ends);
    this.holding = new ClaimHolding(deps, this.ends);
    this.queue = new ReadyQueue(deps);
    this.listing = new ClaimListing(deps);
    this.upkeep = new ClaimUpkeep(deps, this.ends);
    this.fencing = new ClaimFencing(deps);
  }

  // ---- claim, renew, status, release --------------------------------------------------------

  claim(ctx: CallContext, issueId: string, idempotencyKey: string | undefined): Promise<ClaimResult> {
    return this.taking.claim(ctx, issueId, idempotencyKey);
  }

  /** Heartbeat (`via: heartbeat`) or status post (with `message`): the lease starts again from now. */
  renew(
    ctx: CallContext,
    issueId: string,
    fencingToken: number | undefined,
    message?: string,
  ): Promise<{ claim: ClaimView; issue: IssueRefView; note?: { id: string; body: string; createdAt: string } }> {
    return this.holding.renew(ctx, issueId, fencingToken, message);
  }

  /** Releases (cancels) the active claim on a task: the holding agent, or a member (or higher). */
  release(ctx: CallContext, issueId: string, fencingToken: number | undefined): Promise<{ claim: ClaimView; issue: { id: string; status: string } }> {
    return this.holding.release(ctx, issueId, fencingToken);
  }

  /** The fence of the caller's writes to tasks (see core/fencing.ts). */
  checkTaskWrites(ctx: CallContext, request: { issueIds: readonly string[]; kind: string; fencingToken?: number }): Promise<FenceAnswer[]> {
    return this.fencing.checkTaskWrites(ctx, request);
  }

  // ---- ending claims ------------------------------------------------------------------------

  endClaim(claim: ClaimRecord, request: Omit<EndRequest, 'meter'>): Promise<ClaimRecord | null> {
    return this.ends.endClaim(claim, request);
  }

  syncEnd(claim: ClaimRecord, actor?: { type: string; id: string }): Promise<ClaimTarget | undefined> {
    return this.ends.syncEnd(claim, actor);
  }

  abortStart(claim: ClaimRecord, reason: string, where?: Record<string, unknown>): Promise<ClaimRecord | null> {
    return this.ends.abortStart(claim, reason, where);
  }

  reconcile(claim: ClaimRecord, now: Date): Promise<boolean> {
    return this.ends.reconcile(claim, now);
  }

  // ---- ready work, listing and policy ---------------------------------------------------------

  readyWork(ctx: CallContext, limit: number | undefined, cursor: string | undefined): Promise<ReadyWork> {
    return this.queue.readyWork(ctx, limit, cursor);
  }

  listClaims(
    ctx: CallContext,
    request: { workspaceId?: string; issueId?: string; agentId?: string; states: readonly string[]; limit?: number; cursor?: string },
  ): Promise<{ claims: ClaimView[]; nextCursor?: string }> {
    return this.listing.listClaims(ctx, request);
  }

  getPolicy(ctx: CallContext, workspaceId: string): Promise<ClaimPolicy> {
    return this.listing.getPolicy(ctx, workspaceId);
  }

  setPolicy(ctx: CallContext, workspaceId: string, leaseSeconds: number | undefined): Promise<ClaimPolicy> {
    return this.listing.setPolicy(ctx, workspaceId, leaseSeconds);
  }

  // ---- events, sweeping ----------------------------------------------------------------------

  onTaskStatusChanged(event: EventEnvelope): Promise<void> {
    return this.upkeep.onTaskStatusChanged(event);
  }

  sweep(options: { reconcile: boolean; batch?: number; budgetMs?: number }): Promise<SweepResult> {
    return this.upkeep.sweep(options);
  }

  reconcileAll(batch?: number): Promise<number> {
    return this.upkeep.reconcileAll(batch);
  }

  /** Waits for writes still running after their request was answered (before the store closes). */
  settle(): Promise<void> {
    return this.ends.settle();
  }
}
