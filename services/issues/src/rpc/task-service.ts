import type { MessageInitShape } from '@bufbuild/protobuf';
import { roleAllows } from '@planning/access';
import { invalidInput, ServiceError } from '@planning/errors';
import { PLANS, quotaResetsAt } from '@planning/plans';
import { TaskService, type ActivitySchema, type TaskInstructions, type TaskRemindersSchema } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import type { Filter } from '@planning/store';
import { assertBulkPatch, BULK_MODES, bulkPlan, validateBulkIds } from '../domain/bulk-update.js';
import { LIMITS, optionalId, validateEnum, validateId, validateQuery } from '../domain/fields.js';
import { compareQueue, decodeSearchCursor, defaultDirection, DEFAULT_SORT, DIRECTIONS, SORTS, type SortName } from '../domain/ranking.js';
import { productReadiness } from '../domain/readiness.js';
import { CONTRACT_SECTIONS, sectionField, validateInstructionsPatch } from '../domain/task-contract.js';
import { healthOf, REMINDER_KINDS, remindersOf, STALE_DAYS_ACTIVE, today, type HealthContext, type ReminderKind } from '../domain/task-health.js';
import { CLOSED_STATUSES, TASK_STATUSES, type TaskStatus } from '../domain/task-status.js';
import { PRIORITIES, validateAgentId, validateNewTask, type Priority, type TaskPatch } from '../domain/tasks.js';
import type { PlanningRepository, WorkspaceScope } from '../store/planning.js';
import { healthInput, type ActivityRecord, type TaskRecord } from '../store/task-documents.js';
import type { TaskRecordRepository } from '../store/task-records.js';
import type { TaskSearch } from '../store/task-search.js';
import { edgesOf, type BulkOutcome, type TaskRepository, type WriteContext } from '../store/tasks.js';
import type { WorkspaceRecord, WorkspaceRepository } from '../store/workspaces.js';
import { validateOverride } from '../domain/done-policy.js';
import { pageLimit } from './cursor.js';
import { doneStatusOfTask } from './done-status.js';
import { fencedWriteContext, fenceOutcomes, validateFencingToken, type WriteFences } from './write-fences.js';
import { READ_TASKS, WRITE_TASKS, writeContextOf, type PlanningAccess } from './planning-access.js';
import { workspaceReadFor } from './workspace-service.js';
import {
  patchFromMessage,
  rawInstructionsPatch,
  toActivityMessage,
  toApprovalMessage,
  toCommentMessage,
  toContractMessage,
  toDoneStatusMessage,
  toEvidenceMessage,
  sharedTaskView,
  toTaskView,
} from './task-messages.js';

export { TaskService };

export interface TaskServiceDeps {
  tasks: TaskRepository;
  records: TaskRecordRepository;
  planning: PlanningRepository;
  workspaces: WorkspaceRepository;
  access: PlanningAccess;
  /** The fence of agent writes (agents-claims). */
  fences: WriteFences;
  clock: () => Date;
}

/** How many tasks one reminders page looks at before it answers (with a cursor to go on). */
const REMINDER_SCAN = 2_000;
/** How many of the latest comments and activity entries a task's detail shows. */
const DETAIL_LATEST = 20;

/** Runs `fn`, naming fields of its `invalid-input` errors under `prefix` (`status` → `patch.status`). */
function underField<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'invalid-input' && err.details.field) {
      const field = err.details.field;
      throw new ServiceError('invalid-input', err.message.replace(`'${field}'`, `'${prefix}.${field}'`), {
        ...err.details,
        field: `${prefix}.${field}`,
      });
    }
    throw err;
  }
}

function rawInstructions(i: TaskInstructions | undefined): Record<string, unknown> {
  if (!i) return {};
  return {
    objective: i.objective,
    constraints: i.constraints,
    expectedOutput: i.expectedOutput,
    verification: i.verification,
    permissions: i.permissions,
    escalation: i.escalation,
  };
}

/** The condition an open task must meet to possibly raise one of `kinds` (narrows the scan). */
function reminderPrefilter(kinds: readonly ReminderKind[], now: Date): Filter | undefined {
  if (kinds.length === 0 || kinds.length === REMINDER_KINDS.length) return undefined;
  const staleBefore = new Date(now.getTime() - STALE_DAYS_ACTIVE * 86_400_000).toISOString();
  const by: Record<ReminderKind, Filter> = {
    overdue: { dueDate: { $lt: today(now) } },
    'missing-dates': { dueDate: { $exists: false } },
    'missing-time': { status: { $in: ['in-progress', 'in-review'] }, timeLoggedMinutes: 0 },
    'stale-update': { lastActivityAt: { $lt: staleBefore } },
  };
  return { $or: kinds.map((k) => by[k]) };
}

