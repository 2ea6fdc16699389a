/**
 * Request schemas of the planning routes and the translation of REST bodies into the issues
 * service's messages. The schemas catch shape errors early (400 naming the field) and document
 * the API; the issues service checks every rule again, for every caller.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ContextPackItemSchema } from '@planning/proto/planning/issues/v1/projects_pb';
import type { CreateTaskRequestSchema, InstructionsPatchSchema, TaskPatchSchema } from '@planning/proto/planning/issues/v1/tasks_pb';
import { component } from '../openapi.js';

export const idSchema = { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_:.-]+$' } as const;
export const nullableId = { type: ['string', 'null'], minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_:.-]+$' } as const;
export const dateSchema = { type: 'string', format: 'date', maxLength: 10 } as const;
export const limitSchema = { type: 'integer', minimum: 1, maximum: 200 } as const;
export const cursorSchema = { type: 'string', maxLength: 4000 } as const;
export const qSchema = { type: 'string', maxLength: 200 } as const;
export const agentIdSchema = { type: 'string', maxLength: 64, pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' } as const;

export const PRIORITY_ENUM = ['urgent', 'high', 'medium', 'low', 'none'] as const;
export const STATUS_ENUM = ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] as const;

/**
 * `status=a,b` and `status=a&status=b` both mean "any of". With `values`, each item is one of them
 * or a comma-separated list of them (an unknown value is 400 naming the parameter).
 */
export const commaListOf = (what: string, values?: readonly string[]) => {
  const one = values ? `(${values.map((v) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})` : undefined;
  return {
    type: 'array',
    maxItems: 50,
    items: { type: 'string', maxLength: 2000, ...(one ? { pattern: `^\\s*${one}(\\s*,\\s*${one})*\\s*$` } : {}) },
    description: `Comma-separated ${what} (any of)${values ? `: ${values.map((v) => `\`${v}\``).join(', ')}` : ''}; or repeat the parameter.`,
  } as const;
};

/** The task filters and order of GET /api/issues, shared by the export (GET /api/issues/export). */
export const taskFilterProperties = {
  projectId: idSchema,
  milestoneId: idSchema,
  initiativeId: idSchema,
  parentId: idSchema,
  status: commaListOf('statuses', STATUS_ENUM),
  priority: commaListOf('priorities', PRIORITY_ENUM),
  label: commaListOf('labels'),
  assignedAgentId: agentIdSchema,
  dependencyState: { type: 'string', enum: ['blocked', 'unblocked'] },
  q: { ...qSchema, description: 'Literal text, case-insensitive, in title and description.' },
  sort: { type: 'string', enum: ['priority', 'updatedAt', 'createdAt', 'dueDate', 'title'] },
  direction: { type: 'string', enum: ['asc', 'desc'] },
} as const;

/** `fencingToken` on every agent write (docs/claims.md, "Writes under claims"). */
export const fencingTokenSchema = {
  type: 'integer',
  minimum: 1,
  maximum: 2147483647,
  description: "An agent writing under its claim: the claim's fencing token (409 `stale-claim` when it is not the current claim's).",
} as const;

/** A member completing a task although the done policy (or a pending approval) would refuse; audited. */
export const overrideSchema = {
  type: 'object',
  required: ['reason'],
  additionalProperties: false,
  description: 'Members only (403 for agents), with a status move: sets the done policy and pending approvals aside, recorded in activity and the audit trail.',
  properties: { reason: { type: 'string', minLength: 1, maxLength: 2000 } },
} as const;

export const idParams = { type: 'object', required: ['id'], properties: { id: idSchema } } as const;

export const contextPackSchema = {
  type: 'array',
  maxItems: 50,
  items: component('ContextPackItemInput', {
    type: 'object',
    required: ['kind', 'title'],
    additionalProperties: false,
    properties: {
      kind: { type: 'string', enum: ['file', 'doc', 'link'] },
      title: { type: 'string', minLength: 1, maxLength: 300 },
      path: { type: 'string', maxLength: 500 },
      url: { type: 'string', maxLength: 2000 },
      note: { type: 'string', maxLength: 1000 },
    },
  }),
} as const;

