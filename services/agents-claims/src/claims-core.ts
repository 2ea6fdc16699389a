/**
 * The claim operations of the agents-claims service, shared by its gRPC handlers, its sweeper and
 * its event consumer. The design (docs/claims.md): one insert against two partial unique indexes
 * decides every race; each later step is a conditional change of the claim and, in the issues
 * service, of the task (which carries a mirror of the claim and checks agent writes against it);
 * a claim that ends here is marked `syncPending` until the issues service has applied the end, so
 * a crash between the two stores is finished by the next sweep.
 */
import { authorizeWorkspace, type AccessLookup } from '@planning/access';
import type { EventEnvelope } from '@planning/bus';
import { conflict, invalidInput, ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import { quotaExceeded, type MeterDecision, type UsageMeter } from '@planning/metering';
import { PLANS, quotaPeriod, quotaResetsAt } from '@planning/plans';
import type { ClaimSupportService, ClaimTarget } from '@planning/proto/planning/issues/v1/claim_support_pb';
import type { Task } from '@planning/proto/planning/issues/v1/tasks_pb';
import { callOptionsFrom, SYSTEM_PRINCIPAL, type CallContext, type Principal, type RpcCallOptions, type RpcClient } from '@planning/rpc';
import { failpoint, FailpointError } from '@planning/runtime/failpoints';
import {
  actorOf,
  addSeconds,
  claimRefusal,
  endOfMovedTask,
  publicState,
  queueView,
  requestHash,
  requireAgent,
  storedFilterOf,
  validateAgentId,
  validateFencingToken,
  validateId,
  validateIdempotencyKey,
  validateLeaseSeconds,
  validateStatusMessage,
  PUBLIC_STATES,
  START_REPAIR_MARGIN_MS,
  type AgentCaller,
  type PublicState,
  type QueueState,
  type QuotaState,
  type StoredState,
} from './domain/claims.js';
import { ClaimGoneError, type ClaimRecord, type ClaimRepository, type EndRequest } from './store/claims.js';
import type { IdempotencyRepository, StoredAnswer } from './store/idempotency.js';
import type { ClaimPolicy, PolicyRepository } from './store/policies.js';

export type IssuesClient = RpcClient<typeof ClaimSupportService>;

/** Claims and writes under them need both (DECISIONS §3, §7). */
export const CLAIM_SCOPES = ['issues:write', 'agents:execute'] as const;
const READ_SCOPES = ['agents:read'] as const;

/** Errors that answer the request itself and are replayed for its idempotency key. */
const REPLAYABLE = new Set(['invalid-input', 'forbidden', 'not-found', 'work-already-claimed', 'quota-exceeded']);

/** Starting claims a ready-work call tells the issues service about (they last moments). */
const MAX_STARTING = 1_000;

/** How long one sweep keeps going through full batches before it leaves the rest to the next. */
const SWEEP_BUDGET_MS = 5_000;

export interface ClaimView {
  id: string;
  workspaceId: string;
  issueId: string;
  agentId: string;
  state: PublicState;
  fencingToken: number;
  expiresAt: string;
  leaseSeconds: number;
  createdAt: string;
  renewedAt?: string;
  endedAt?: string;
  endReason?: string;
}

export interface MeteringView {
  allowed: boolean;
  kind: 'agent-runs';
  used: number;
  /** null: unlimited. */
  limit: number | null;
  period: string;
  resetsAt: string;
}

export interface ClaimResult {
  claim: ClaimView;
  issue: { id: string; status: string };
  metering: MeteringView;
  replayed: boolean;
}

export interface ReadyItem {
  task: Task;
  rank: number;
  state: QueueState;
  quotaState: QuotaState;
  nextAction: string;
  doneEvidence: { completed: number; total: number };
  whyNotClaimable?: { reason: string; message: string };
  claim?: ClaimView;
}

export interface ReadyWork {
  items: ReadyItem[];
  summary: { total: number; claimable: number; blocked: number; heldByYou: number; quotaState: QuotaState };
  nextCursor?: string;
  metering: MeteringView;
}

export interface CoreLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
}

export interface CoreDeps {
  claims: ClaimRepository;
  idempotency: IdempotencyRepository;
  policies: PolicyRepository;
  meter: UsageMeter;
  access: AccessLookup;
  issues: IssuesClient;
  clock: () => Date;
  logger: CoreLogger;
  startTimeoutMs: number;
  idempotencyLeaseMs: number;
}