/**
 * A member's override of the done policy: only with a status move (400), never by an agent (403,
 * the policy is what keeps agents honest), always with a reason (400 `override.reason`).
 */
function overrideOf(ctx: CallContext, raw: { reason: string } | undefined, patch: TaskPatch, statusField = 'status'): { reason: string } | undefined {
  const override = validateOverride(raw);
  if (!override) return undefined;
  if (ctx.principal.type === 'api-key') {
    throw new ServiceError('forbidden', 'Agents cannot override the done policy; a workspace member can', { reason: 'override-not-allowed' });
  }
  if (patch.status === undefined) throw invalidInput(statusField, "'override' applies to a status move: send 'status' with it");
  return override;
}

/**
 * An agent writing, without a fencing token, to a task no claim has ever started on: the fence
 * rule of agents-claims (CheckTaskWrites) can only answer "under no claim" (it weighs answered
 * claims, and a claim is answered only after its start set the task's `lastFencingToken`), so the
 * call is skipped. The write still carries that fence: a claim started since this read is checked
 * in the write's transaction (another agent's live claim refuses it, 409 `active-claim`).
 */
function neverClaimed(ctx: CallContext, task: TaskRecord, fencingToken: number | undefined): boolean {
  return ctx.principal.type === 'api-key' && fencingToken === undefined && !task.lastFencingToken && !task.claim && !task.lastClaimEnd;
}

function unclaimedWriteContext(deps: Pick<TaskServiceDeps, 'tasks'>, ctx: CallContext, task: TaskRecord, now: Date): WriteContext {
  const wc = writeContextOf(ctx.principal, now);
  deps.tasks.assertWritable(task, wc);
  return { ...wc, fences: new Map([[task._id, {}]]) };
}

/** Precedence of bulk preflight failures: the answer names the most fundamental problem. */
const FAILURE_ORDER = ['not-found', 'forbidden', 'invalid-input', 'work-already-claimed'];

function bulkFailure(failures: Extract<BulkOutcome, { ok: false }>[], total: number): ServiceError {
  const rank = (e: ServiceError): number => {
    const i = FAILURE_ORDER.indexOf(e.code);
    return i === -1 ? FAILURE_ORDER.length : i;
  };
  const first = [...failures].sort((a, b) => rank(a.error) - rank(b.error))[0] as Extract<BulkOutcome, { ok: false }>;
  const groups = new Map<string, string[]>();
  for (const f of failures) {
    const key = f.error.details.reason ?? f.error.code;
    groups.set(key, [...(groups.get(key) ?? []), f.id]);
  }
  const summary = [...groups.entries()].map(([key, ids]) => `${key}: ${ids.join(', ')}`).join('; ');
  const field = first.error.details.field;
  return new ServiceError(
    first.error.code,
    `${failures.length} of ${total} issues cannot be updated, so nothing was changed (${summary}). First problem: ${first.error.message}`,
    {
      failedIds: failures.map((f) => f.id),
      ...(first.error.details.reason ? { reason: first.error.details.reason } : {}),
      ...(field ? { field: field === 'issueIds' ? field : `patch.${field}` } : first.error.code === 'not-found' ? { field: 'issueIds' } : {}),
    },
  );
}

