import type { MessageInitShape } from '@bufbuild/protobuf';
import { invalidInput, ServiceError } from '@planning/errors';
import {
  ClaimSupportService,
  type ClaimMirrorSchema,
  type ClaimTargetSchema,
} from '@planning/proto/planning/issues/v1/claim_support_pb';
import type { Actor as ActorMessage } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import { END_OUTCOMES, type ClaimMirror } from '../domain/claims.js';
import { LIMITS, validateEnum, validateId, validateText, validateTimestamp } from '../domain/fields.js';
import { validateAgentId } from '../domain/tasks.js';
import type { ClaimSupportRepository } from '../store/claim-support.js';
import type { Actor, TaskRecord } from '../store/task-documents.js';
import type { TaskRepository } from '../store/tasks.js';
import type { WorkspaceRecord } from '../store/workspaces.js';
import { pageLimit } from './cursor.js';
import type { PlanningAccess } from './planning-access.js';
import { doneStatuses } from './done-status.js';
import { approvalGateMessages, toCommentMessage, toTaskMessage } from './task-messages.js';
import { workspaceReadFor } from './workspace-service.js';

export { ClaimSupportService };

export interface ClaimSupportDeps {
  repo: ClaimSupportRepository;
  /** For the done status of ready and held tasks. */
  tasks: Pick<TaskRepository, 'doneFacts' | 'donePolicy'>;
  access: PlanningAccess;
  clock: () => Date;
}

/** Only the agents-claims service changes tasks on behalf of claims (DECISIONS §7). */
function requireService(ctx: CallContext): void {
  const principal = ctx.principal;
  if (principal.type === 'system') return;
  if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
  throw new ServiceError('forbidden', 'Only the agents-claims service may do this', { reason: 'service-only' });
}

function mirrorMessage(claim: ClaimMirror | undefined): MessageInitShape<typeof ClaimMirrorSchema> | undefined {
  return claim ? { claimId: claim.claimId, agentId: claim.agentId, fencingToken: claim.fencingToken, expiresAt: claim.expiresAt } : undefined;
}

export function toClaimTarget(task: TaskRecord, now?: Date): MessageInitShape<typeof ClaimTargetSchema> {
  return {
    issueId: task._id,
    workspaceId: task.workspaceId,
    status: task.status,
    assignedAgentId: task.agent.assignedAgentId,
    openDependencyCount: task.openDependencyCount,
    version: task.version,
    claim: mirrorMessage(task.claim),
    lastFencingToken: task.lastFencingToken ?? 0,
    approvals: approvalGateMessages(task.approvalGates, now),
    ...(task.lastClaimEnd ? { lastClaimEnd: { claimId: task.lastClaimEnd.claimId, end: task.lastClaimEnd.end } } : {}),
  };
}

function actorOf(actor: ActorMessage | undefined): Actor {
  if (!actor || !actor.type || !actor.id) throw invalidInput('actor', "'actor' is required");
  return { type: actor.type, id: actor.id };
}

/** Starting claims a ready-queue call may name (they last moments; more is a bug). */
const MAX_STARTING = 1_000;

/** A claim's renewal count (1 for its first renewal). */
function validateRenewal(value: number): number {
  if (!Number.isInteger(value) || value < 1) throw invalidInput('renewal', "'renewal' must be a positive integer");
  return value;
}

const ACCESS_FOR_CLAIMS = { action: 'read', scope: 'agents:execute' } as const;
const READ_QUEUE = { action: 'read', scope: 'agents:read' } as const;

/** Queue cursors carry the last queue key and its rank, so ranks continue across pages. */
function encodeQueueCursor(after: string, rank: number): string {
  return Buffer.from(JSON.stringify([after, rank]), 'utf8').toString('base64url');
}

function decodeQueueCursor(raw: string | undefined): { key: string; rank: number } | undefined {
  if (raw === undefined || raw === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw invalidInput('cursor', "'cursor' is not a valid cursor");
  }
  if (!Array.isArray(parsed) || typeof parsed[0] !== 'string' || parsed[0].length > 500 || !Number.isInteger(parsed[1]) || (parsed[1] as number) < 0) {
    throw invalidInput('cursor', "'cursor' is not a valid cursor");
  }
  return { key: parsed[0], rank: parsed[1] as number };
}