/** A claim as the API shows it at `now` (an active claim past its expiry shows as expired). */
export function claimView(c: ClaimRecord, now: Date): ClaimView {
  return {
    id: c._id,
    workspaceId: c.workspaceId,
    issueId: c.issueId,
    agentId: c.agentId,
    state: publicState(c, now),
    fencingToken: c.fencingToken,
    expiresAt: c.expiresAt.toISOString(),
    leaseSeconds: c.leaseSeconds,
    createdAt: c.createdAt.toISOString(),
    ...(c.renewedAt ? { renewedAt: c.renewedAt.toISOString() } : {}),
    ...(c.endedAt ? { endedAt: c.endedAt.toISOString() } : {}),
    ...(c.endReason ? { endReason: c.endReason } : {}),
  };
}

function meteringView(d: Pick<MeterDecision, 'allowed' | 'used' | 'limit' | 'period' | 'resetsAt'>): MeteringView {
  return { allowed: d.allowed, kind: 'agent-runs', used: d.used, limit: d.limit, period: d.period, resetsAt: d.resetsAt };
}

const SYSTEM_ACTOR = { type: 'system', id: 'agents-claims' };

const staleClaim = (message = 'You hold no active claim on this issue (it expired, was released, completed or taken over)') =>
  conflict('stale-claim', message);

/** The claim operations (see the module comment). */
export class ClaimsCore {
  constructor(private readonly deps: CoreDeps) {}

  // ---- issues calls -------------------------------------------------------------------------

  /** As the system, with a fresh deadline: clean-up must not die with the caller's request. */
  private system(): RpcCallOptions {
    return { principal: SYSTEM_PRINCIPAL };
  }

  /** As the caller (its principal and deadline), but not cancelled with it: a started claim finishes or is undone. */
  private asCaller(ctx: CallContext): RpcCallOptions {
    return callOptionsFrom(ctx, { signal: undefined });
  }

  private async target(issueId: string, options: RpcCallOptions): Promise<ClaimTarget> {
    const res = await this.deps.issues.getClaimTarget({ issueId }, options);
    if (!res.target) throw new ServiceError('internal', 'Internal error');
    return res.target;
  }

