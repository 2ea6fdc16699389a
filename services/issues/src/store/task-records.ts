import { conflict, invalidInput, ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import type { Outbox } from '@planning/outbox';
import type { Collection, DocumentStore, Filter, StoreSession } from '@planning/store';
import { DEFAULT_APPROVAL_TTL_SECONDS, isLivePending, MAX_PENDING_APPROVALS, withGate, type ApprovalFor, type ApprovalGate } from '../domain/done-policy.js';
import type { WorkspaceScope } from './planning.js';
import type {
  ApprovalRecord,
  ApprovalStatus,
  CommentRecord,
  EvidenceKind,
  EvidenceRecord,
  TaskRecord,
  TimeEntryRecord,
} from './task-documents.js';
import type { TaskRepository, WriteContext } from './tasks.js';

export interface PageOptions {
  limit: number;
  after?: string;
  /** Newest first (for the latest few on a task's detail). */
  latest?: boolean;
}

function page(issueId: string, options: PageOptions, extra: Filter = {}): { filter: Filter; sort: Record<string, 1 | -1> } {
  const filter: Filter = { issueId, ...extra };
  if (options.after) filter._id = options.latest ? { $lt: options.after } : { $gt: options.after };
  return { filter, sort: { _id: options.latest ? -1 : 1 } };
}

/**
 * What accumulates on a task: comments, time entries, evidence and approval requests. Each
 * addition, the task's activity and counters, and its event are written in one transaction.
 * Events carry ids (and kinds, minutes, decisions), never bodies, titles or notes.
 */
export class TaskRecordRepository {
  private constructor(
    readonly comments: Collection<CommentRecord>,
    readonly timeEntries: Collection<TimeEntryRecord>,
    readonly evidence: Collection<EvidenceRecord>,
    readonly approvals: Collection<ApprovalRecord>,
    private readonly tasks: TaskRepository,
    private readonly outbox: Outbox,
    /** How long a pending approval request blocks (`APPROVAL_TTL_SECONDS`). */
    readonly approvalTtlMs: number,
  ) {}

  static async open(
    store: DocumentStore,
    outbox: Outbox,
    tasks: TaskRepository,
    options: { approvalTtlSeconds?: number } = {},
  ): Promise<TaskRecordRepository> {
    const comments = store.collection<CommentRecord>('comments');
    const timeEntries = store.collection<TimeEntryRecord>('time_entries');
    const evidence = store.collection<EvidenceRecord>('evidence');
    const approvals = store.collection<ApprovalRecord>('approvals');
    for (const c of [comments, timeEntries, approvals] as Collection[]) {
      await c.createIndexes([{ name: 'issue_id', keys: { issueId: 1, _id: 1 } }]);
    }
    await approvals.createIndexes([{ name: 'pending_expiry', keys: { status: 1, expiresAt: 1 } }]);
    await evidence.createIndexes([
      { name: 'issue_id', keys: { issueId: 1, _id: 1 } },
      { name: 'workspace_id', keys: { workspaceId: 1 } },
    ]);
    return new TaskRecordRepository(comments, timeEntries, evidence, approvals, tasks, outbox, (options.approvalTtlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS) * 1_000);
  }

  private async taskIn(issueId: string, session: Parameters<TaskRepository['get']>[1]): Promise<TaskRecord> {
    const task = await this.tasks.get(issueId, session);
    if (!task) throw new ServiceError('not-found', 'Issue not found');
    return task;
  }

  async addComment(issueId: string, body: string, ctx: WriteContext): Promise<CommentRecord> {
    return this.outbox.transaction(async (session) => {
      const task = await this.taskIn(issueId, session);
      this.tasks.assertWritable(task, ctx);
      const record: CommentRecord = {
        _id: newId('cmt'),
        workspaceId: task.workspaceId,
        issueId,
        authorId: ctx.actor.id,
        authorType: ctx.actor.type,
        body,
        createdAt: ctx.now.toISOString(),
      };
      await this.comments.insertOne(record, { session });
      await this.tasks.touch(task, 'comment-added', ctx, session, {}, [{ field: 'comments', to: record._id }]);
      await this.outbox.add(
        {
          type: 'comment.added',
          workspaceId: task.workspaceId,
          actor: ctx.actor,
          data: { subject: { type: 'comment', id: record._id }, issueId },
        },
        { session },
      );
      return record;
    });
  }

  listComments(issueId: string, options: PageOptions): Promise<CommentRecord[]> {
    const { filter, sort } = page(issueId, options);
    return this.comments.find(filter, { sort, limit: options.limit });
  }

  countComments(issueId: string): Promise<number> {
    return this.comments.countDocuments({ issueId });
  }

  async logTime(
    issueId: string,
    entry: { minutes: number; note: string; loggedAt?: string },
    ctx: WriteContext,
  ): Promise<{ entry: TimeEntryRecord; totalMinutes: number }> {
    return this.outbox.transaction(async (session) => {
      const task = await this.taskIn(issueId, session);
      this.tasks.assertWritable(task, ctx);
      const at = ctx.now.toISOString();
      const record: TimeEntryRecord = {
        _id: newId('tim'),
        workspaceId: task.workspaceId,
        issueId,
        actorId: ctx.actor.id,
        minutes: entry.minutes,
        note: entry.note,
        loggedAt: entry.loggedAt ?? at,
        createdAt: at,
      };
      await this.timeEntries.insertOne(record, { session });
      await this.tasks.touch(task, 'time-logged', ctx, session, { timeLoggedMinutes: entry.minutes }, [
        { field: 'timeLoggedMinutes', from: task.timeLoggedMinutes, to: task.timeLoggedMinutes + entry.minutes },
      ]);
      await this.outbox.add(
        {
          type: 'time-entry.logged',
          workspaceId: task.workspaceId,
          actor: ctx.actor,
          data: { subject: { type: 'time-entry', id: record._id }, issueId, minutes: entry.minutes },
        },
        { session },
      );
      return { entry: record, totalMinutes: task.timeLoggedMinutes + entry.minutes };
    });
  }

  listTimeEntries(issueId: string, options: PageOptions): Promise<TimeEntryRecord[]> {
    const { filter, sort } = page(issueId, options);
    return this.timeEntries.find(filter, { sort, limit: options.limit });
  }

  /** Evidence naming an acceptance check marks that check done, in the same transaction. */
  async addEvidence(
    issueId: string,
    input: { kind: EvidenceKind; title: string; url?: string; body?: string; checkId?: string },
    ctx: WriteContext,
  ): Promise<EvidenceRecord> {
    return this.outbox.transaction(async (session) => {
      const task = await this.taskIn(issueId, session);
      this.tasks.assertWritable(task, ctx);
      if (input.checkId !== undefined && !task.acceptanceChecks.some((c) => c.id === input.checkId)) {
        throw invalidInput('checkId', "'checkId' names no acceptance check of this issue");
      }
      const record: EvidenceRecord = {
        _id: newId('evd'),
        workspaceId: task.workspaceId,
        issueId,
        kind: input.kind,
        title: input.title,
        ...(input.url !== undefined ? { url: input.url } : {}),
        ...(input.body !== undefined ? { body: input.body } : {}),
        ...(input.checkId !== undefined ? { checkId: input.checkId } : {}),
        createdBy: ctx.actor.id,
        createdAt: ctx.now.toISOString(),
      };
      await this.evidence.insertOne(record, { session });
      await this.tasks.touch(task, 'evidence-added', ctx, session, { evidenceCount: 1 }, [{ field: 'evidence', to: record._id }]);
      // What the done policy reads, kept with the task in this transaction.
      const evidenced = task.evidencedCheckIds ?? (await this.tasks.doneFacts(task, session)).evidencedCheckIds;
      await this.tasks.tasks.updateOne(
        { _id: issueId },
        {
          $set: { evidencedCheckIds: input.checkId !== undefined && !evidenced.includes(input.checkId) ? [...evidenced, input.checkId] : [...evidenced] },
          $max: { lastEvidenceAt: record.createdAt },
        },
        { session },
      );
      if (input.checkId !== undefined) await this.tasks.completeCheck(task, input.checkId, ctx, session);
      await this.outbox.add(
        {
          type: 'evidence.added',
          workspaceId: task.workspaceId,
          actor: ctx.actor,
          data: {
            subject: { type: 'evidence', id: record._id },
            issueId,
            kind: input.kind,
            ...(input.checkId !== undefined ? { checkId: input.checkId } : {}),
          },
        },
        { session },
      );
      return record;
    });
  }

  listEvidence(issueId: string, options: PageOptions): Promise<EvidenceRecord[]> {
    const { filter, sort } = page(issueId, options);
    return this.evidence.find(filter, { sort, limit: options.limit });
  }

  countEvidence(scope: WorkspaceScope): Promise<number> {
    if (scope.all) return this.evidence.countDocuments({});
    return this.evidence.countDocuments({ workspaceId: scope.ids.length === 1 ? scope.ids[0] : { $in: [...scope.ids] } });
  }

  /**
   * A pending approval request, `for` a move (done, in-review: it blocks that move until decided
   * or expired) or an outside step (merge, custom); it expires after the approval TTL.
   */
  async requestApproval(issueId: string, input: { reason: string; for: ApprovalFor }, ctx: WriteContext): Promise<ApprovalRecord> {
    return this.outbox.transaction(async (session) => {
      const task = await this.taskIn(issueId, session);
      this.tasks.assertWritable(task, ctx);
      const pending = (task.approvalGates ?? []).filter((g) => isLivePending(g, ctx.now));
      if (pending.length >= MAX_PENDING_APPROVALS) {
        throw conflict('approval-pending', `${pending.length} approval requests are pending on this issue; wait for decisions before asking again`);
      }
      const at = ctx.now.toISOString();
      const record: ApprovalRecord = {
        _id: newId('apr'),
        workspaceId: task.workspaceId,
        issueId,
        requestedBy: ctx.actor.id,
        reason: input.reason,
        status: 'pending',
        for: input.for,
        expiresAt: new Date(ctx.now.getTime() + this.approvalTtlMs).toISOString(),
        createdAt: at,
      };
      await this.approvals.insertOne(record, { session });
      await this.tasks.touch(task, 'approval-requested', ctx, session, {}, [{ field: 'approvals', to: record._id }]);
      await this.setGate(task, gateOf(record), session);
      await this.outbox.add(
        {
          type: 'approval.requested',
          workspaceId: task.workspaceId,
          actor: ctx.actor,
          data: { subject: { type: 'approval', id: record._id }, issueId, for: input.for },
        },
        { session },
      );
      return record;
    });
  }

  /** Keeps the task's list of approval requests in line with one request (same transaction). */
  private async setGate(task: TaskRecord, gate: ApprovalGate, session: StoreSession): Promise<void> {
    const current = (await this.tasks.get(task._id, session)) ?? task;
    await this.tasks.tasks.updateOne({ _id: task._id }, { $set: { approvalGates: withGate(current.approvalGates, gate) } }, { session });
  }

  /** When a pending request expires (old requests without `expiresAt`: created + TTL). */
  expiresAtOf(a: ApprovalRecord): string {
    return a.expiresAt ?? new Date(Date.parse(a.createdAt) + this.approvalTtlMs).toISOString();
  }

  /**
   * Pending requests whose expiry passed become `expired` (at most `limit` per call): the request,
   * the task's list and activity, and an `approval.expired` event, in one transaction each, each
   * conditional on the request still pending (several processes may sweep at once). Expiry itself
   * is decided by `expiresAt` wherever a request is read; this only records it.
   */
  async expireDue(now: Date, limit = 100): Promise<ApprovalRecord[]> {
    const at = now.toISOString();
    const oldBefore = new Date(now.getTime() - this.approvalTtlMs).toISOString();
    const due = [
      ...(await this.approvals.find({ status: 'pending', expiresAt: { $lte: at } }, { sort: { expiresAt: 1 }, limit })),
      ...(await this.approvals.find({ status: 'pending', expiresAt: { $exists: false }, createdAt: { $lte: oldBefore } }, { sort: { _id: 1 }, limit })),
    ];
    const actor = { type: 'system', id: 'issues' };
    const expired: ApprovalRecord[] = [];
    for (const approval of due) {
      const done = await this.outbox.transaction(async (session) => {
        const updated = await this.approvals.findOneAndUpdate(
          { _id: approval._id, status: 'pending' },
          { $set: { status: 'expired', expiresAt: this.expiresAtOf(approval) } },
          { session },
        );
        if (!updated) return null;
        const task = await this.tasks.get(approval.issueId, session);
        if (task) {
          await this.tasks.touch(task, 'approval-expired', { actor, now }, session, {}, [{ field: 'approvals', to: approval._id }]);
          await this.setGate(task, gateOf(updated), session);
        }
        await this.outbox.add(
          {
            type: 'approval.expired',
            workspaceId: approval.workspaceId,
            actor,
            data: { subject: { type: 'approval', id: approval._id }, issueId: approval.issueId, for: approval.for ?? 'custom', requestedBy: approval.requestedBy },
          },
          { session },
        );
        return updated;
      });
      if (done) expired.push(done);
    }
    return expired;
  }

  listApprovals(issueId: string, options: PageOptions & { status?: ApprovalStatus }): Promise<ApprovalRecord[]> {
    const { filter, sort } = page(issueId, options, options.status ? { status: options.status } : {});
    return this.approvals.find(filter, { sort, limit: options.limit });
  }

  /** Decides a pending request once: the write is conditional on `status: pending`. */
  async decideApproval(
    issueId: string,
    approvalId: string,
    decision: Exclude<ApprovalStatus, 'pending'>,
    note: string | undefined,
    ctx: WriteContext,
  ): Promise<ApprovalRecord> {
    return this.outbox.transaction(async (session) => {
      const task = await this.taskIn(issueId, session);
      const existing = await this.approvals.findOne({ _id: approvalId, issueId }, { session });
      if (!existing) throw new ServiceError('not-found', 'Approval request not found');
      if (existing.status !== 'pending') {
        throw conflict('invalid-transition', `The approval request is already ${existing.status}`);
      }
      const at = ctx.now.toISOString();
      if (this.expiresAtOf(existing) <= at) throw conflict('invalid-transition', `The approval request expired at ${this.expiresAtOf(existing)}; ask for a new one`);
      const decided = await this.approvals.findOneAndUpdate(
        { _id: approvalId, status: 'pending' },
        { $set: { status: decision, decidedBy: ctx.actor.id, decidedAt: at, ...(note ? { decisionNote: note } : {}) } },
        { session },
      );
      if (!decided) throw conflict('invalid-transition', 'The approval request was decided meanwhile');
      await this.tasks.touch(task, 'approval-decided', ctx, session, {}, [{ field: 'approvals', to: approvalId }]);
      await this.setGate(task, gateOf(decided, this.expiresAtOf(decided)), session);
      await this.outbox.add(
        {
          type: 'approval.decided',
          workspaceId: task.workspaceId,
          actor: ctx.actor,
          data: { subject: { type: 'approval', id: approvalId }, issueId, decision, for: decided.for ?? 'custom', requestedBy: decided.requestedBy },
        },
        { session },
      );
      return decided;
    });
  }
}

/** The task's summary of one approval request. */
export function gateOf(a: ApprovalRecord, expiresAt = a.expiresAt ?? a.createdAt): ApprovalGate {
  return {
    id: a._id,
    for: a.for ?? 'custom',
    status: a.status,
    requestedBy: a.requestedBy,
    requestedAt: a.createdAt,
    expiresAt,
    ...(a.decidedAt ? { decidedAt: a.decidedAt } : {}),
  };
}