export function createTaskService(deps: TaskServiceDeps): ServiceImplementation<typeof TaskService> {
  const { tasks, records, planning, access } = deps;

  const healthContext = (ctx: CallContext, now: Date): HealthContext => ({
    now,
    ...(ctx.principal.type === 'api-key' && ctx.principal.agentId ? { agentId: ctx.principal.agentId } : {}),
  });

  /** The task by id if the caller may do `requirement` in its workspace (404 / 403 otherwise). */
  const taskFor = async (ctx: CallContext, id: string, requirement = READ_TASKS, field = 'id'): Promise<TaskRecord> => (await taskWithAccess(ctx, id, requirement, field)).task;

  /** `taskFor`, with the access answer (whose workspace record the done policy can reuse). */
  const taskWithAccess = async (ctx: CallContext, id: string, requirement = READ_TASKS, field = 'id'): Promise<{ task: TaskRecord; workspace?: WorkspaceRecord }> => {
    const task = await tasks.get(validateId(id, field));
    if (!task) throw new ServiceError('not-found', 'Issue not found');
    const answer = await access.record(ctx, 'Issue', task.workspaceId, requirement);
    const workspace = workspaceReadFor(answer);
    return { task, ...(workspace ? { workspace } : {}) };
  };

  /** The workspaces whose readiness the caller may see: the ones it administers. */
  const adminScope = async (ctx: CallContext, requested: readonly string[]): Promise<WorkspaceScope> => {
    const principal = ctx.principal;
    let scope: WorkspaceScope;
    if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
    if (principal.type === 'system' || (principal.type === 'user' && principal.isAdmin)) scope = { all: true };
    else if (principal.type === 'api-key') {
      if (!principal.scopes.includes('admin')) throw new ServiceError('forbidden', "The token lacks the 'admin' scope");
      scope = { all: false, ids: principal.workspaceId ? [principal.workspaceId] : [] };
    } else {
      const memberships = await deps.workspaces.members.find({ userId: principal.id });
      const ids = memberships.filter((m) => roleAllows(m.role, 'manage')).map((m) => m.workspaceId);
      if (ids.length === 0) throw new ServiceError('forbidden', 'Diagnostics are for workspace administrators');
      scope = { all: false, ids };
    }
    if (requested.length === 0) return scope;
    if (!scope.all && requested.some((id) => !scope.ids.includes(id))) {
      throw new ServiceError('forbidden', 'Not an administrator of every requested workspace');
    }
    return { all: false, ids: [...requested] };
  };

  return {
    async createTask(request, ctx) {
      const input = validateNewTask({
        projectId: request.projectId,
        title: request.title,
        description: request.description,
        status: request.status,
        priority: request.priority,
        labels: request.labels,
        milestoneId: request.milestoneId,
        initiativeId: request.initiativeId,
        parentId: request.parentId,
        dueDate: request.dueDate,
        estimate: request.estimate,
        dependencies: request.dependencies,
        acceptanceChecks: request.acceptanceChecks.map((c) => ({ ...(c.id ? { id: c.id } : {}), title: c.title, ...(c.done !== undefined ? { done: c.done } : {}) })),
        assignedAgentId: request.assignedAgentId,
        instructions: rawInstructions(request.instructions),
      });
      const workspaceId = optionalId(request.workspaceId, 'workspaceId');
      const project = await planning.findProject(input.projectId);
      if (!project) throw new ServiceError('not-found', 'Project not found');
      const ws = await access.record(ctx, 'Project', project.workspaceId, WRITE_TASKS);
      if (workspaceId !== undefined && workspaceId !== project.workspaceId) {
        throw invalidInput('workspaceId', "'workspaceId' is not the project's workspace");
      }
      const now = deps.clock();
      const task = await tasks.create(project.workspaceId, input, {
        ...writeContextOf(ctx.principal, now),
        storedTaskLimit: PLANS[ws.planId].quotas['stored-tasks'],
        quotaResetsAt: quotaResetsAt(now).toISOString(),
      });
      return { task: toTaskView(task, healthContext(ctx, now)) };
    },

    async getTask(request, ctx) {
      const { task, workspace } = await taskWithAccess(ctx, request.id);
      // Reads the task's own counters make unnecessary are skipped: no evidence or dependents to
      // list when their counts are 0, and no count query when the latest page is not full.
      const countUnlessShort = async (page: readonly unknown[], count: () => Promise<number>): Promise<number> =>
        page.length < DETAIL_LATEST ? page.length : count();
      const now = deps.clock();
      const [comments, activity, evidence, approvals, dependencies, dependents, doneStatus] = await Promise.all([
        records.listComments(task._id, { limit: DETAIL_LATEST, latest: true }),
        tasks.listActivity(task._id, { limit: DETAIL_LATEST, latest: true }),
        task.evidenceCount > 0 ? records.listEvidence(task._id, { limit: LIMITS.acceptanceChecks }) : [],
        records.listApprovals(task._id, { limit: LIMITS.acceptanceChecks }),
        tasks.getMany(task.dependencies),
        task.dependentCount > 0 ? tasks.dependentsOf([task._id], 100) : [],
        doneStatusOfTask(tasks, task, now, workspace),
      ]);
      const [commentCount, activityCount] = await Promise.all([
        countUnlessShort(comments, () => records.countComments(task._id)),
        countUnlessShort(activity, () => tasks.countActivity(task._id)),
      ]);
      const edges = edgesOf([task], dependents);
      const ref = (t: TaskRecord) => ({ id: t._id, title: t.title, status: t.status });
      return {
        task: toTaskView(task, healthContext(ctx, now), doneStatus),
        comments: comments.reverse().map(toCommentMessage),
        commentCount,
        activity: activity.reverse().map(toActivityMessage),
        activityCount,
        evidence: evidence.map(toEvidenceMessage),
        approvals: approvals.map(toApprovalMessage),
        dependencies: dependencies.map(ref),
        dependents: dependents.map(ref),
        dependencyGraph: { edges },
      };
    },

    async updateTask(request, ctx) {
      const id = validateId(request.id, 'id');
      const patch = patchFromMessage(request.patch);
      if (Object.keys(patch).length === 0) throw invalidInput('body', 'Send at least one field to change');
      const fencingToken = validateFencingToken(request.fencingToken);
      const override = overrideOf(ctx, request.override, patch);
      const task = await taskFor(ctx, id, WRITE_TASKS);
      const now = deps.clock();
      const wc = neverClaimed(ctx, task, fencingToken)
        ? unclaimedWriteContext(deps, ctx, task, now)
        : await fencedWriteContext(deps, ctx, task, patch.status !== undefined ? 'status' : 'field', fencingToken, now);
      const result = await tasks.update(id, patch, {
        ...wc,
        ...(override ? { override } : {}),
        ...(request.expectedVersion !== undefined ? { expectedVersion: request.expectedVersion } : {}),
      });
      return {
        task: toTaskView(result.task, healthContext(ctx, now)),
        changedFields: [...new Set(result.changes.map((c) => c.field))],
      };
    },

    async searchTasks(request, ctx) {
      const sort = request.sort ? validateEnum(request.sort, SORTS, 'sort') : DEFAULT_SORT;
      const direction = request.direction ? validateEnum(request.direction, DIRECTIONS, 'direction') : defaultDirection(sort);
      const limit = pageLimit(request.limit);
      const search: TaskSearch = { scope: { all: true }, sort, direction };
      const projectId = optionalId(request.projectId, 'projectId');
      if (projectId) search.projectId = projectId;
      const milestoneId = optionalId(request.milestoneId, 'milestoneId');
      if (milestoneId) search.milestoneId = milestoneId;
      const initiativeId = optionalId(request.initiativeId, 'initiativeId');
      if (initiativeId) search.initiativeId = initiativeId;
      const parentId = optionalId(request.parentId, 'parentId');
      if (parentId) search.parentId = parentId;
      if (request.status.length > 0) search.statuses = request.status.map((s) => validateEnum<TaskStatus>(s, TASK_STATUSES, 'status'));
      if (request.priority.length > 0) search.priorities = request.priority.map((p) => validateEnum<Priority>(p, PRIORITIES, 'priority'));
      if (request.labels.length > 0) {
        if (request.labels.length > LIMITS.labels) throw invalidInput('label', `'label' may list at most ${LIMITS.labels} labels`);
        search.labels = request.labels.map((l) => {
          const label = l.trim();
          if (!label || label.length > LIMITS.label) throw invalidInput('label', `'label' values must be 1 to ${LIMITS.label} characters`);
          return label;
        });
      }
      if (request.assignedAgentId) search.assignedAgentId = validateAgentId(request.assignedAgentId, 'assignedAgentId');
      if (request.dependencyState) search.dependencyState = validateEnum(request.dependencyState, ['blocked', 'unblocked'] as const, 'dependencyState');
      const q = validateQuery(request.q);
      if (q) search.q = q;
      if (request.cursor) search.after = decodeSearchCursor(request.cursor, sort, direction).after;
      search.scope = await access.scope(ctx, optionalId(request.workspaceId, 'workspaceId'), READ_TASKS);
      const page = await tasks.search(search, limit);
      const context = healthContext(ctx, deps.clock());
      return {
        tasks: page.tasks.map((t) => sharedTaskView(t, context)),
        nextCursor: page.nextCursor,
        ...(request.includeDependencyGraph ? { dependencyGraph: { edges: await tasks.edgesAround(page.tasks) } } : {}),
      };
    },

    async bulkUpdateTasks(request, ctx) {
      const ids = validateBulkIds(request.issueIds);
      const mode = validateEnum(request.mode, BULK_MODES, 'mode');
      const patch: TaskPatch = underField('patch', () => patchFromMessage(request.patch));
      assertBulkPatch(patch);
      const fencingToken = validateFencingToken(request.fencingToken);
      const override = overrideOf(ctx, request.override, patch, 'patch.status');
      const now = deps.clock();
      const unfenced: WriteContext = { ...writeContextOf(ctx.principal, now), ...(override ? { override } : {}) };
      const outcomes = await tasks.planBulk(ids, patch, unfenced);
      // Every target's workspace must allow the caller to write tasks.
      const byWorkspace = new Map<string, string[]>();
      for (const o of outcomes) if (o.ok) byWorkspace.set(o.current.workspaceId, [...(byWorkspace.get(o.current.workspaceId) ?? []), o.current._id]);
      const denied = new Map<string, ServiceError>();
      for (const [workspaceId, members] of byWorkspace) {
        try {
          await access.record(ctx, 'Issue', workspaceId, WRITE_TASKS);
        } catch (err) {
          if (!(err instanceof ServiceError)) throw err;
          for (const id of members) denied.set(id, err);
        }
      }
      const visible: BulkOutcome[] = outcomes.map((o) => (o.ok && denied.has(o.current._id) ? { ok: false, id: o.current._id, error: denied.get(o.current._id) as ServiceError } : o));
      // The fence, asked only for targets the caller may see and write (a refusal tells nothing
      // about another workspace's tasks), applied to each as it is now and again in the apply.
      const fences = await fenceOutcomes(deps.fences, ctx, visible.flatMap((o) => (o.ok ? [o.current._id] : [])), 'bulk', fencingToken);
      const wc = fences ? { ...unfenced, fences } : unfenced;
      const checked: BulkOutcome[] = visible.map((o) => {
        if (!o.ok || !fences) return o;
        try {
          tasks.assertWritable(o.current, wc);
          return o;
        } catch (err) {
          if (!(err instanceof ServiceError)) throw err;
          return { ok: false, id: o.current._id, error: err };
        }
      });
      const failures = checked.filter((o): o is Extract<BulkOutcome, { ok: false }> => !o.ok);
      if (failures.length > 0) throw bulkFailure(failures, ids.length);
      const planned = checked.filter((o): o is Extract<BulkOutcome, { ok: true }> => o.ok);
      const plan = bulkPlan(request.issueIds.length, planned.map((p) => p.changes));
      const context = healthContext(ctx, now);
      if (mode === 'preview') {
        const activity: MessageInitShape<typeof ActivitySchema>[] = planned
          .filter((p) => p.changes.length > 0)
          .map((p) => toActivityMessage({ _id: '', workspaceId: p.current.workspaceId, issueId: p.current._id, actor: wc.actor, kind: 'bulk-updated', changes: p.changes, at: now.toISOString() }));
        return {
          plan,
          updatedIssues: planned.filter((p) => p.changes.length > 0).map((p) => toTaskView(p.next, context)),
          activity,
          applied: false,
        };
      }
      const applied = await tasks.applyBulk(planned, patch, wc);
      return {
        plan,
        updatedIssues: applied.map((a) => toTaskView(a.task, context)),
        activity: applied.flatMap((a) => (a.activity ? [toActivityMessage(a.activity as ActivityRecord)] : [])),
        applied: true,
      };
    },

    async getTaskContract(request, ctx) {
      const { task, workspace } = await taskWithAccess(ctx, request.issueId, READ_TASKS, 'issueId');
      const done = await doneStatusOfTask(tasks, task, deps.clock(), workspace);
      return { issueId: task._id, status: task.status, contract: toContractMessage(task), done: toDoneStatusMessage(done) };
    },

    async updateTaskContract(request, ctx) {
      const id = validateId(request.issueId, 'issueId');
      if (!request.instructions) throw invalidInput('agent.instructions', "'agent.instructions' is required");
      const patch = validateInstructionsPatch(rawInstructionsPatch(request.instructions));
      if (Object.keys(patch).length === 0) {
        throw invalidInput('agent.instructions', `'agent.instructions' must set at least one of objective, constraints, expectedOutput, verification, permissions, escalation`);
      }
      const fencingToken = validateFencingToken(request.fencingToken);
      const task = await taskFor(ctx, id, WRITE_TASKS, 'issueId');
      const now = deps.clock();
      const wc = await fencedWriteContext(deps, ctx, task, 'contract', fencingToken, now);
      const result = await tasks.update(id, { instructions: patch }, {
        ...wc,
        kind: 'contract-updated',
        ...(request.expectedVersion !== undefined ? { expectedVersion: request.expectedVersion } : {}),
      });
      const changed = new Set(result.changes.map((c) => c.field));
      return {
        issueId: id,
        status: result.task.status,
        contract: toContractMessage(result.task),
        changedSections: CONTRACT_SECTIONS.filter((s) => changed.has(sectionField(s))),
      };
    },

    async listReminders(request, ctx) {
      const kinds = request.kinds.map((k) => validateEnum<ReminderKind>(k, REMINDER_KINDS, 'kind'));
      const projectId = optionalId(request.projectId, 'projectId');
      const agentId = request.assignedAgentId ? validateAgentId(request.assignedAgentId, 'assignedAgentId') : undefined;
      const limit = pageLimit(request.limit);
      const sort: SortName = 'priority';
      let after = request.cursor ? decodeSearchCursor(request.cursor, sort, 'desc').after : undefined;
      const scope = await access.scope(ctx, optionalId(request.workspaceId, 'workspaceId'), READ_TASKS);
      const now = deps.clock();
      const where = reminderPrefilter(kinds, now);
      const items: MessageInitShape<typeof TaskRemindersSchema>[] = [];
      let scanned = 0;
      let nextCursor: string | undefined;
      while (items.length < limit) {
        const page = await tasks.search(
          {
            scope,
            sort,
            direction: 'desc',
            statuses: TASK_STATUSES.filter((s) => !CLOSED_STATUSES.includes(s)),
            ...(projectId ? { projectId } : {}),
            ...(agentId ? { assignedAgentId: agentId } : {}),
            ...(after !== undefined ? { after } : {}),
            ...(where ? { where } : {}),
          },
          Math.min(200, limit - items.length),
        );
        for (const task of page.tasks) {
          const reminders = remindersOf(healthInput(task), now).filter((r) => kinds.length === 0 || kinds.includes(r.kind));
          if (reminders.length === 0) continue;
          const health = healthOf(healthInput(task), healthContext(ctx, now));
          items.push({
            issueId: task._id,
            workspaceId: task.workspaceId,
            title: task.title,
            status: task.status,
            priority: task.priority,
            dueDate: task.dueDate,
            reminders,
            safeNextActions: health.safeNextActions.filter((a) => a.action !== 'claim'),
          });
        }
        scanned += page.tasks.length;
        const last = page.tasks[page.tasks.length - 1];
        if (!page.nextCursor || !last) {
          nextCursor = undefined;
          break;
        }
        after = last.sortKeys.priority;
        nextCursor = page.nextCursor;
        if (scanned >= REMINDER_SCAN) break;
      }
      return { items, ...(nextCursor ? { nextCursor } : {}) };
    },

    async getProductReadiness(request, ctx) {
      const scope = await adminScope(ctx, request.workspaceIds.map((id, i) => validateId(id, `workspaceIds[${i}]`)));
      const now = deps.clock();
      const [counts, proofPacketCount] = await Promise.all([tasks.readinessCounts(scope), records.countEvidence(scope)]);
      const top = [...counts.openBlockers].sort((a, b) => compareQueue({ ...a, id: a._id }, { ...b, id: b._id }))[0];
      const readiness = productReadiness({
        doneCount: counts.done,
        notCancelledCount: counts.notCancelled,
        verifiedCount: counts.verified,
        openBlockerCount: counts.openBlockers.length,
        proofPacketCount,
        ...(top ? { nextBlocker: { id: top._id, nextAction: healthOf(healthInput(top), { now }).nextAction } } : {}),
      });
      return {
        implementation: readiness.implementation,
        launchProof: {
          readyForPublicLaunch: readiness.launchProof.readyForPublicLaunch,
          nextProof: readiness.launchProof.nextProof ?? undefined,
          summary: readiness.launchProof.summary,
        },
      };
    },
  };
}
