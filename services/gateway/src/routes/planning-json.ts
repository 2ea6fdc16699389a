/**
 * REST shapes of the planning records (projects, milestones, programs, initiatives, issues and
 * what accumulates on them): the mapping from the issues service's messages, and the JSON
 * schemas that document them (and, as fastify response schemas, serialize them: every property
 * a mapper returns is listed).
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { component, entityRefSchema } from '../openapi.js';
import { activityJson, approvalJson, commentJson, doneStatusJson, evidenceJson, issueJson } from '../views.js';
import type { InitiativeSchema, ProgramSchema } from '@planning/proto/planning/issues/v1/programs_pb';
import type { ContextPackItemSchema, MilestoneSchema, ProjectSchema } from '@planning/proto/planning/issues/v1/projects_pb';
import type {
  ApprovalGateSchema,
  TaskContractSchema,
  TimeEntrySchema,
} from '@planning/proto/planning/issues/v1/tasks_pb';

type Shape<S extends DescMessage> = MessageShape<S>;

// ---- mappers ---------------------------------------------------------------------------------

function contextPackJson(items: readonly Shape<typeof ContextPackItemSchema>[]) {
  return items.map((i) => ({ kind: i.kind, title: i.title, path: i.path ?? null, url: i.url ?? null, note: i.note ?? null }));
}

export function projectJson(p: Shape<typeof ProjectSchema>) {
  return {
    id: p.id,
    workspaceId: p.workspaceId,
    name: p.name,
    status: p.status,
    goal: p.goal,
    initiativeId: p.initiativeId ?? null,
    contextPack: contextPackJson(p.contextPack),
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
    createdBy: p.createdBy,
    version: p.version,
    doneRequires: p.doneRequires ?? null,
    doneGate: p.doneGate ?? null,
  };
}

export function milestoneJson(m: Shape<typeof MilestoneSchema>) {
  return {
    id: m.id,
    workspaceId: m.workspaceId,
    projectId: m.projectId,
    name: m.name,
    status: m.status,
    targetDate: m.targetDate ?? null,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
    version: m.version,
  };
}

export function programJson(p: Shape<typeof ProgramSchema>) {
  return {
    id: p.id,
    workspaceId: p.workspaceId,
    name: p.name,
    status: p.status,
    ownerId: p.ownerId,
    description: p.description,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
    version: p.version,
  };
}

export function initiativeJson(i: Shape<typeof InitiativeSchema>) {
  return {
    id: i.id,
    workspaceId: i.workspaceId,
    programId: i.programId,
    name: i.name,
    status: i.status,
    ownerIds: i.ownerIds,
    goal: i.goal,
    startDate: i.startDate ?? null,
    targetDate: i.targetDate ?? null,
    contextPack: contextPackJson(i.contextPack),
    createdAt: i.createdAt,
    updatedAt: i.updatedAt,
    version: i.version,
  };
}

// These live with the response views (the services' thread renders pages and details with them).
export { activityJson, approvalJson, commentJson, doneStatusJson, evidenceJson, issueJson };

export function timeEntryJson(e: Shape<typeof TimeEntrySchema>) {
  return { id: e.id, issueId: e.issueId, actorId: e.actorId, minutes: e.minutes, note: e.note, loggedAt: e.loggedAt };
}

/** An approval request as a task summarises it (pending ones, and the latest decided per `for`). */
export function approvalGateJson(g: Shape<typeof ApprovalGateSchema>) {
  return {
    id: g.id,
    for: g.approvalFor,
    status: g.status,
    requestedBy: g.requestedBy,
    requestedAt: g.requestedAt,
    expiresAt: g.expiresAt,
    decidedAt: g.decidedAt ?? null,
  };
}

export function taskContractJson(c: Shape<typeof TaskContractSchema> | undefined) {
  return {
    issueId: c?.issueId ?? '',
    goal: c?.goal ?? '',
    constraints: c?.constraints ?? [],
    expectedOutput: c?.expectedOutput ?? '',
    verification: c?.verification ?? [],
    permissions: c?.permissions ?? [],
    escalation: c?.escalation ?? '',
    completeness: { ready: c?.completeness?.ready ?? false, score: c?.completeness?.score ?? 0 },
    missingSections: c?.missingSections ?? [],
    version: c?.version ?? 0,
    updatedAt: c?.updatedAt ?? '',
  };
}

// ---- schemas ---------------------------------------------------------------------------------

const str = { type: 'string' } as const;
const nullableStr = { type: ['string', 'null'] } as const;
const time = { type: 'string', format: 'date-time' } as const;
const int = { type: 'integer' } as const;
const strings = { type: 'array', items: str } as const;
const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  ({ type: 'object', required: Object.keys(properties), properties, ...extra }) as const;

const contextPackItemSchema = component('ContextPackItem', obj({ kind: { type: 'string', enum: ['file', 'doc', 'link'] }, title: str, path: nullableStr, url: nullableStr, note: nullableStr }));

