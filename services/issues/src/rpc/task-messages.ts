/** Translation between stored task records and the protobuf messages of the task services. */
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { invalidInput } from '@planning/errors';
import { deepFreeze } from '@planning/store';
import {
  DoneStatusSchema,
  type AcceptanceCheck,
  type ApprovalGate as ApprovalGateMessage,
  type Reminder,
  type Task,
  type TaskAgent,
  type TaskHealth as TaskHealthMessage,
  type TaskView,
} from '@planning/proto/planning/issues/v1/tasks_pb';
import type {
  ActivitySchema,
  ApprovalGateSchema,
  ApprovalSchema,
  CommentSchema,
  EvidenceSchema,
  InstructionsPatch as InstructionsPatchMessage,
  TaskContractSchema,
  TaskHealthSchema,
  TaskPatch as TaskPatchMessage,
  TaskSchema,
  TimeEntrySchema,
} from '@planning/proto/planning/issues/v1/tasks_pb';
import { DEFAULT_APPROVAL_TTL_SECONDS, isLivePending, type ApprovalGate, type DoneStatus } from '../domain/done-policy.js';
import { completeness } from '../domain/task-contract.js';
import { agentReadiness, healthOf, healthStableUntil, type HealthContext, type TaskHealth } from '../domain/task-health.js';
import { CLEARABLE_FIELDS, validatePatch, type RawTaskPatch, type TaskPatch } from '../domain/tasks.js';
import {
  healthInput,
  type ActivityRecord,
  type ApprovalRecord,
  type CommentRecord,
  type EvidenceRecord,
  type TaskRecord,
  type TimeEntryRecord,
} from '../store/task-documents.js';

/** What a task message adds at read time: the done status where the caller needs it, and the clock for approval expiry. */
export interface TaskMessageOptions {
  now?: Date;
  done?: DoneStatus;
}

/** The task's approval requests; a pending one past its expiry shows as expired (swept or not). */
export function approvalGateMessages(gates: readonly ApprovalGate[] | undefined, now?: Date): MessageInitShape<typeof ApprovalGateSchema>[] {
  return (gates ?? []).map((g) => ({
    id: g.id,
    approvalFor: g.for,
    status: g.status === 'pending' && now && !isLivePending(g, now) ? 'expired' : g.status,
    requestedBy: g.requestedBy,
    requestedAt: g.requestedAt,
    expiresAt: g.expiresAt,
    ...(g.decidedAt ? { decidedAt: g.decidedAt } : {}),
  }));
}

export function toDoneStatusMessage(d: DoneStatus): MessageInitShape<typeof DoneStatusSchema> {
  return { ...d };
}

export function toTaskMessage(t: TaskRecord, options: TaskMessageOptions = {}): MessageInitShape<typeof TaskSchema> {
  return {
    id: t._id,
    workspaceId: t.workspaceId,
    projectId: t.projectId,
    milestoneId: t.milestoneId,
    initiativeId: t.initiativeId,
    parentId: t.parentId,
    title: t.title,
    description: t.description,
    status: t.status,
    priority: t.priority,
    labels: t.labels,
    dueDate: t.dueDate,
    estimate: t.estimate,
    dependencies: t.dependencies,
    acceptanceChecks: t.acceptanceChecks.map((c) => ({ id: c.id, title: c.title, done: c.done })),
    agent: {
      assignedAgentId: t.agent.assignedAgentId,
      readiness: agentReadiness({ status: t.status, openDependencyCount: t.openDependencyCount, instructions: t.agent.instructions }),
      instructions: { ...t.agent.instructions },
    },
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
    createdBy: t.createdBy,
    version: t.version,
    openDependencyCount: t.openDependencyCount,
    dependentCount: t.dependentCount,
    timeLoggedMinutes: t.timeLoggedMinutes,
    evidenceCount: t.evidenceCount,
    lastActivityAt: t.lastActivityAt,
    approvals: approvalGateMessages(t.approvalGates, options.now),
    ...(options.done ? { done: toDoneStatusMessage(options.done) } : {}),
  };
}

export function toHealthMessage(h: TaskHealth): MessageInitShape<typeof TaskHealthSchema> {
  return {
    blocksAgentClaim: h.blocksAgentClaim,
    reasons: h.reasons,
    firstReminder: h.firstReminder ?? undefined,
    reminders: h.reminders,
    safeNextActions: h.safeNextActions,
    nextAction: h.nextAction,
  };
}

