import { invalidInput, ServiceError } from '@planning/errors';
import { validateApprovalFor } from '../domain/done-policy.js';
import { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import { LIMITS, optionalId, validateEnum, validateId, validateName, validateText, validateTimestamp, validateUrl } from '../domain/fields.js';
import { APPROVAL_STATUSES, EVIDENCE_KINDS, type TaskRecord } from '../store/task-documents.js';
import type { TaskRecordRepository } from '../store/task-records.js';
import type { TaskRepository } from '../store/tasks.js';
import { pageOf, pageRequest } from './paging.js';
import { READ_TASKS, WRITE_TASKS, writeContextOf, type PlanningAccess } from './planning-access.js';
import { fencedWriteContext, validateFencingToken, type WriteFences, type WriteKind } from './write-fences.js';
import { toActivityMessage, toApprovalMessage, toCommentMessage, toEvidenceMessage, toTimeEntryMessage } from './task-messages.js';

export { TaskRecordService };

export interface TaskRecordServiceDeps {
  tasks: TaskRepository;
  records: TaskRecordRepository;
  access: PlanningAccess;
  /** The fence of agent writes (agents-claims). */
  fences: WriteFences;
  clock: () => Date;
}

export function createTaskRecordService(deps: TaskRecordServiceDeps): ServiceImplementation<typeof TaskRecordService> {
  const { tasks, records, access } = deps;

  const taskFor = async (ctx: CallContext, issueId: string, requirement = READ_TASKS): Promise<TaskRecord> => {
    const task = await tasks.get(validateId(issueId, 'issueId'));
    if (!task) throw new ServiceError('not-found', 'Issue not found');
    await access.record(ctx, 'Issue', task.workspaceId, requirement);
    return task;
  };

  /** A task the caller may write, and the fenced context of its write (403, 404, 409 refusals first). */
  const writable = async (ctx: CallContext, issueId: string, kind: WriteKind, rawToken: number | undefined) => {
    const fencingToken = validateFencingToken(rawToken);
    const task = await taskFor(ctx, issueId, WRITE_TASKS);
    return { task, wc: await fencedWriteContext(deps, ctx, task, kind, fencingToken, deps.clock()) };
  };

  return {
    async addComment(request, ctx) {
      const body = validateText(request.body, 'body', LIMITS.comment, { required: true });
      const { task, wc } = await writable(ctx, request.issueId, 'comment', request.fencingToken);
      const comment = await records.addComment(task._id, body, wc);
      return { comment: toCommentMessage(comment) };
    },

    async listComments(request, ctx) {
      const page = pageRequest(request);
      const task = await taskFor(ctx, request.issueId);
      const { items, nextCursor } = pageOf(await records.listComments(task._id, { ...page, limit: page.limit + 1 }), page.limit);
      return { comments: items.map(toCommentMessage), nextCursor };
    },

    async logTime(request, ctx) {
      const minutes = request.minutes;
      if (!Number.isInteger(minutes) || minutes < 1 || minutes > LIMITS.minutes) {
        throw invalidInput('minutes', `'minutes' must be an integer from 1 to ${LIMITS.minutes}`);
      }
      const note = request.note === undefined ? '' : validateText(request.note, 'note', LIMITS.note).trim();
      const loggedAt = request.loggedAt ? validateTimestamp(request.loggedAt, 'loggedAt') : undefined;
      const { task, wc } = await writable(ctx, request.issueId, 'time', request.fencingToken);
      const result = await records.logTime(task._id, { minutes, note, ...(loggedAt ? { loggedAt } : {}) }, wc);
      return { timeEntry: toTimeEntryMessage(result.entry), totalMinutes: result.totalMinutes };
    },

    async listTimeEntries(request, ctx) {
      const page = pageRequest(request);
      const task = await taskFor(ctx, request.issueId);
      const { items, nextCursor } = pageOf(await records.listTimeEntries(task._id, { ...page, limit: page.limit + 1 }), page.limit);
      return { timeEntries: items.map(toTimeEntryMessage), totalMinutes: task.timeLoggedMinutes, nextCursor };
    },

    async addEvidence(request, ctx) {
      const kind = validateEnum(request.kind, EVIDENCE_KINDS, 'kind');
      const title = validateName(request.title, 'title', LIMITS.title);
      const url = request.url ? validateUrl(request.url, 'url') : undefined;
      const body = request.body ? validateText(request.body, 'body', LIMITS.evidenceBody) : undefined;
      const checkId = optionalId(request.checkId, 'checkId');
      if (kind === 'link' && url === undefined) throw invalidInput('url', "'url' is required for link evidence");
      const { task, wc } = await writable(ctx, request.issueId, 'evidence', request.fencingToken);
      const evidence = await records.addEvidence(task._id, { kind, title, ...(url ? { url } : {}), ...(body ? { body } : {}), ...(checkId ? { checkId } : {}) }, wc);
      return { evidence: toEvidenceMessage(evidence) };
    },

    async listEvidence(request, ctx) {
      const page = pageRequest(request);
      const task = await taskFor(ctx, request.issueId);
      const { items, nextCursor } = pageOf(await records.listEvidence(task._id, { ...page, limit: page.limit + 1 }), page.limit);
      return { evidence: items.map(toEvidenceMessage), nextCursor };
    },

    async requestApproval(request, ctx) {
      const reason = validateText(request.reason, 'reason', LIMITS.reason, { required: true }).trim();
      const approvalFor = request.approvalFor === undefined ? 'custom' : validateApprovalFor(request.approvalFor);
      const { task, wc } = await writable(ctx, request.issueId, 'approval', request.fencingToken);
      const approval = await records.requestApproval(task._id, { reason, for: approvalFor }, wc);
      return { approval: toApprovalMessage(approval) };
    },

    async listApprovals(request, ctx) {
      const status = request.status ? validateEnum(request.status, APPROVAL_STATUSES, 'status') : undefined;
      const page = pageRequest(request);
      const task = await taskFor(ctx, request.issueId);
      const rows = await records.listApprovals(task._id, { ...page, limit: page.limit + 1, ...(status ? { status } : {}) });
      const { items, nextCursor } = pageOf(rows, page.limit);
      return { approvals: items.map(toApprovalMessage), nextCursor };
    },

    async decideApproval(request, ctx) {
      const decision = validateEnum(request.decision, ['approved', 'rejected'] as const, 'decision');
      const note = request.note === undefined ? undefined : validateText(request.note, 'note', LIMITS.note).trim();
      const approvalId = validateId(request.approvalId, 'approvalId');
      // Approvals are decided by people (members and up); a token gets 403 from `authorize`.
      const task = await taskFor(ctx, request.issueId, { action: 'write-tasks' });
      const approval = await records.decideApproval(task._id, approvalId, decision, note || undefined, writeContextOf(ctx.principal, deps.clock()));
      return { approval: toApprovalMessage(approval) };
    },

    async listActivity(request, ctx) {
      const page = pageRequest(request);
      const task = await taskFor(ctx, request.issueId);
      const { items, nextCursor } = pageOf(await tasks.listActivity(task._id, { ...page, limit: page.limit + 1 }), page.limit);
      return { activity: items.map(toActivityMessage), nextCursor };
    },
  };
}
