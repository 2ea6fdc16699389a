/**
 * The fence of writes under claims, asked of the agents-claims service (which owns claims and the
 * one rule of writes under them: ClaimService.CheckTaskWrites). Every write path of this service
 * calls `fenceWrites` once before its transaction; the answer travels in the write context and is
 * checked against the task's claim mirror inside the transaction (TaskRepository.assertWritable).
 */
import { conflict, invalidInput, ServiceError, type ConflictReason } from '@planning/errors';
import type { ClaimService } from '@planning/proto/planning/claims/v1/claims_pb';
import { callOptionsFrom, type CallContext, type RpcClient } from '@planning/rpc';
import type { WriteFence } from '../domain/claims.js';
import type { TaskRecord } from '../store/task-documents.js';
import type { TaskRepository, WriteContext } from '../store/tasks.js';
import { writeContextOf } from './planning-access.js';

/** The kinds of task writes (only comments stay open to an agent that lost its claim). */
export type WriteKind = 'field' | 'status' | 'bulk' | 'contract' | 'comment' | 'time' | 'evidence' | 'approval';

/** One task's answer: its fence, or why the write is refused (409). */
export type FenceOutcome = WriteFence | ServiceError;

export interface WriteFences {
  check(ctx: CallContext, request: { issueIds: readonly string[]; kind: WriteKind; fencingToken?: number }): Promise<Map<string, FenceOutcome>>;
}

/** The fence port over agents-claims' ClaimService, called with the writer's principal and deadline. */
export function createRemoteWriteFences(client: RpcClient<typeof ClaimService>): WriteFences {
  return {
    async check(ctx, request) {
      const res = await client.checkTaskWrites(
        { issueIds: [...request.issueIds], kind: request.kind, ...(request.fencingToken !== undefined ? { fencingToken: request.fencingToken } : {}) },
        callOptionsFrom(ctx),
      );
      const out = new Map<string, FenceOutcome>();
      for (const f of res.fences) {
        out.set(
          f.issueId,
          f.refusalReason !== undefined
            ? conflict(f.refusalReason as ConflictReason, f.refusalMessage ?? 'The write conflicts with a claim on this issue')
            : f.claimId !== undefined
              ? { claimId: f.claimId }
              : {},
        );
      }
      return out;
    },
  };
}

/** 400 unless absent or a positive integer. */
export function validateFencingToken(value: number | undefined, field = 'fencingToken'): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 1) throw invalidInput(field, `'${field}' must be a positive integer`);
  return value;
}

/**
 * The fences of a write to `issueIds`: undefined when the writer is not fenced (people and
 * services presenting no token), else each task's outcome. Agents (API tokens) are always fenced.
 */
export async function fenceOutcomes(
  fences: WriteFences,
  ctx: CallContext,
  issueIds: readonly string[],
  kind: WriteKind,
  fencingToken: number | undefined,
): Promise<Map<string, FenceOutcome> | undefined> {
  if (ctx.principal.type !== 'api-key' && fencingToken === undefined) return undefined;
  if (issueIds.length === 0) return new Map();
  const outcomes = await fences.check(ctx, { issueIds, kind, ...(fencingToken !== undefined ? { fencingToken } : {}) });
  if (fencingToken === undefined) return outcomes;
  // A fence by token holds only under that token's claim (domain/claims.ts#fenceRefusal).
  return new Map([...outcomes].map(([id, o]) => [id, o instanceof ServiceError ? o : { ...o, byToken: true }]));
}

/** The fences of a write to one task; its refusal (409) is thrown before anything is written. */
export async function fenceWrite(
  fences: WriteFences,
  ctx: CallContext,
  issueId: string,
  kind: WriteKind,
  fencingToken: number | undefined,
): Promise<ReadonlyMap<string, FenceOutcome> | undefined> {
  const outcomes = await fenceOutcomes(fences, ctx, [issueId], kind, fencingToken);
  if (!outcomes) return undefined;
  const outcome = outcomes.get(issueId);
  if (!outcome) throw new ServiceError('internal', 'Internal error');
  if (outcome instanceof ServiceError) throw outcome;
  return outcomes;
}

/**
 * The write context of a write to one task, fenced: an agent's write to a task assigned to another
 * agent is refused first (403), then the fence is asked for (409 refusals thrown here, before any
 * write). The fence is checked again where the task is written.
 */
export async function fencedWriteContext(
  deps: { tasks: Pick<TaskRepository, 'assertWritable'>; fences: WriteFences },
  ctx: CallContext,
  task: TaskRecord,
  kind: WriteKind,
  fencingToken: number | undefined,
  now: Date,
): Promise<WriteContext> {
  const wc = writeContextOf(ctx.principal, now);
  deps.tasks.assertWritable(task, wc);
  const fences = await fenceWrite(deps.fences, ctx, task._id, kind, fencingToken);
  return fences ? { ...wc, fences } : wc;
}