export function createClaimSupportService(deps: ClaimSupportDeps): ServiceImplementation<typeof ClaimSupportService> {
  const { repo, access } = deps;

  return {
    async getClaimTarget(request, ctx) {
      const task = await repo.get(validateId(request.issueId, 'issueId'));
      if (!task) throw new ServiceError('not-found', 'Issue not found');
      if (ctx.principal.type !== 'system') await access.record(ctx, 'Issue', task.workspaceId, ACCESS_FOR_CLAIMS);
      return { target: toClaimTarget(task, deps.clock()) };
    },

    async startClaimedWork(request, ctx) {
      requireService(ctx);
      const task = await repo.start({
        issueId: validateId(request.issueId, 'issueId'),
        claimId: validateId(request.claimId, 'claimId'),
        agentId: validateAgentId(request.agentId, 'agentId'),
        expiresAt: validateTimestamp(request.expiresAt, 'expiresAt'),
        startBy: validateTimestamp(request.startBy, 'startBy'),
        actor: actorOf(request.actor),
        clock: deps.clock,
      });
      return { target: toClaimTarget(task, deps.clock()) };
    },

    async renewClaimedWork(request, ctx) {
      requireService(ctx);
      const task = await repo.renew(
        validateId(request.issueId, 'issueId'),
        validateId(request.claimId, 'claimId'),
        validateTimestamp(request.expiresAt, 'expiresAt'),
        validateRenewal(request.renewal),
        deps.clock(),
      );
      return { target: toClaimTarget(task, deps.clock()) };
    },

    async endClaimedWork(request, ctx) {
      requireService(ctx);
      const result = await repo.end(
        validateId(request.issueId, 'issueId'),
        validateId(request.claimId, 'claimId'),
        validateEnum(request.outcome, END_OUTCOMES, 'outcome'),
        actorOf(request.actor),
        deps.clock(),
        {
          ...(request.startBy ? { startBy: validateTimestamp(request.startBy, 'startBy') } : {}),
          ...(request.onlyIfExpired ? { onlyIfExpired: true } : {}),
        },
      );
      return { ended: result.ended, target: result.task ? toClaimTarget(result.task, deps.clock()) : undefined };
    },

    async postClaimStatus(request, ctx) {
      requireService(ctx);
      const body = validateText(request.message, 'message', LIMITS.comment, { required: true });
      const result = await repo.postStatus(
        validateId(request.issueId, 'issueId'),
        validateId(request.claimId, 'claimId'),
        body,
        validateTimestamp(request.expiresAt, 'expiresAt'),
        validateRenewal(request.renewal),
        actorOf(request.actor),
        deps.clock(),
      );
      return { comment: toCommentMessage(result.comment), target: toClaimTarget(result.task, deps.clock()) };
    },

    async releaseExpiredClaims(request, ctx) {
      requireService(ctx);
      const limit = request.limit > 0 ? Math.min(request.limit, 500) : 100;
      const released = await repo.releaseExpired(deps.clock(), limit, { type: 'system', id: 'agents-claims' });
      return {
        released: released.map((r) => ({ issueId: r.task._id, claimId: r.claim.claimId, agentId: r.claim.agentId, workspaceId: r.task.workspaceId })),
      };
    },

    async listClaimedTasks(request, ctx) {
      requireService(ctx);
      const limit = request.limit > 0 ? Math.min(request.limit, 1_000) : 200;
      const after = request.after ? validateId(request.after, 'after') : undefined;
      const page = await repo.listClaimed(after, limit);
      return {
        tasks: page.tasks.map((t) => ({ issueId: t._id, workspaceId: t.workspaceId, claim: mirrorMessage(t.claim) })),
        nextAfter: page.nextAfter,
      };
    },

    async listReadyTasks(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      const agentId = validateAgentId(request.agentId, 'agentId');
      const principal = ctx.principal;
      let workspace: WorkspaceRecord | undefined;
      if (principal.type !== 'system') {
        workspace = workspaceReadFor(await access.workspace(ctx, workspaceId, READ_QUEUE));
        // A token sees its own agent's queue only.
        if (principal.type !== 'api-key' || principal.agentId !== agentId) {
          throw new ServiceError('forbidden', "The ready queue is an agent's: call it with the agent's token", { reason: 'token-required' });
        }
      }
      const limit = pageLimit(request.limit);
      const after = decodeQueueCursor(request.cursor);
      if (request.startingIssueIds.length > MAX_STARTING) throw invalidInput('startingIssueIds', `At most ${MAX_STARTING} starting issue ids`);
      const startingIds = request.startingIssueIds.map((id) => validateId(id, 'startingIssueIds'));
      const [page, held] = await Promise.all([repo.listReady(workspaceId, agentId, limit, after, startingIds), repo.heldBy(workspaceId, agentId)]);
      const now = deps.clock();
      const done = await doneStatuses(deps.tasks, [...page.tasks.map((t) => t.task), ...(held ? [held] : [])], now, workspace);
      const message = (t: TaskRecord) => toTaskMessage(t, { now, ...(done.has(t._id) ? { done: done.get(t._id) } : {}) });
      return {
        tasks: page.tasks.map((t) => ({ task: message(t.task), rank: t.rank })),
        total: page.total,
        blocked: page.blocked,
        starting: page.starting,
        nextCursor: page.next ? encodeQueueCursor(page.next.after, page.next.rank) : undefined,
        held: held ? message(held) : undefined,
        heldClaim: mirrorMessage(held?.claim),
      };
    },
  };
}