const sectionText = { type: ['string', 'null'], maxLength: 2000 } as const;
const sectionList = { type: ['array', 'null'], maxItems: 30, items: { type: 'string', maxLength: 500 } } as const;

/** `agent.instructions`: the task brief's sections; null (or '' / []) unsets a section. */
export const instructionsSchema = component('TaskInstructionsInput', {
  type: 'object',
  additionalProperties: false,
  properties: {
    objective: sectionText,
    constraints: sectionList,
    expectedOutput: sectionText,
    verification: sectionList,
    permissions: sectionList,
    escalation: sectionText,
  },
});

export const labelsSchema = { type: 'array', maxItems: 20, items: { type: 'string', minLength: 1, maxLength: 50 } } as const;

const checkSchema = component('AcceptanceCheckInput', {
  type: 'object',
  required: ['title'],
  additionalProperties: false,
  properties: { id: idSchema, title: { type: 'string', minLength: 1, maxLength: 300 }, done: { type: 'boolean' } },
});
export const checksSchema = { type: 'array', maxItems: 50, items: checkSchema } as const;

/** The fields of `PATCH /api/issues/{id}` (and, restricted, of a bulk update's `patch`). */
export const issuePatchProperties = {
  title: { type: 'string', minLength: 1, maxLength: 300 },
  description: { type: ['string', 'null'], maxLength: 20000 },
  status: { type: 'string', enum: STATUS_ENUM },
  priority: { type: 'string', enum: PRIORITY_ENUM },
  labels: {
    description: 'An array replaces the labels; `{ add, remove }` changes some.',
    anyOf: [
      labelsSchema,
      { type: 'object', additionalProperties: false, properties: { add: labelsSchema, remove: labelsSchema } },
    ],
  },
  milestoneId: nullableId,
  initiativeId: nullableId,
  parentId: nullableId,
  dueDate: { type: ['string', 'null'], format: 'date', maxLength: 10 },
  estimate: { type: ['number', 'null'], minimum: 0, maximum: 10000 },
  dependencies: { type: 'array', maxItems: 50, items: idSchema },
  acceptanceChecks: checksSchema,
  agent: {
    type: 'object',
    additionalProperties: false,
    properties: { assignedAgentId: { anyOf: [agentIdSchema, { type: 'null' }] }, instructions: instructionsSchema },
  },
} as const;

type Json = Record<string, unknown>;
type Section = string | string[] | null | undefined;

export interface RestInstructions {
  objective?: string | null;
  constraints?: string[] | null;
  expectedOutput?: string | null;
  verification?: string[] | null;
  permissions?: string[] | null;
  escalation?: string | null;
}

/** A brief patch: null unsets a section ('' for text, [] for lists). */
export function instructionsPatch(i: RestInstructions): MessageInitShape<typeof InstructionsPatchSchema> {
  const text = (v: Section): string | undefined => (v === undefined ? undefined : ((v as string | null) ?? ''));
  const list = (v: Section): { values: string[] } | undefined => (v === undefined ? undefined : { values: (v as string[] | null) ?? [] });
  return {
    objective: text(i.objective),
    expectedOutput: text(i.expectedOutput),
    escalation: text(i.escalation),
    constraints: list(i.constraints),
    verification: list(i.verification),
    permissions: list(i.permissions),
  };
}

export interface RestIssuePatch {
  title?: string;
  description?: string | null;
  status?: string;
  priority?: string;
  labels?: string[] | { add?: string[]; remove?: string[] };
  milestoneId?: string | null;
  initiativeId?: string | null;
  parentId?: string | null;
  dueDate?: string | null;
  estimate?: number | null;
  dependencies?: string[];
  acceptanceChecks?: { id?: string; title: string; done?: boolean }[];
  agent?: { assignedAgentId?: string | null; instructions?: RestInstructions };
}