/**
 * The task with its health as the caller sees it now, as a complete message: every field the
 * descriptor has, with its zero value when the record has none, and `$typeName` on each message,
 * exactly what `create(TaskViewSchema, …)` makes of the init shape (a test holds them equal). A
 * page of 200 of them then costs no per-field walk of the descriptor when the handler's result
 * becomes the response message.
 */
export function toTaskView(t: TaskRecord, context: HealthContext, done?: DoneStatus): TaskView {
  return { $typeName: TASK_VIEW, task: taskMessage(t, context.now, done), health: healthMessage(healthOf(healthInput(t), context)) };
}

/**
 * Until when `toTaskView(t, context)` (without a done status) stays what it is at `now`: the
 * health's own limit (healthStableUntil) and the first pending approval gate that expires.
 */
export function taskViewStableUntil(t: TaskRecord, now: Date): number {
  let until = healthStableUntil(healthInput(t), now);
  const at = now.getTime();
  for (const g of t.approvalGates ?? []) {
    if (g.status !== 'pending' || !isLivePending(g, now)) continue;
    const expires = Date.parse(g.expiresAt);
    if (Number.isNaN(expires)) return at;
    if (expires < until) until = expires;
  }
  return until;
}

interface SharedView {
  view: TaskView;
  /** The view holds from `from` (the time it was made at) until just before `until`. */
  from: number;
  until: number;
}

/** Views of frozen records, by record (one object per stored version) and caller (`callerKind`). */
const sharedViews = new WeakMap<TaskRecord, Map<CallerKind, SharedView>>();

type CallerKind = 'anyone' | 'assignee' | 'other-agent';

/**
 * What of the caller a view depends on: only whether an agent caller is the task's assignee
 * (claimBlockers' `assigned-to-another-agent`); with no assignee, or no agent, nothing.
 */
function callerKind(t: TaskRecord, agentId: string | undefined): CallerKind {
  const assignee = t.agent.assignedAgentId;
  if (assignee === undefined || agentId === undefined) return 'anyone';
  return assignee === agentId ? 'assignee' : 'other-agent';
}

/**
 * `toTaskView` for a record the store handed out `readonly` (frozen; the same object for every
 * read of the same stored version): the view is made once per record, kind of caller and stretch
 * of time it holds for (taskViewStableUntil), frozen and shared, so a page read again maps and
 * computes nothing, and a response view can memoise its JSON by the view's identity. A copy
 * (not frozen), or a caller with a claim known from elsewhere, gets a fresh view as before.
 */
export function sharedTaskView(t: TaskRecord, context: HealthContext): TaskView {
  if (context.activeClaim !== undefined || !Object.isFrozen(t)) return toTaskView(t, context);
  const caller = callerKind(t, context.agentId);
  const at = context.now.getTime();
  let views = sharedViews.get(t);
  const held = views?.get(caller);
  if (held !== undefined && held.from <= at && at < held.until) return held.view;
  const view = deepFreeze(toTaskView(t, context));
  const until = taskViewStableUntil(t, context.now);
  if (until > at) {
    if (views === undefined) sharedViews.set(t, (views = new Map()));
    views.set(caller, { view, from: at, until });
  }
  return view;
}

const TASK_VIEW = 'planning.issues.v1.TaskView';
const TASK = 'planning.issues.v1.Task';

/** Sets `key` on `out` when `value` is present: what `create` does with an optional field. */
function setOptional<T extends object, K extends keyof T>(out: T, key: K, value: T[K] | null | undefined): void {
  if (value !== undefined && value !== null) out[key] = value;
}