export const projectSchema = component('Project', obj({
  id: str,
  workspaceId: str,
  name: str,
  status: { type: 'string', enum: ['active', 'paused', 'completed', 'archived'] },
  goal: str,
  initiativeId: nullableStr,
  contextPack: { type: 'array', items: contextPackItemSchema },
  createdAt: time,
  updatedAt: time,
  createdBy: str,
  version: int,
  doneRequires: { type: ['string', 'null'], enum: ['nothing', 'evidence', 'evidence-and-approval', null], description: "The project's own done policy; null: the workspace's applies." },
  doneGate: { type: ['string', 'null'], enum: ['done', 'in-review', null], description: "The first move the project's policy gates; null: the workspace's." },
}));

export const milestoneSchema = component('Milestone', obj({
  id: str,
  workspaceId: str,
  projectId: str,
  name: str,
  status: { type: 'string', enum: ['active', 'completed', 'cancelled'] },
  targetDate: { type: ['string', 'null'], format: 'date' },
  createdAt: time,
  updatedAt: time,
  version: int,
}));

export const programSchema = component('Program', obj({
  id: str,
  workspaceId: str,
  name: str,
  status: { type: 'string', enum: ['active', 'paused', 'completed', 'archived'] },
  ownerId: str,
  description: str,
  createdAt: time,
  updatedAt: time,
  version: int,
}));

export const initiativeSchema = component('Initiative', obj({
  id: str,
  workspaceId: str,
  programId: str,
  name: str,
  status: { type: 'string', enum: ['active', 'paused', 'completed', 'archived'] },
  ownerIds: strings,
  goal: str,
  startDate: { type: ['string', 'null'], format: 'date' },
  targetDate: { type: ['string', 'null'], format: 'date' },
  contextPack: { type: 'array', items: contextPackItemSchema },
  createdAt: time,
  updatedAt: time,
  version: int,
}));

export const reminderSchema = component('Reminder', obj({ kind: { type: 'string', enum: ['overdue', 'stale-update', 'missing-time', 'missing-dates'] }, message: str }));
/** A safe next action as REST words it: an id and a sentence naming the REST call (MCP names the tool instead). */
export const safeActionSchema = component('SafeNextAction', obj({ action: str, description: str }));

export const taskHealthSchema = component('TaskHealth', obj({
  blocksAgentClaim: { type: 'boolean' },
  reasons: { type: 'array', items: { type: 'string', enum: ['status-not-ready', 'dependencies-open', 'assigned-to-another-agent', 'active-claim'] } },
  firstReminder: { anyOf: [reminderSchema, { type: 'null' }] },
  reminders: { type: 'array', items: reminderSchema },
  safeNextActions: { type: 'array', items: safeActionSchema },
}));

const instructionsSchema = component('TaskInstructions', obj({
  objective: str,
  constraints: strings,
  expectedOutput: str,
  verification: strings,
  permissions: strings,
  escalation: str,
}));

const issueProperties = {
  id: str,
  workspaceId: str,
  projectId: str,
  milestoneId: nullableStr,
  initiativeId: nullableStr,
  parentId: nullableStr,
  title: str,
  description: str,
  status: { type: 'string', enum: ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] },
  priority: { type: 'string', enum: ['urgent', 'high', 'medium', 'low', 'none'] },
  labels: strings,
  dueDate: { type: ['string', 'null'], format: 'date' },
  estimate: { type: ['number', 'null'] },
  dependencies: { ...strings, description: 'Ids of tasks in the same workspace that must be done first.' },
  acceptanceChecks: { type: 'array', items: component('AcceptanceCheck', obj({ id: str, title: str, done: { type: 'boolean' } })) },
  agent: component(
    'TaskAgent',
    obj({
      assignedAgentId: nullableStr,
      readiness: { type: 'string', enum: ['ready', 'blocked', 'needs-brief', 'not-ready', 'closed'] },
      instructions: instructionsSchema,
    }),
  ),
  openDependencyCount: int,
  dependentCount: int,
  timeLoggedMinutes: int,
  evidenceCount: int,
  createdAt: time,
  updatedAt: time,
  createdBy: str,
  version: int,
  lastActivityAt: time,
  nextAction: str,
  taskHealth: taskHealthSchema,
} as const;

export const issueSchema = component('Issue', obj(issueProperties));

export const activitySchema = component('Activity', obj(
  {
    id: { ...nullableStr, description: 'null in a bulk-update preview (nothing was recorded)' },
    issueId: str,
    actor: entityRefSchema,
    kind: str,
    changes: {
      type: 'array',
      items: { type: 'object', required: ['field'], properties: { field: str, from: {}, to: {} } },
    },
    at: time,
  },
));

