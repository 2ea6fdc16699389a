/** The gRPC handlers of planning.claims.v1.ClaimService: decode → ClaimsCore → encode. */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { ClaimService, type ClaimPolicySchema, type ClaimSchema, type MeteringSchema } from '@planning/proto/planning/claims/v1/claims_pb';
import { ServiceError } from '@planning/errors';
import type { ServiceImplementation } from '@planning/rpc';
import { recordClaimRefused, recordClaimStarted } from '@planning/telemetry';
import type { ClaimsCore, ClaimView, MeteringView } from '../claims-core.js';
import type { ClaimPolicy } from '../store/policies.js';

export { ClaimService };

export function toClaimMessage(c: ClaimView): MessageInitShape<typeof ClaimSchema> {
  return { ...c };
}

function toMeteringMessage(m: MeteringView): MessageInitShape<typeof MeteringSchema> {
  return { allowed: m.allowed, kind: m.kind, used: m.used, ...(m.limit !== null ? { limit: m.limit } : {}), period: m.period, resetsAt: m.resetsAt };
}

function toPolicyMessage(p: ClaimPolicy): MessageInitShape<typeof ClaimPolicySchema> {
  return {
    workspaceId: p.workspaceId,
    leaseSeconds: p.leaseSeconds,
    defaultLeaseSeconds: p.defaultLeaseSeconds,
    custom: p.custom,
    ...(p.updatedAt ? { updatedAt: p.updatedAt.toISOString() } : {}),
  };
}

export function createClaimService(core: ClaimsCore): ServiceImplementation<typeof ClaimService> {
  return {
    async listReadyWork(request, ctx) {
      const work = await core.readyWork(ctx, request.limit, request.cursor);
      return {
        items: work.items.map((i) => ({
          id: i.task.id,
          workspaceId: i.task.workspaceId,
          projectId: i.task.projectId,
          title: i.task.title,
          status: i.task.status,
          priority: i.task.priority,
          labels: i.task.labels,
          dueDate: i.task.dueDate,
          createdAt: i.task.createdAt,
          assignedAgentId: i.task.agent?.assignedAgentId,
          readiness: i.task.agent?.readiness ?? 'not-ready',
          openDependencyCount: i.task.openDependencyCount,
          rank: i.rank,
          agentClaimQueue: {
            state: i.state,
            quotaState: i.quotaState,
            nextAction: i.nextAction,
            doneEvidence: i.doneEvidence,
            ...(i.whyNotClaimable ? { whyNotClaimable: i.whyNotClaimable } : {}),
          },
          ...(i.claim ? { claim: toClaimMessage(i.claim) } : {}),
          approvals: i.approvals,
        })),
        queueSummary: work.summary,
        claimQueue: work.items.map((i) => ({ issueId: i.task.id, rank: i.rank, state: i.state })),
        nextCursor: work.nextCursor,
        metering: toMeteringMessage(work.metering),
      };
    },

    async claimWork(request, ctx) {
      const result = await core.claim(ctx, request.issueId, request.idempotencyKey).catch((err: unknown) => {
        // A refusal answers the agent (conflict, quota, bad input); a failure does not.
        if (err instanceof ServiceError && err.code !== 'internal' && err.code !== 'unavailable') {
          recordClaimRefused(typeof err.details.reason === 'string' ? err.details.reason : err.code);
        }
        throw err;
      });
      if (!result.replayed) recordClaimStarted();
      return {
        claim: toClaimMessage(result.claim),
        issue: result.issue,
        metering: toMeteringMessage(result.metering),
        replayed: result.replayed,
      };
    },

    async renewClaim(request, ctx) {
      const result = await core.renew(ctx, request.issueId, request.fencingToken);
      return { claim: toClaimMessage(result.claim), issue: result.issue };
    },

    async postStatus(request, ctx) {
      const result = await core.renew(ctx, request.issueId, request.fencingToken, request.message);
      return { claim: toClaimMessage(result.claim), issue: result.issue, note: result.note };
    },

    async releaseClaim(request, ctx) {
      const result = await core.release(ctx, request.issueId, request.fencingToken);
      return { claim: toClaimMessage(result.claim), issue: result.issue };
    },

    async listClaims(request, ctx) {
      const result = await core.listClaims(ctx, {
        ...(request.workspaceId !== undefined ? { workspaceId: request.workspaceId } : {}),
        ...(request.issueId !== undefined ? { issueId: request.issueId } : {}),
        ...(request.agentId !== undefined ? { agentId: request.agentId } : {}),
        states: request.states,
        ...(request.limit !== undefined ? { limit: request.limit } : {}),
        ...(request.cursor !== undefined ? { cursor: request.cursor } : {}),
      });
      return { claims: result.claims.map(toClaimMessage), nextCursor: result.nextCursor };
    },

    async getClaimPolicy(request, ctx) {
      return { policy: toPolicyMessage(await core.getPolicy(ctx, request.workspaceId)) };
    },

    async checkTaskWrites(request, ctx) {
      const fences = await core.checkTaskWrites(ctx, {
        issueIds: request.issueIds,
        kind: request.kind,
        ...(request.fencingToken !== undefined ? { fencingToken: request.fencingToken } : {}),
      });
      return {
        fences: fences.map((f) => ({
          issueId: f.issueId,
          ...(f.claimId ? { claimId: f.claimId } : {}),
          ...(f.refusal ? { refusalReason: f.refusal.reason, refusalMessage: f.refusal.message } : {}),
        })),
      };
    },

    async setClaimPolicy(request, ctx) {
      return { policy: toPolicyMessage(await core.setPolicy(ctx, request.workspaceId, request.leaseSeconds)) };
    },
  };
}