function taskMessage(t: TaskRecord, now: Date, done: DoneStatus | undefined): Task {
  const i = t.agent.instructions;
  const agent: TaskAgent = {
    $typeName: 'planning.issues.v1.TaskAgent',
    readiness: agentReadiness({ status: t.status, openDependencyCount: t.openDependencyCount, instructions: i }),
    instructions: {
      $typeName: 'planning.issues.v1.TaskInstructions',
      objective: i.objective ?? '',
      constraints: i.constraints ?? [],
      expectedOutput: i.expectedOutput ?? '',
      verification: i.verification ?? [],
      permissions: i.permissions ?? [],
      escalation: i.escalation ?? '',
    },
  };
  setOptional(agent, 'assignedAgentId', t.agent.assignedAgentId);
  const checks: AcceptanceCheck[] = new Array<AcceptanceCheck>(t.acceptanceChecks.length);
  for (let k = 0; k < checks.length; k++) {
    const c = t.acceptanceChecks[k]!;
    const check: AcceptanceCheck = { $typeName: 'planning.issues.v1.AcceptanceCheck', id: c.id ?? '', title: c.title ?? '' };
    setOptional(check, 'done', c.done);
    checks[k] = check;
  }
  const gates = t.approvalGates ?? [];
  const approvals: ApprovalGateMessage[] = new Array<ApprovalGateMessage>(gates.length);
  for (let k = 0; k < gates.length; k++) {
    const g = gates[k]!;
    const gate: ApprovalGateMessage = {
      $typeName: 'planning.issues.v1.ApprovalGate',
      id: g.id ?? '',
      approvalFor: g.for ?? '',
      status: (g.status === 'pending' && !isLivePending(g, now) ? 'expired' : g.status) ?? '',
      requestedBy: g.requestedBy ?? '',
      requestedAt: g.requestedAt ?? '',
      expiresAt: g.expiresAt ?? '',
    };
    setOptional(gate, 'decidedAt', g.decidedAt || undefined);
    approvals[k] = gate;
  }
  const message: Task = {
    $typeName: TASK,
    id: t._id ?? '',
    workspaceId: t.workspaceId ?? '',
    projectId: t.projectId ?? '',
    title: t.title ?? '',
    description: t.description ?? '',
    status: t.status ?? '',
    priority: t.priority ?? '',
    labels: t.labels ?? [],
    dependencies: t.dependencies ?? [],
    acceptanceChecks: checks,
    agent,
    createdAt: t.createdAt ?? '',
    updatedAt: t.updatedAt ?? '',
    createdBy: t.createdBy ?? '',
    version: t.version ?? 0,
    openDependencyCount: t.openDependencyCount ?? 0,
    dependentCount: t.dependentCount ?? 0,
    timeLoggedMinutes: t.timeLoggedMinutes ?? 0,
    evidenceCount: t.evidenceCount ?? 0,
    lastActivityAt: t.lastActivityAt ?? '',
    approvals,
  };
  setOptional(message, 'milestoneId', t.milestoneId);
  setOptional(message, 'initiativeId', t.initiativeId);
  setOptional(message, 'parentId', t.parentId);
  setOptional(message, 'dueDate', t.dueDate);
  setOptional(message, 'estimate', t.estimate);
  if (done) message.done = create(DoneStatusSchema, toDoneStatusMessage(done));
  return message;
}

function healthMessage(h: TaskHealth): TaskHealthMessage {
  const reminder = (r: { kind: string; message: string }): Reminder => ({ $typeName: 'planning.issues.v1.Reminder', kind: r.kind, message: r.message });
  const message: TaskHealthMessage = {
    $typeName: 'planning.issues.v1.TaskHealth',
    blocksAgentClaim: h.blocksAgentClaim,
    reasons: h.reasons,
    reminders: h.reminders.map(reminder),
    safeNextActions: h.safeNextActions.map((a) => ({ $typeName: 'planning.issues.v1.SafeAction', action: a.action, description: a.description })),
    nextAction: h.nextAction,
  };
  if (h.firstReminder) message.firstReminder = reminder(h.firstReminder);
  return message;
}

export function toContractMessage(t: TaskRecord): MessageInitShape<typeof TaskContractSchema> {
  const i = t.agent.instructions;
  const c = completeness(i);
  return {
    issueId: t._id,
    goal: i.objective,
    constraints: i.constraints,
    expectedOutput: i.expectedOutput,
    verification: i.verification,
    permissions: i.permissions,
    escalation: i.escalation,
    completeness: { ready: c.ready, score: c.score },
    missingSections: c.missing,
    version: t.version,
    updatedAt: t.updatedAt,
  };
}

export function toActivityMessage(a: ActivityRecord): MessageInitShape<typeof ActivitySchema> {
  return {
    id: a._id,
    issueId: a.issueId,
    actor: a.actor,
    kind: a.kind,
    changes: a.changes.map((c) => ({
      field: c.field,
      ...(c.from !== undefined ? { fromJson: JSON.stringify(c.from) } : {}),
      ...(c.to !== undefined ? { toJson: JSON.stringify(c.to) } : {}),
    })),
    at: a.at,
  };
}