  /** The task as the system sees it; null when it no longer exists. */
  private async systemTarget(issueId: string): Promise<ClaimTarget | null> {
    try {
      return await this.target(issueId, this.system());
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'not-found') return null;
      throw err;
    }
  }

  // ---- ending claims ------------------------------------------------------------------------

  /** Ends a claim here, then (when `sync`) in the issues service. Returns the ended claim, if this call ended it. */
  async endClaim(claim: ClaimRecord, request: Omit<EndRequest, 'meter'>): Promise<ClaimRecord | null> {
    const ended = await this.deps.claims.end(claim._id, { ...request, meter: this.deps.meter });
    if (ended && ended.syncPending) await this.syncEnd(ended, request.actor).catch((err: unknown) => this.deferred(ended, err));
    return ended;
  }

  /**
   * Tells the issues service a claim ended (the task returns to ready if it is still under it),
   * then clears the claim's `syncPending`. Idempotent; the sweeper retries what failed. The end
   * carries the claim's `startBy`: until then the task keeps a tombstone of the claim, so a start
   * still on its way (its request gave up, its transaction did not) is refused there. Once the end
   * is applied, no start of the claim can land any more: nothing is left to wait for.
   */
  async syncEnd(claim: ClaimRecord, actor: { type: string; id: string } = SYSTEM_ACTOR): Promise<ClaimTarget | undefined> {
    let target: ClaimTarget | undefined;
    if (claim.state === 'released' || claim.state === 'expired' || claim.state === 'aborted') {
      const res = await this.deps.issues.endClaimedWork(
        { issueId: claim.issueId, claimId: claim._id, outcome: claim.state, actor, startBy: claim.startBy.toISOString() },
        this.system(),
      );
      target = res.target;
    }
    await this.deps.claims.clearSync(claim._id);
    return target;
  }

  private deferred(claim: ClaimRecord, err: unknown): undefined {
    this.deps.logger.warn({ err, claimId: claim._id }, 'claim end not yet applied to its task; the sweeper retries');
    return undefined;
  }

  /** Ends an active claim whose lease passed (and its task, if still under it). */
  async expire(claim: ClaimRecord, now: Date): Promise<ClaimRecord | null> {
    return this.endClaim(claim, {
      state: 'expired',
      reason: 'lease-expired',
      now,
      actor: SYSTEM_ACTOR,
      sync: true,
      where: { expiresAt: { $lte: now } },
    });
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
    const task = await this.systemTarget(claim.issueId);
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
  private async expireMirror(target: ClaimTarget, now: Date): Promise<void> {
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
      this.system(),
    );
  }

  // ---- claim ---------------------------------------------------------------------------------

  async claim(ctx: CallContext, rawIssueId: string, rawKey: string | undefined): Promise<ClaimResult> {
    const agent = requireAgent(ctx.principal, CLAIM_SCOPES);
    const issueId = validateId(rawIssueId, 'issueId');
    if (rawKey === undefined) return this.claimOnce(ctx, agent, issueId);
    const key = validateIdempotencyKey(rawKey);
    const { idempotency } = this.deps;
    const begun = await idempotency.begin(agent.keyId, key, requestHash({ issueId }), this.deps.clock(), this.deps.idempotencyLeaseMs);
    switch (begun.kind) {
      case 'mismatch':
        throw invalidInput('idempotency-key', 'This idempotency key was used with another request body; use a new key for a new request');
      case 'in-flight':
        throw inFlight();
      case 'replay':
        return replay(begun.answer);
      case 'takeover': {
        // The first request's process died or gave up. If it got as far as the claim, finish it and answer with it.
        let granted: ClaimResult | undefined;
        try {
          granted = begun.claimId ? await this.finishTakenOver(begun.claimId, agent) : undefined;
        } catch (err) {
          // Not decided yet (its start may still land): the next retry looks again.
          await idempotency.release(begun.id, begun.owner, this.deps.clock()).catch(() => undefined);
          throw err;
        }
        if (granted) {
          await idempotency.finish(begun.id, begun.owner, { ok: true, result: granted as unknown as Record<string, unknown> });
          return granted;
        }
        break;
      }
      case 'new':
        break;
    }
    let noted = false;
    try {
      const result = await this.claimOnce(ctx, agent, issueId, async (claimId) => {
        // A retry took the key over (this request outlived its lease): it decides, not this one.
        if (!(await idempotency.noteClaim(begun.id, begun.owner, claimId))) throw inFlight();
        noted = true;
      });
      await idempotency.finish(begun.id, begun.owner, { ok: true, result: result as unknown as Record<string, unknown> });
      return result;
    } catch (err) {
      // A failpoint stands for the process dying here: leave the record as a crash would.
      if (err instanceof FailpointError) throw err;
      if (err instanceof ServiceError && REPLAYABLE.has(err.code)) {
        await idempotency.finish(begun.id, begun.owner, { ok: false, error: { code: err.code, message: err.message, details: { ...err.details } } });
      } else if (noted) {
        // It took a claim: a retry must look at that claim (whose start may still land), not run blind.
        await idempotency.release(begun.id, begun.owner, this.deps.clock()).catch(() => undefined);
      } else {
        await idempotency.abandon(begun.id, begun.owner).catch(() => undefined);
      }
      throw err;
    }
  }

  /**
   * The claim a dead request with this idempotency key inserted: answered (started), or started
   * in the issues service but not yet marked (the process died in between), it is finished and
   * answered now. A start that may still land (before its deadline) keeps the key in flight; one
   * that can no longer land is ended, and the request runs again.
   */
  private async finishTakenOver(claimId: string, agent: AgentCaller): Promise<ClaimResult | undefined> {
    const { claims, clock } = this.deps;
    let claim = await claims.get(claimId);
    if (!claim || claim.agentId !== agent.agentId) return undefined;
    if (claim.state !== 'active') {
      // Granted, then ended (released, expired, completed): that was the answer; no second claim, no second run.
      if (claim.started) return this.grantedAnswer(claim, agent, (await this.systemTarget(claim.issueId))?.status ?? 'unknown');
      // Ended before it started, but the end has not reached the task yet: until it has (and its
      // tombstone holds a late start off), the start may still land there.
      if (claim.syncPending) throw inFlight();
      return undefined;
    }
    if (!claim.started) {
      const target = await this.systemTarget(claim.issueId);
      if (target?.status === 'in-progress' && target.claim?.claimId === claim._id) {
        claim = await claims.markStarted(claim._id, target.claim.fencingToken, clock(), actorOf(agent.principal));
        if (!claim) return undefined;
      } else {
        const cutoff = new Date(clock().getTime() - START_REPAIR_MARGIN_MS);
        if (claim.startBy > cutoff) throw inFlight();
        await this.abortStart(claim, 'start-failed', { startBy: { $lte: cutoff } });
        return undefined;
      }
    }
    return this.grantedAnswer(claim, agent, 'in-progress');
  }

  /** The answer to a request whose claim was granted (found again by a retry that took its key over). */
  private async grantedAnswer(claim: ClaimRecord, agent: AgentCaller, status: string): Promise<ClaimResult> {
    const { clock } = this.deps;
    const used = await this.deps.meter.used(claim.workspaceId, 'agent-runs');
    const access = await this.workspaceAccess(agent.principal, claim.workspaceId);
    return {
      claim: claimView(claim, clock()),
      issue: { id: claim.issueId, status },
      metering: {
        allowed: true,
        kind: 'agent-runs',
        used,
        limit: PLANS[access.planId].quotas['agent-runs'],
        period: claim.meteredPeriod ?? quotaPeriod(claim.createdAt),
        resetsAt: quotaResetsAt(claim.createdAt).toISOString(),
      },
      replayed: false,
    };
  }

  private workspaceAccess(principal: Principal, workspaceId: string) {
    return authorizeWorkspace(this.deps.access, { principal }, workspaceId, { action: 'write-tasks', scope: 'agents:execute' });
  }

  private async claimOnce(
    ctx: CallContext,
    agent: AgentCaller,
    issueId: string,
    noteClaim?: (claimId: string) => Promise<void>,
  ): Promise<ClaimResult> {
    const { claims, issues, clock } = this.deps;
    // Task visible (404), then its own state, in the order of DECISIONS §7.
    let target = await this.target(issueId, this.asCaller(ctx));
    const checkedAt = clock();
    if (target.claim && Date.parse(target.claim.expiresAt) <= checkedAt.getTime()) {
      await this.expireMirror(target, checkedAt);
      target = await this.target(issueId, this.asCaller(ctx));
    }
    const refusal = claimRefusal(target, agent.agentId, checkedAt);
    if (refusal) throw refusal;

    // Active claims of the task and of the agent (expiry decided by `expiresAt`, here and now).
    const [onIssue, mine] = await Promise.all([claims.activeForIssue(issueId), claims.activeForAgent(agent.workspaceId, agent.agentId)]);
    if (onIssue) {
      if (onIssue.expiresAt > checkedAt) {
        throw conflict('active-claim', onIssue.agentId === agent.agentId ? 'This agent already holds the active claim on this issue' : 'Another agent holds the active claim on this issue');
      }
      await this.expire(onIssue, checkedAt);
    }
    if (mine && mine._id !== onIssue?._id) {
      if (mine.expiresAt <= checkedAt) await this.expire(mine, checkedAt);
      else if (!mine.started) throw conflict('agent-busy', `This agent is already claiming ${mine.issueId}; an agent holds one claim at a time`);
      else if (await this.reconcile(mine, checkedAt)) {
        throw conflict('agent-busy', `This agent already holds a claim (on ${mine.issueId}); finish or release it first`);
      }
    }

    // The race: one insert against the partial unique indexes decides it.
    const leaseSeconds = await this.deps.policies.leaseSeconds(agent.workspaceId);
    const now = clock();
    const record: ClaimRecord = {
      _id: newId('clm'),
      workspaceId: agent.workspaceId,
      issueId,
      agentId: agent.agentId,
      keyId: agent.keyId,
      state: 'active',
      started: false,
      fencingToken: 0,
      leaseSeconds,
      expiresAt: addSeconds(now, leaseSeconds),
      startBy: new Date(now.getTime() + this.deps.startTimeoutMs),
      createdAt: now,
    };
    // The idempotency record learns the claim's id first: a retry after a crash anywhere from
    // here on finds the claim (or learns it never existed) instead of tripping over it.
    await noteClaim?.(record._id);
    const inserted = await claims.insert(record);
    if (!inserted.ok) {
      throw inserted.conflict === 'issue'
        ? conflict('active-claim', 'Another claim on this issue is active')
        : conflict('agent-busy', 'This agent already holds a claim; an agent holds one claim at a time');
    }
    failpoint('claims.after-insert');

    // From here on the claim exists: any failure ends it (and gives back its run).
    let decision: MeterDecision;
    try {
      const access = await this.workspaceAccess(ctx.principal, agent.workspaceId);
      decision = await claims.meter(record, this.deps.meter, PLANS[access.planId].quotas['agent-runs'], now);
    } catch (err) {
      await this.abortStart(record, 'start-failed').catch((e: unknown) => this.deferred(record, e));
      throw err instanceof ClaimGoneError ? new ServiceError('unavailable', 'The claim could not be completed; claim again') : err;
    }
    if (!decision.allowed) {
      await claims.discard(record._id);
      throw quotaExceeded('agent-runs', decision);
    }

    let started: ClaimTarget | undefined;
    try {
      const res = await issues.startClaimedWork(
        {
          issueId,
          claimId: record._id,
          agentId: agent.agentId,
          expiresAt: record.expiresAt.toISOString(),
          startBy: record.startBy.toISOString(),
          actor: actorOf(ctx.principal),
        },
        { principal: SYSTEM_PRINCIPAL, deadline: ctx.deadline },
      );
      started = res.target;
    } catch (err) {
      await this.abortStart(record, 'start-failed').catch((e: unknown) => this.deferred(record, e));
      // The issues service refuses a start it can no longer make (the task changed meanwhile).
      if (err instanceof ServiceError && err.details.reason === 'stale-claim') throw new ServiceError('unavailable', 'The claim could not be completed in time; claim again');
      throw err;
    }
    failpoint('claims.after-start');
    const fencingToken = started?.claim?.fencingToken ?? 0;
    const claimed = fencingToken > 0 ? await claims.markStarted(record._id, fencingToken, clock(), actorOf(ctx.principal)) : null;
    if (!claimed) {
      await this.abortStart(record, 'start-failed').catch((e: unknown) => this.deferred(record, e));
      throw new ServiceError('unavailable', 'The claim could not be completed in time; claim again');
    }
    return {
      claim: claimView(claimed, clock()),
      issue: { id: issueId, status: started?.status ?? 'in-progress' },
      metering: meteringView(decision),
      replayed: false,
    };
  }

  // ---- renew, status, release ------------------------------------------------------------------

  /** The caller's answered, unexpired claim on the task (409 stale-claim otherwise). */
  private async heldClaim(agent: AgentCaller, issueId: string, fencingToken: number | undefined, now: Date): Promise<ClaimRecord> {
    const claim = await this.deps.claims.activeForIssue(issueId);
    if (!claim || !claim.started || claim.agentId !== agent.agentId || claim.workspaceId !== agent.workspaceId) throw staleClaim();
    if (fencingToken !== undefined && fencingToken !== claim.fencingToken) {
      throw staleClaim(`Fencing token ${fencingToken} is stale: the current claim's token is ${claim.fencingToken}`);
    }
    if (claim.expiresAt <= now) {
      await this.expire(claim, now);
      throw staleClaim(`Your claim expired at ${claim.expiresAt.toISOString()}; claim the issue again if it is ready`);
    }
    return claim;
  }

  /** Heartbeat (`via: heartbeat`) or status post (with `message`): the lease starts again from now. */
  async renew(
    ctx: CallContext,
    rawIssueId: string,
    rawToken: number | undefined,
    message?: string,
  ): Promise<{ claim: ClaimView; issue: { id: string; status: string }; note?: { id: string; body: string; createdAt: string } }> {
    const agent = requireAgent(ctx.principal, CLAIM_SCOPES);
    const issueId = validateId(rawIssueId, 'issueId');
    const fencingToken = validateFencingToken(rawToken);
    const body = message === undefined ? undefined : validateStatusMessage(message);
    await this.target(issueId, this.asCaller(ctx));
    const now = this.deps.clock();
    const claim = await this.heldClaim(agent, issueId, fencingToken, now);
    const leaseSeconds = await this.deps.policies.leaseSeconds(agent.workspaceId);
    const expiresAt = addSeconds(now, leaseSeconds);
    const actor = actorOf(ctx.principal);
    const via = body === undefined ? 'heartbeat' : 'status-post';
    // The claim first, then the task's mirror: the mirror never outlives the claim. The mirror
    // takes the expiry only from a renewal newer than its own (renewals may arrive out of order),
    // and takes it as it is, so a lowered lease lowers it too.
    const renewed = await this.deps.claims.renew(claim._id, expiresAt, leaseSeconds, now);
    if (!renewed) throw staleClaim();
    const renewal = renewed.renewals ?? 1;
    try {
      if (body === undefined) {
        const res = await this.deps.issues.renewClaimedWork(
          { issueId, claimId: claim._id, expiresAt: expiresAt.toISOString(), renewal },
          { principal: SYSTEM_PRINCIPAL, deadline: ctx.deadline },
        );
        // The event only for a renewal both sides applied.
        await this.deps.claims.noteRenewed(renewed, actor, via);
        return { claim: claimView(renewed, now), issue: { id: issueId, status: res.target?.status ?? 'in-progress' } };
      }
      const res = await this.deps.issues.postClaimStatus(
        { issueId, claimId: claim._id, message: body, expiresAt: expiresAt.toISOString(), actor, renewal },
        { principal: SYSTEM_PRINCIPAL, deadline: ctx.deadline },
      );
      await this.deps.claims.noteRenewed(renewed, actor, via);
      return {
        claim: claimView(renewed, now),
        issue: { id: issueId, status: res.target?.status ?? 'in-progress' },
        note: { id: res.comment?.id ?? '', body: res.comment?.body ?? body, createdAt: res.comment?.createdAt ?? now.toISOString() },
      };
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'work-already-claimed') {
        // The task is no longer under this claim (its mirror expired, or it moved on).
        await this.reconcile(renewed, this.deps.clock()).catch((e: unknown) => this.deferred(renewed, e));
        throw staleClaim();
      }
      throw err;
    }
  }

  /** Releases (cancels) the active claim on a task: the holding agent, or a member (or higher). */
  async release(ctx: CallContext, rawIssueId: string, rawToken: number | undefined): Promise<{ claim: ClaimView; issue: { id: string; status: string } }> {
    const principal = ctx.principal;
    if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
    const agent = principal.type === 'api-key' ? requireAgent(principal, CLAIM_SCOPES) : undefined;
    const issueId = validateId(rawIssueId, 'issueId');
    const fencingToken = validateFencingToken(rawToken);
    const target = await this.target(issueId, this.asCaller(ctx));
    if (!agent) await authorizeWorkspace(this.deps.access, { principal }, target.workspaceId, { action: 'write-tasks', scope: 'issues:write' });
    const now = this.deps.clock();
    let claim: ClaimRecord;
    const active = await this.deps.claims.activeForIssue(issueId);
    if (agent) {
      // Another agent's unexpired claim, starting or answered, is not this agent's to release.
      if (active && active.agentId !== agent.agentId && active.expiresAt > now) {
        throw conflict('active-claim', 'Another agent holds the active claim on this issue; only it or a workspace member may release it');
      }
      claim = await this.heldClaim(agent, issueId, fencingToken, now);
    } else {
      if (!active || !active.started) throw staleClaim('No active claim on this issue');
      if (fencingToken !== undefined && fencingToken !== active.fencingToken) {
        throw staleClaim(`Fencing token ${fencingToken} is stale: the current claim's token is ${active.fencingToken}`);
      }
      if (active.expiresAt <= now) {
        // Past its lease it is expired, swept or not: it ends as expired, not as released.
        await this.expire(active, now);
        throw staleClaim(`The claim expired at ${active.expiresAt.toISOString()}; there is nothing to release`);
      }
      claim = active;
    }
    const actor = actorOf(principal);
    const ended = await this.deps.claims.end(claim._id, {
      state: 'released',
      reason: agent ? 'released-by-agent' : 'released-by-member',
      now,
      actor,
      sync: true,
      where: { started: true, expiresAt: { $gt: now } },
    });
    if (!ended) {
      const current = await this.deps.claims.get(claim._id);
      if (current?.state === 'active' && current.expiresAt <= now) await this.expire(current, now);
      throw staleClaim('The claim ended or expired meanwhile');
    }
    const after = await this.syncEnd(ended, actor).catch((err: unknown) => this.deferred(ended, err));
    return { claim: claimView(ended, now), issue: { id: issueId, status: after?.status ?? target.status } };
  }

  // ---- ready work ------------------------------------------------------------------------------

  async readyWork(ctx: CallContext, limit: number | undefined, cursor: string | undefined): Promise<ReadyWork> {
    const agent = requireAgent(ctx.principal, READ_SCOPES);
    const access = await authorizeWorkspace(this.deps.access, ctx, agent.workspaceId, { action: 'read', scope: 'agents:read' });
    const now = this.deps.clock();
    // Tasks whose claim is still starting are not claimable; the issues service counts those in this agent's queue.
    const startingIssueIds = await this.deps.claims.startingIssueIds(agent.workspaceId, MAX_STARTING);
    const [page, used, held] = await Promise.all([
      this.deps.issues.listReadyTasks({ workspaceId: agent.workspaceId, agentId: agent.agentId, limit, cursor, startingIssueIds }, callOptionsFrom(ctx)),
      this.deps.meter.used(agent.workspaceId, 'agent-runs', now),
      this.deps.claims.activeForAgent(agent.workspaceId, agent.agentId),
    ]);
    const runLimit = PLANS[access.planId].quotas['agent-runs'];
    const exhausted = runLimit !== null && used >= runLimit;
    const quotaState: QuotaState = exhausted ? 'run-budget-exhausted' : 'within-run-budget';
    const resetsAt = quotaResetsAt(now).toISOString();
    const mine = held && held.expiresAt > now ? held : undefined;
    const claimsOnPage = await this.deps.claims.activeOn(page.tasks.map((t) => t.task?.id ?? ''));
    const claimedIds = new Set(claimsOnPage.filter((c) => c.expiresAt > now && c._id !== mine?._id).map((c) => c.issueId));
    const items: ReadyItem[] = [];
    const evidenceOf = (t: Task) => ({ completed: t.acceptanceChecks.filter((c) => c.done).length, total: t.acceptanceChecks.length });
    if (!cursor && page.held && mine && page.heldClaim?.claimId === mine._id) {
      const view = queueView({
        openDependencyCount: page.held.openDependencyCount,
        claimedByOther: false,
        heldByYou: true,
        heldExpiresAt: mine.expiresAt.toISOString(),
        quotaState,
        resetsAt,
        needsBrief: page.held.agent?.readiness === 'needs-brief',
      });
      items.push({ task: page.held, rank: 0, quotaState, doneEvidence: evidenceOf(page.held), claim: claimView(mine, now), ...view });
    }
    for (const entry of page.tasks) {
      const task = entry.task;
      if (!task) continue;
      const view = queueView({
        openDependencyCount: task.openDependencyCount,
        claimedByOther: claimedIds.has(task.id),
        heldByYou: false,
        ...(mine ? { busyWith: mine.issueId } : {}),
        quotaState,
        resetsAt,
        needsBrief: task.agent?.readiness === 'needs-brief',
      });
      items.push({ task, rank: entry.rank, quotaState, doneEvidence: evidenceOf(task), ...view });
    }
    return {
      items,
      summary: {
        total: page.total,
        claimable: Math.max(0, page.total - page.blocked - page.starting),
        blocked: page.blocked,
        heldByYou: mine ? 1 : 0,
        quotaState,
      },
      ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
      metering: { allowed: !exhausted, kind: 'agent-runs', used, limit: runLimit, period: quotaPeriod(now), resetsAt },
    };
  }

  // ---- listing and policy ------------------------------------------------------------------------

  async listClaims(
    ctx: CallContext,
    request: { workspaceId?: string; issueId?: string; agentId?: string; states: readonly string[]; limit?: number; cursor?: string },
  ): Promise<{ claims: ClaimView[]; nextCursor?: string }> {
    const principal = ctx.principal;
    let workspaceId = request.workspaceId ? validateId(request.workspaceId, 'workspaceId') : undefined;
    if (principal.type === 'api-key') {
      requireAgent(principal, READ_SCOPES);
      workspaceId ??= principal.workspaceId;
    }
    if (!workspaceId) throw invalidInput('workspaceId', "'workspaceId' is required");
    await authorizeWorkspace(this.deps.access, ctx, workspaceId, { action: 'read', scope: 'agents:read' });
    const states = request.states.map((s) => {
      if (!(PUBLIC_STATES as readonly string[]).includes(s)) throw invalidInput('state', `'state' must be one of ${PUBLIC_STATES.join(', ')}`);
      return s as PublicState;
    });
    const limit = request.limit ?? 200;
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw invalidInput('limit', "'limit' must be an integer from 1 to 200");
    const before = request.cursor ? decodeClaimCursor(request.cursor) : undefined;
    const now = this.deps.clock();
    const filter: Record<string, unknown> = { workspaceId, $or: storedFilterOf(states.length > 0 ? states : ['starting', 'active'], now) };
    if (request.issueId) filter.issueId = validateId(request.issueId, 'issueId');
    if (request.agentId) filter.agentId = validateAgentId(request.agentId);
    const rows = await this.deps.claims.list(filter, limit + 1, before);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { claims: page.map((c) => claimView(c, now)), ...(rows.length > limit && last ? { nextCursor: Buffer.from(last._id, 'utf8').toString('base64url') } : {}) };
  }

  async getPolicy(ctx: CallContext, rawWorkspaceId: string): Promise<ClaimPolicy> {
    const workspaceId = validateId(rawWorkspaceId, 'workspaceId');
    await authorizeWorkspace(this.deps.access, ctx, workspaceId, { action: 'read', scope: 'agents:read' });
    return this.deps.policies.get(workspaceId);
  }

  async setPolicy(ctx: CallContext, rawWorkspaceId: string, leaseSeconds: number | undefined): Promise<ClaimPolicy> {
    const workspaceId = validateId(rawWorkspaceId, 'workspaceId');
    const lease = leaseSeconds === undefined ? null : validateLeaseSeconds(leaseSeconds);
    await authorizeWorkspace(this.deps.access, ctx, workspaceId, { action: 'manage', scope: 'admin' });
    return this.deps.policies.set(workspaceId, lease, actorOf(ctx.principal).id, this.deps.clock());
  }

  // ---- events ----------------------------------------------------------------------------------

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

  // ---- sweeping --------------------------------------------------------------------------------

  /**
   * One sweep (see sweeper.ts); returns what it did, for logs and tests. Each step runs even when
   * another failed (the first failure is rethrown at the end): a task service that cannot be
   * reached must not hold up, say, the claims whose lease passed.
   */
  async sweep(options: { reconcile: boolean; batch?: number; budgetMs?: number }): Promise<{ expired: number; released: number; repaired: number; synced: number; reconciled: number }> {
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
          if (await this.expire(claim, clock())) changed += 1;
        }
        out.expired += changed;
        if (!again(due.length, changed)) break;
      }
    });
    // 2. Tasks whose mirrored lease passed go back to ready (whatever the claims store says).
    await step(async () => {
      for (;;) {
        const released = await this.deps.issues.releaseExpiredClaims({ limit: batch }, this.system());
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
          if (await this.abortStart(claim, 'start-failed', { startBy: { $lte: cutoff } })) changed += 1;
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
          await this.syncEnd(claim);
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
    if (failures.length > 0) throw failures[0];
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
      const page = await this.deps.issues.listClaimedTasks({ after, limit: batch }, this.system());
      const known = new Map((await claims.getMany(page.tasks.map((t) => t.claim?.claimId ?? ''))).map((c) => [c._id, c]));
      for (const t of page.tasks) {
        const mirror = t.claim;
        if (!mirror) continue;
        const claim = known.get(mirror.claimId);
        if (claim?.state === 'active') continue;
        const outcome = claim?.state === 'expired' ? 'expired' : claim?.state === 'released' ? 'released' : 'aborted';
        const res = await this.deps.issues.endClaimedWork(
          { issueId: t.issueId, claimId: mirror.claimId, outcome, actor: SYSTEM_ACTOR, ...(claim ? { startBy: claim.startBy.toISOString() } : {}) },
          this.system(),
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
      for (const claim of page) if (!(await this.reconcile(claim, clock()))) fixed += 1;
      if (page.length < batch) break;
      cursor = page[page.length - 1]?._id;
    }
    return fixed;
  }
}

/** The stored first answer again; a refusal says it is a replay in `details.replayed` (the gateway's `idempotent-replayed` header). */
function replay(answer: StoredAnswer): ClaimResult {
  if (answer.ok) return { ...(answer.result as unknown as ClaimResult), replayed: true };
  const details = { ...answer.error.details, replayed: true } as ServiceError['details'];
  throw new ServiceError(answer.error.code as ServiceError['code'], answer.error.message, details);
}

function inFlight(): ServiceError {
  return conflict('idempotency-in-flight', 'A request with this idempotency key is still being processed; retry shortly');
}

function decodeClaimCursor(cursor: string): string {
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[A-Za-z0-9_:.-]{1,64}$/.test(decoded)) throw invalidInput('cursor', "'cursor' is not a valid cursor");
  return decoded;
}
