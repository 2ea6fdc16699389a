/**
 * Taking a claim. One insert against two partial unique indexes decides every race; each later
 * step (metering, the task's move to in-progress in the issues service, marking the claim
 * answered) is conditional, and any failure after the insert ends the claim again. With an
 * idempotency key, the first request owns its key record and a retry after its death finishes or
 * undoes the claim it left behind.
 */
import { authorizeWorkspace } from '@planning/access';
import { conflict, ServiceError } from '@planning/errors';
import { idempotencyInFlight, idempotencyMismatch, idempotencyRecordId, validateIdempotencyKey, type StoredAnswer } from '@planning/idempotency';
import { newId } from '@planning/ids';
import { quotaExceeded } from '@planning/metering';
import { isPlanId, PLANS, quotaPeriod, quotaResetsAt, type PlanId } from '@planning/plans';
import type { ClaimTarget } from '@planning/proto/planning/issues/v1/claim_support_pb';
import { SYSTEM_PRINCIPAL, type CallContext, type Principal } from '@planning/rpc';
import { failpoint, FailpointError } from '@planning/runtime/failpoints';
import {
  actorOf,
  addSeconds,
  claimRefusal,
  requestHash,
  requireAgent,
  validateId,
  START_REPAIR_MARGIN_MS,
  type AgentCaller,
} from '../domain/claims.js';
import type { ClaimRecord } from '../store/claims.js';
import { asCaller, claimTarget, CLAIM_SCOPES, systemTarget, type CoreDeps } from './context.js';
import type { ClaimEnds } from './ending.js';
import { claimView, meteringView, type ClaimResult } from './views.js';

/** Errors that answer the request itself and are replayed for its idempotency key. */
const REPLAYABLE = new Set(['invalid-input', 'forbidden', 'not-found', 'work-already-claimed', 'quota-exceeded']);

export class ClaimTaking {
  constructor(
    private readonly deps: CoreDeps,
    private readonly ends: ClaimEnds,
  ) {}