/** A REST issue patch as the issues service's `TaskPatch`: null becomes `clearFields`. */
export function taskPatch(body: RestIssuePatch): MessageInitShape<typeof TaskPatchSchema> {
  const patch: MessageInitShape<typeof TaskPatchSchema> & Json = { clearFields: [] };
  const clear = (field: string) => (patch.clearFields as string[]).push(field);
  if (body.title !== undefined) patch.title = body.title;
  if (body.description !== undefined) patch.description = body.description ?? '';
  if (body.status !== undefined) patch.status = body.status;
  if (body.priority !== undefined) patch.priority = body.priority;
  if (Array.isArray(body.labels)) patch.labels = { values: body.labels };
  else if (body.labels) {
    patch.addLabels = body.labels.add ?? [];
    patch.removeLabels = body.labels.remove ?? [];
  }
  for (const key of ['milestoneId', 'initiativeId', 'parentId', 'dueDate'] as const) {
    const value = body[key];
    if (value === null) clear(key);
    else if (value !== undefined) patch[key] = value;
  }
  if (body.estimate === null) clear('estimate');
  else if (body.estimate !== undefined) patch.estimate = body.estimate;
  if (body.dependencies !== undefined) patch.dependencies = { values: body.dependencies };
  if (body.acceptanceChecks !== undefined) {
    patch.acceptanceChecks = { checks: body.acceptanceChecks.map((c) => ({ id: c.id ?? '', title: c.title, done: c.done })) };
  }
  if (body.agent?.assignedAgentId === null) clear('agent.assignedAgentId');
  else if (body.agent?.assignedAgentId !== undefined) patch.assignedAgentId = body.agent.assignedAgentId;
  if (body.agent?.instructions !== undefined) patch.instructions = instructionsPatch(body.agent.instructions);
  return patch;
}

export function contextPackInput(items: { kind: string; title: string; path?: string; url?: string; note?: string }[] | undefined): MessageInitShape<typeof ContextPackItemSchema>[] {
  return (items ?? []).map((i) => ({ kind: i.kind, title: i.title, path: i.path, url: i.url, note: i.note }));
}

/** Comma-separated query values as one list (`status=ready,in-progress&status=done`); empty items dropped. */
export function commaList(values: readonly string[] | undefined): string[] {
  return (values ?? []).flatMap((v) => v.split(',')).map((s) => s.trim()).filter(Boolean);
}

/** POST /api/issues's body (and the MCP tool create_issue's arguments). */
export interface RestIssueCreate extends Omit<RestIssuePatch, 'labels' | 'agent'> {
  workspaceId?: string;
  projectId: string;
  title: string;
  labels?: string[];
  agent?: { assignedAgentId?: string; instructions?: RestInstructions };
}

/** A create body as the issues service's CreateTask request. */
export function createTaskRequest(b: RestIssueCreate): MessageInitShape<typeof CreateTaskRequestSchema> {
  const i = b.agent?.instructions;
  return {
    workspaceId: b.workspaceId,
    projectId: b.projectId,
    title: b.title,
    description: b.description ?? undefined,
    status: b.status,
    priority: b.priority,
    labels: b.labels ?? [],
    milestoneId: b.milestoneId ?? undefined,
    initiativeId: b.initiativeId ?? undefined,
    parentId: b.parentId ?? undefined,
    dueDate: b.dueDate ?? undefined,
    estimate: b.estimate ?? undefined,
    dependencies: b.dependencies ?? [],
    acceptanceChecks: (b.acceptanceChecks ?? []).map((c) => ({ id: c.id ?? '', title: c.title, done: c.done })),
    assignedAgentId: b.agent?.assignedAgentId,
    instructions: i
      ? {
          objective: i.objective ?? '',
          constraints: i.constraints ?? [],
          expectedOutput: i.expectedOutput ?? '',
          verification: i.verification ?? [],
          permissions: i.permissions ?? [],
          escalation: i.escalation ?? '',
        }
      : undefined,
  };
}
