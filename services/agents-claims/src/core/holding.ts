/**
 * Holding a claim: renewing its lease (heartbeat or status post) and releasing it. Only the
 * holder's answered, unexpired claim renews; a claim past its lease ends as expired, swept or not.
 */
import { authorizeWorkspace } from '@planning/access';
import { conflict, ServiceError } from '@planning/errors';
import { SYSTEM_PRINCIPAL, type CallContext } from '@planning/rpc';
import { recordLeaseRemaining } from '@planning/telemetry';
import {
  actorOf,
  addSeconds,
  requireAgent,
  validateFencingToken,
  validateId,
  validateStatusMessage,
  type AgentCaller,
} from '../domain/claims.js';
import type { ClaimRecord } from '../store/claims.js';
import { asCaller, claimTarget, CLAIM_SCOPES, staleClaim, type CoreDeps } from './context.js';
import type { ClaimEnds } from './ending.js';
import { claimView, type ClaimView, type IssueRefView } from './views.js';

export class ClaimHolding {
  constructor(
    private readonly deps: CoreDeps,
    private readonly ends: ClaimEnds,
  ) {}

  /** The caller's answered, unexpired claim on the task (409 stale-claim otherwise). */
  private async heldClaim(
    agent: AgentCaller,
    issueId: string,
    fencingToken: number | undefined,
    now: Date,
    /** The task's active claim, when the caller has just read it. */
    active?: ClaimRecord | null,
  ): Promise<ClaimRecord> {
    const claim = active === undefined ? await this.deps.claims.activeForIssue(issueId) : active;
    if (!claim || !claim.started || claim.agentId !== agent.agentId || claim.workspaceId !== agent.workspaceId) throw staleClaim();
    if (fencingToken !== undefined && fencingToken !== claim.fencingToken) {
      throw staleClaim(`Fencing token ${fencingToken} is stale: the current claim's token is ${claim.fencingToken}`);
    }
    if (claim.expiresAt <= now) {
      await this.ends.expire(claim, now);
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
  ): Promise<{ claim: ClaimView; issue: IssueRefView; note?: { id: string; body: string; createdAt: string } }> {
    const agent = requireAgent(ctx.principal, CLAIM_SCOPES);
    const issueId = validateId(rawIssueId, 'issueId');
    const fencingToken = validateFencingToken(rawToken);
    const body = message === undefined ? undefined : validateStatusMessage(message);
    await claimTarget(this.deps.issues, issueId, asCaller(ctx));
    const now = this.deps.clock();
    const claim = await this.heldClaim(agent, issueId, fencingToken, now);
    recordLeaseRemaining((claim.expiresAt.getTime() - now.getTime()) / 1000, 'renew');
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
        return { claim: claimView(renewed, now), issue: { id: issueId, status: res.target?.status ?? 'in-progress', approvals: res.target?.approvals ?? [] } };
      }
      const res = await this.deps.issues.postClaimStatus(
        { issueId, claimId: claim._id, message: body, expiresAt: expiresAt.toISOString(), actor, renewal },
        { principal: SYSTEM_PRINCIPAL, deadline: ctx.deadline },
      );
      await this.deps.claims.noteRenewed(renewed, actor, via);
      return {
        claim: claimView(renewed, now),
        issue: { id: issueId, status: res.target?.status ?? 'in-progress', approvals: res.target?.approvals ?? [] },
        note: { id: res.comment?.id ?? '', body: res.comment?.body ?? body, createdAt: res.comment?.createdAt ?? now.toISOString() },
      };
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'work-already-claimed') {
        // The task is no longer under this claim (its mirror expired, or it moved on).
        await this.ends.reconcile(renewed, this.deps.clock()).catch((e: unknown) => this.ends.deferred(renewed, e));
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
    const target = await claimTarget(this.deps.issues, issueId, asCaller(ctx));
    if (!agent) await authorizeWorkspace(this.deps.access, { principal }, target.workspaceId, { action: 'write-tasks', scope: 'issues:write' });
    const now = this.deps.clock();
    let claim: ClaimRecord;
    const active = await this.deps.claims.activeForIssue(issueId);
    if (agent) {
      // Another agent's unexpired claim, starting or answered, is not this agent's to release.
      if (active && active.agentId !== agent.agentId && active.expiresAt > now) {
        throw conflict('active-claim', 'Another agent holds the active claim on this issue; only it or a workspace member may release it');
      }
      claim = await this.heldClaim(agent, issueId, fencingToken, now, active);
    } else {
      if (!active || !active.started) throw staleClaim('No active claim on this issue');
      if (fencingToken !== undefined && fencingToken !== active.fencingToken) {
        throw staleClaim(`Fencing token ${fencingToken} is stale: the current claim's token is ${active.fencingToken}`);
      }
      if (active.expiresAt <= now) {
        // Past its lease it is expired, swept or not: it ends as expired, not as released.
        await this.ends.expire(active, now);
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
      if (current?.state === 'active' && current.expiresAt <= now) await this.ends.expire(current, now);
      throw staleClaim('The claim ended or expired meanwhile');
    }
    recordLeaseRemaining((claim.expiresAt.getTime() - now.getTime()) / 1000, 'release');
    const after = await this.ends.syncEnd(ended, actor, { answerFirst: true }).catch((err: unknown) => this.ends.deferred(ended, err));
    return { claim: claimView(ended, now), issue: { id: issueId, status: after?.status ?? target.status } };
  }
}