export function toCommentMessage(c: CommentRecord): MessageInitShape<typeof CommentSchema> {
  return { id: c._id, issueId: c.issueId, authorId: c.authorId, authorType: c.authorType, body: c.body, createdAt: c.createdAt };
}

export function toTimeEntryMessage(e: TimeEntryRecord): MessageInitShape<typeof TimeEntrySchema> {
  return { id: e._id, issueId: e.issueId, actorId: e.actorId, minutes: e.minutes, note: e.note, loggedAt: e.loggedAt };
}

export function toEvidenceMessage(e: EvidenceRecord): MessageInitShape<typeof EvidenceSchema> {
  return {
    id: e._id,
    issueId: e.issueId,
    kind: e.kind,
    title: e.title,
    url: e.url,
    body: e.body,
    checkId: e.checkId,
    createdBy: e.createdBy,
    createdAt: e.createdAt,
  };
}

export function toApprovalMessage(a: ApprovalRecord): MessageInitShape<typeof ApprovalSchema> {
  return {
    id: a._id,
    issueId: a.issueId,
    requestedBy: a.requestedBy,
    reason: a.reason,
    status: a.status,
    decidedBy: a.decidedBy,
    decidedAt: a.decidedAt,
    decisionNote: a.decisionNote,
    createdAt: a.createdAt,
    approvalFor: a.for ?? 'custom',
    // Requests from before expiry existed: created + the default lifetime.
    expiresAt: a.expiresAt ?? new Date(Date.parse(a.createdAt) + DEFAULT_APPROVAL_TTL_SECONDS * 1_000).toISOString(),
  };
}

/** The raw sections of a brief patch (validated by the domain). */
export function rawInstructionsPatch(p: InstructionsPatchMessage): Record<string, unknown> {
  const raw: Record<string, unknown> = {};
  if (p.objective !== undefined) raw.objective = p.objective;
  if (p.expectedOutput !== undefined) raw.expectedOutput = p.expectedOutput;
  if (p.escalation !== undefined) raw.escalation = p.escalation;
  if (p.constraints) raw.constraints = p.constraints.values;
  if (p.verification) raw.verification = p.verification.values;
  if (p.permissions) raw.permissions = p.permissions.values;
  return raw;
}

/** Decodes and validates a task patch (field names in errors are the REST ones). */
export function patchFromMessage(p: TaskPatchMessage | undefined): TaskPatch {
  if (!p) return {};
  const raw: RawTaskPatch = {};
  if (p.title !== undefined) raw.title = p.title;
  if (p.description !== undefined) raw.description = p.description;
  if (p.status !== undefined) raw.status = p.status;
  if (p.priority !== undefined) raw.priority = p.priority;
  if (p.labels) raw.labels = p.labels.values;
  if (p.addLabels.length > 0) raw.addLabels = p.addLabels;
  if (p.removeLabels.length > 0) raw.removeLabels = p.removeLabels;
  if (p.milestoneId !== undefined) raw.milestoneId = p.milestoneId;
  if (p.initiativeId !== undefined) raw.initiativeId = p.initiativeId;
  if (p.parentId !== undefined) raw.parentId = p.parentId;
  if (p.dueDate !== undefined) raw.dueDate = p.dueDate;
  if (p.estimate !== undefined) raw.estimate = p.estimate;
  if (p.dependencies) raw.dependencies = p.dependencies.values;
  if (p.acceptanceChecks) {
    raw.acceptanceChecks = p.acceptanceChecks.checks.map((c) => ({
      ...(c.id ? { id: c.id } : {}),
      title: c.title,
      ...(c.done !== undefined ? { done: c.done } : {}),
    }));
  }
  if (p.assignedAgentId !== undefined) raw.assignedAgentId = p.assignedAgentId;
  if (p.instructions) raw.instructions = rawInstructionsPatch(p.instructions);
  for (const field of p.clearFields) {
    if (!(CLEARABLE_FIELDS as readonly string[]).includes(field)) {
      throw invalidInput('clearFields', `'clearFields' may name ${CLEARABLE_FIELDS.join(', ')}`);
    }
    const key = field === 'agent.assignedAgentId' ? 'assignedAgentId' : (field as keyof RawTaskPatch);
    if (raw[key] !== undefined) throw invalidInput(field, `'${field}' is both set and cleared`);
    (raw as Record<string, unknown>)[key] = null;
  }
  return validatePatch(raw);
}