  async claim(ctx: CallContext, rawIssueId: string, rawKey: string | undefined): Promise<ClaimResult> {
    const agent = requireAgent(ctx.principal, CLAIM_SCOPES);
    const issueId = validateId(rawIssueId, 'issueId');
    if (rawKey === undefined) return this.claimOnce(ctx, agent, issueId);
    const key = validateIdempotencyKey(rawKey, { required: true });
    const { idempotency } = this.deps;
    const begun = await idempotency.begin({
      id: idempotencyRecordId(agent.keyId, key),
      kind: 'claim',
      requestHash: requestHash({ issueId }),
      now: this.deps.clock(),
      leaseMs: this.deps.idempotencyLeaseMs,
    });
    switch (begun.kind) {
      case 'mismatch':
        throw idempotencyMismatch();
      case 'in-flight':
        throw inFlight();
      case 'replay':
        return replay(begun.answer);
      case 'takeover': {
        // The first request's process died or gave up. If it got as far as the claim, finish it and answer with it.
        let granted: ClaimResult | undefined;
        try {
          const claimId = begun.progress.claimId;
          granted = claimId ? await this.finishTakenOver(claimId, agent) : undefined;
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
        if (!(await idempotency.note(begun.id, begun.owner, { claimId }))) throw inFlight();
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
      if (claim.started) return this.grantedAnswer(claim, agent, (await systemTarget(this.deps.issues, claim.issueId))?.status ?? 'unknown');
      // Ended before it started, but the end has not reached the task yet: until it has (and its
      // tombstone holds a late start off), the start may still land there.
      if (claim.syncPending) throw inFlight();
      return undefined;
    }
    if (!claim.started) {
      const target = await systemTarget(this.deps.issues, claim.issueId);
      if (target?.status === 'in-progress' && target.claim?.claimId === claim._id) {
        claim = await claims.markStarted(claim._id, target.claim.fencingToken, clock(), actorOf(agent.principal));
        if (!claim) return undefined;
      } else {
        const cutoff = new Date(clock().getTime() - START_REPAIR_MARGIN_MS);
        if (claim.startBy > cutoff) throw inFlight();
        await this.ends.abortStart(claim, 'start-failed', { startBy: { $lte: cutoff } });
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

  /**
   * The workspace's plan, for the agent-run quota. The claim's target was read as the caller, so
   * the issues service has already authorized the token in the task's workspace: what is left is
   * the plan. A token's principal carries it (`planId`, set by the gateway for this request from
   * the plan it admitted the request under, and signed with the principal over gRPC): then no
   * further call. Without one (another caller), the issues service is asked.
   */
  private async planOf(principal: Principal, workspaceId: string): Promise<PlanId> {
    if (principal.type === 'api-key' && principal.workspaceId === workspaceId && isPlanId(principal.planId)) return principal.planId;
    return (await this.workspaceAccess(principal, workspaceId)).planId;
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
    let target = await claimTarget(this.deps.issues, issueId, asCaller(ctx));
    const checkedAt = clock();
    if (target.claim && Date.parse(target.claim.expiresAt) <= checkedAt.getTime()) {
      await this.ends.expireMirror(target, checkedAt);
      target = await claimTarget(this.deps.issues, issueId, asCaller(ctx));
    }
    const refusal = claimRefusal(target, agent.agentId, checkedAt);
    if (refusal) throw refusal;

    // Active claims of the task and of the agent (expiry decided by `expiresAt`, here and now).
    const [onIssue, mine] = await Promise.all([claims.activeForIssue(issueId), claims.activeForAgent(agent.workspaceId, agent.agentId)]);
    if (onIssue) {
      if (onIssue.expiresAt > checkedAt) {
        throw conflict('active-claim', onIssue.agentId === agent.agentId ? 'This agent already holds the active claim on this issue' : 'Another agent holds the active claim on this issue');
      }
      await this.ends.expire(onIssue, checkedAt);
    }
    if (mine && mine._id !== onIssue?._id) {
      if (mine.expiresAt <= checkedAt) await this.ends.expire(mine, checkedAt);
      else if (!mine.started) throw conflict('agent-busy', `This agent is already claiming ${mine.issueId}; an agent holds one claim at a time`);
      else if (await this.ends.reconcile(mine, checkedAt)) {
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
    const runLimit = PLANS[await this.planOf(ctx.principal, agent.workspaceId)].quotas['agent-runs'];
    // The race and the agent run, in one transaction: the insert against the partial unique
    // indexes decides the race; the quota is asked only of the winner; denied, nothing is stored.
    const inserted = await claims.insertMetered(record, this.deps.meter, runLimit, now);
    if (!inserted.ok) {
      if (inserted.conflict === undefined) throw quotaExceeded('agent-runs', inserted.denied);
      throw inserted.conflict === 'issue'
        ? conflict('active-claim', 'Another claim on this issue is active')
        : conflict('agent-busy', 'This agent already holds a claim; an agent holds one claim at a time');
    }
    const decision = inserted.decision;
    failpoint('claims.after-insert');

    // From here on the claim exists: any failure ends it (and gives back its run).
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
      await this.ends.abortStart(record, 'start-failed').catch((e: unknown) => this.ends.deferred(record, e));
      // The issues service refuses a start it can no longer make (the task changed meanwhile).
      if (err instanceof ServiceError && err.details.reason === 'stale-claim') throw new ServiceError('unavailable', 'The claim could not be completed in time; claim again');
      throw err;
    }
    failpoint('claims.after-start');
    const fencingToken = started?.claim?.fencingToken ?? 0;
    const claimed = fencingToken > 0 ? await claims.markStarted(record._id, fencingToken, clock(), actorOf(ctx.principal)) : null;
    if (!claimed) {
      await this.ends.abortStart(record, 'start-failed').catch((e: unknown) => this.ends.deferred(record, e));
      throw new ServiceError('unavailable', 'The claim could not be completed in time; claim again');
    }
    return {
      claim: claimView(claimed, clock()),
      issue: { id: issueId, status: started?.status ?? 'in-progress' },
      metering: meteringView(decision),
      replayed: false,
    };
  }
}

/** The stored first answer again; a refusal says it is a replay in `details.replayed` (the gateway's `idempotent-replayed` header). */
function replay(answer: StoredAnswer): ClaimResult {
  if (answer.ok) return { ...(answer.result as unknown as ClaimResult), replayed: true };
  const details = { ...answer.error.details, replayed: true } as ServiceError['details'];
  throw new ServiceError(answer.error.code as ServiceError['code'], answer.error.message, details);
}

const inFlight = (): ServiceError => idempotencyInFlight();