export const commentSchema = component('Comment', obj({ id: str, issueId: str, authorId: str, authorType: str, body: str, createdAt: time }));
export const timeEntrySchema = component('TimeEntry', obj({ id: str, issueId: str, actorId: str, minutes: int, note: str, loggedAt: time }));
export const evidenceSchema = component('Evidence', obj({
  id: str,
  issueId: str,
  kind: { type: 'string', enum: ['link', 'log', 'test-result', 'artifact', 'note'] },
  title: str,
  url: nullableStr,
  body: nullableStr,
  checkId: nullableStr,
  createdBy: str,
  createdAt: time,
}));
export const APPROVAL_FOR = ['done', 'in-review', 'merge', 'custom'] as const;
export const APPROVAL_STATUS = ['pending', 'approved', 'rejected', 'expired'] as const;

export const approvalSchema = component('Approval', obj({
  id: str,
  issueId: str,
  requestedBy: str,
  reason: str,
  status: { type: 'string', enum: APPROVAL_STATUS },
  decidedBy: nullableStr,
  decidedAt: { type: ['string', 'null'], format: 'date-time' },
  decisionNote: nullableStr,
  createdAt: time,
  for: { type: 'string', enum: APPROVAL_FOR, description: 'The move it gates (done, in-review: blocked while pending) or an outside step (merge, custom).' },
  expiresAt: { ...time, description: 'A pending request stops blocking (and expires) at this instant.' },
}));

export const approvalGateSchema = component('ApprovalGate', obj({
  id: str,
  for: { type: 'string', enum: APPROVAL_FOR },
  status: { type: 'string', enum: APPROVAL_STATUS },
  requestedBy: str,
  requestedAt: time,
  expiresAt: time,
  decidedAt: { type: ['string', 'null'], format: 'date-time' },
}));

export const doneStatusSchema = component('DoneStatus', obj({
  requires: { type: 'string', enum: ['nothing', 'evidence', 'evidence-and-approval'], description: 'The done policy in force (the project\'s, else the workspace\'s).' },
  gate: { type: 'string', enum: ['done', 'in-review'], description: 'done: moves to done are gated; in-review: moves to in-review and to done.' },
  missingCheckIds: { ...strings, description: 'Acceptance checks no evidence names yet (add evidence with checkId).' },
  evidencedChecks: int,
  evidenceCount: int,
  approval: { type: 'string', enum: ['not-required', 'missing', 'pending', 'approved', 'rejected'], description: 'The approval the policy needs: for done, approved after the last evidence.' },
  ready: { type: 'boolean', description: 'The gated moves would pass now.' },
  nextStep: { ...str, description: 'What is still to do, in words; empty when ready.' },
}));

const edgeSchema = component('DependencyEdge', obj({ sourceIssueId: str, targetIssueId: str }));
export const dependencyGraphSchema = component('DependencyGraph', obj({ edges: { type: 'array', items: edgeSchema } }));
export const refSchema = component('TaskRef', obj({ id: str, title: str, status: str }));

/** An issue's id and status, as writes that move it answer. */
export const issueStatusSchema = component('IssueStatus', obj({ id: str, status: str }));

/** An issue and what accumulates on it: `allOf` the issue, so a generated client's type extends Issue. */
export const issueDetailSchema = component('IssueDetail', {
  allOf: [
    issueSchema,
    obj({
      comments: { type: 'array', items: commentSchema },
      commentCount: int,
      activity: { type: 'array', items: activitySchema },
      activityCount: int,
      evidence: { type: 'array', items: evidenceSchema },
      approvals: { type: 'array', items: approvalSchema },
      done: doneStatusSchema,
      dependencyGraph: component(
        'IssueGraphContext',
        obj({ dependencies: { type: 'array', items: refSchema }, dependents: { type: 'array', items: refSchema }, edges: { type: 'array', items: edgeSchema } }),
      ),
    }),
  ],
});

export const taskContractSchema = component('TaskContract', obj({
  issueId: str,
  goal: str,
  constraints: strings,
  expectedOutput: str,
  verification: strings,
  permissions: strings,
  escalation: str,
  completeness: obj({ ready: { type: 'boolean' }, score: { type: 'number' } }),
  missingSections: strings,
  version: int,
  updatedAt: time,
}));

/** An item of GET /api/issues/reminders (also the MCP tool get_issue_reminders). */
export function reminderItemJson(i: {
  issueId: string;
  workspaceId: string;
  title: string;
  status: string;
  priority: string;
  dueDate?: string;
  reminders: { kind: string; message: string }[];
  safeNextActions: { action: string; description: string }[];
}) {
  return {
    issueId: i.issueId,
    workspaceId: i.workspaceId,
    title: i.title,
    status: i.status,
    priority: i.priority,
    dueDate: i.dueDate ?? null,
    reminders: i.reminders.map((r) => ({ kind: r.kind, message: r.message })),
    safeNextActions: i.safeNextActions.map((a) => ({ action: a.action, description: a.description })),
  };
}
