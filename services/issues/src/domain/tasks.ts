/**
 * Tasks (issues): their fields, priorities, validation of new tasks and patches, and `applyPatch`,
 * the one function that turns a patch into a new task state (status moves included). PATCH,
 * bulk update and the MCP tools all go through it.
 */
import { invalidInput } from '@planning/errors';
import {
  LIMITS,
  optionalId,
  validateDate,
  validateEnum,
  validateIdList,
  validateLabels,
  validateName,
  validateText,
} from './fields.js';
import {
  emptyInstructions,
  mergeInstructions,
  sectionField,
  validateInstructionsPatch,
  type Instructions,
  type InstructionsPatch,
} from './task-contract.js';
import { assertMove, isTaskStatus, TASK_STATUSES, type MoveActor, type TaskStatus } from './task-status.js';

export const PRIORITIES = ['urgent', 'high', 'medium', 'low', 'none'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** urgent > high > medium > low > none. */
export const PRIORITY_RANK: Readonly<Record<Priority, number>> = { urgent: 4, high: 3, medium: 2, low: 1, none: 0 };

export const DEFAULT_PRIORITY: Priority = 'medium';
export const DEFAULT_STATUS: TaskStatus = 'ready';

export function isPriority(value: unknown): value is Priority {
  return typeof value === 'string' && (PRIORITIES as readonly string[]).includes(value);
}

export interface AcceptanceCheck {
  id: string;
  title: string;
  done: boolean;
}

/** The fields a task owns (what patches change). Optional references are absent when unset. */
export interface TaskFields {
  workspaceId: string;
  projectId: string;
  milestoneId?: string;
  initiativeId?: string;
  parentId?: string;
  title: string;
  description: string;
  status: TaskStatus;
  priority: Priority;
  labels: string[];
  dueDate?: string;
  estimate?: number;
  dependencies: string[];
  acceptanceChecks: AcceptanceCheck[];
  agent: { assignedAgentId?: string; instructions: Instructions };
}

/** One field's change, as activity records it. Long text keeps only the field name. */
export interface FieldChange {
  field: string;
  from?: unknown;
  to?: unknown;
}

export interface AcceptanceCheckInput {
  id?: string;
  title: string;
  done?: boolean;
}

/** A change to a task; `null` unsets an optional field. */
export interface TaskPatch {
  title?: string;
  description?: string;
  status?: TaskStatus;
  priority?: Priority;
  labels?: string[];
  addLabels?: string[];
  removeLabels?: string[];
  milestoneId?: string | null;
  initiativeId?: string | null;
  parentId?: string | null;
  dueDate?: string | null;
  estimate?: number | null;
  dependencies?: string[];
  acceptanceChecks?: AcceptanceCheckInput[];
  assignedAgentId?: string | null;
  instructions?: InstructionsPatch;
}

/** Optional fields a patch may unset (wire names). */
export const CLEARABLE_FIELDS = ['milestoneId', 'initiativeId', 'parentId', 'dueDate', 'estimate', 'agent.assignedAgentId'] as const;
export type ClearableField = (typeof CLEARABLE_FIELDS)[number];

const AGENT_ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function validateAgentId(value: unknown, field = 'agent.assignedAgentId'): string {
  if (typeof value !== 'string' || !AGENT_ID.test(value)) {
    throw invalidInput(field, `'${field}' must match ^[a-z0-9][a-z0-9._-]{0,63}$`);
  }
  return value;
}

export function validateEstimate(value: unknown, field = 'estimate'): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > LIMITS.estimate) {
    throw invalidInput(field, `'${field}' must be a number from 0 to ${LIMITS.estimate}`);
  }
  return Math.round(value * 100) / 100;
}

export function validateStatus(value: unknown, field = 'status'): TaskStatus {
  return validateEnum(value, TASK_STATUSES, field);
}

export function validatePriority(value: unknown, field = 'priority'): Priority {
  return validateEnum(value, PRIORITIES, field);
}

function validateChecks(value: unknown, field = 'acceptanceChecks'): AcceptanceCheckInput[] {
  if (!Array.isArray(value)) throw invalidInput(field, `'${field}' must be an array`);
  if (value.length > LIMITS.acceptanceChecks) throw invalidInput(field, `'${field}' must hold at most ${LIMITS.acceptanceChecks} checks`);
  const seen = new Set<string>();
  return value.map((raw, i) => {
    const where = `${field}[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalidInput(where, `'${where}' must be an object`);
    const check = raw as Record<string, unknown>;
    const id = optionalId(check.id, `${where}.id`);
    if (id !== undefined) {
      if (seen.has(id)) throw invalidInput(`${where}.id`, `'${where}.id' repeats an earlier check id`);
      seen.add(id);
    }
    if (check.done !== undefined && typeof check.done !== 'boolean') throw invalidInput(`${where}.done`, `'${where}.done' must be a boolean`);
    return {
      ...(id !== undefined ? { id } : {}),
      title: validateName(check.title, `${where}.title`, LIMITS.title),
      ...(check.done !== undefined ? { done: check.done as boolean } : {}),
    };
  });
}

/** Raw input of a new task (already typed by the caller's decoder, validated here). */
export interface NewTaskInput {
  projectId: unknown;
  title: unknown;
  description?: unknown;
  status?: unknown;
  priority?: unknown;
  labels?: unknown;
  milestoneId?: unknown;
  initiativeId?: unknown;
  parentId?: unknown;
  dueDate?: unknown;
  estimate?: unknown;
  dependencies?: unknown;
  acceptanceChecks?: unknown;
  assignedAgentId?: unknown;
  instructions?: Record<string, unknown>;
}

export interface ValidNewTask {
  projectId: string;
  title: string;
  description: string;
  status: TaskStatus;
  priority: Priority;
  labels: string[];
  milestoneId?: string;
  initiativeId?: string;
  parentId?: string;
  dueDate?: string;
  estimate?: number;
  dependencies: string[];
  acceptanceChecks: AcceptanceCheckInput[];
  assignedAgentId?: string;
  instructions: Instructions;
}

export function validateNewTask(input: NewTaskInput): ValidNewTask {
  const projectId = optionalId(input.projectId, 'projectId');
  if (projectId === undefined) throw invalidInput('projectId', "'projectId' is required");
  const out: ValidNewTask = {
    projectId,
    title: validateName(input.title, 'title', LIMITS.title),
    description: input.description === undefined ? '' : validateText(input.description, 'description', LIMITS.description),
    status: input.status === undefined ? DEFAULT_STATUS : validateStatus(input.status),
    priority: input.priority === undefined ? DEFAULT_PRIORITY : validatePriority(input.priority),
    labels: input.labels === undefined ? [] : validateLabels(input.labels),
    dependencies: input.dependencies === undefined ? [] : validateIdList(input.dependencies, 'dependencies', LIMITS.dependencies),
    acceptanceChecks: input.acceptanceChecks === undefined ? [] : validateChecks(input.acceptanceChecks),
    instructions: mergeInstructions(emptyInstructions(), validateInstructionsPatch(input.instructions ?? {})).next,
  };
  const milestoneId = optionalId(input.milestoneId, 'milestoneId');
  if (milestoneId !== undefined) out.milestoneId = milestoneId;
  const initiativeId = optionalId(input.initiativeId, 'initiativeId');
  if (initiativeId !== undefined) out.initiativeId = initiativeId;
  const parentId = optionalId(input.parentId, 'parentId');
  if (parentId !== undefined) out.parentId = parentId;
  if (input.dueDate !== undefined && input.dueDate !== null) out.dueDate = validateDate(input.dueDate, 'dueDate');
  if (input.estimate !== undefined && input.estimate !== null) out.estimate = validateEstimate(input.estimate);
  if (input.assignedAgentId !== undefined && input.assignedAgentId !== null && input.assignedAgentId !== '') {
    out.assignedAgentId = validateAgentId(input.assignedAgentId);
  }
  return out;
}

/** Raw patch input: a present key changes its field; `null` unsets (where allowed). */
export type RawTaskPatch = Partial<Record<keyof TaskPatch, unknown>> & { instructions?: Record<string, unknown> };

export function validatePatch(raw: RawTaskPatch): TaskPatch {
  const patch: TaskPatch = {};
  const nullable = <T>(key: keyof TaskPatch, check: (v: unknown) => T): T | null | undefined => {
    const value = raw[key];
    if (value === undefined) return undefined;
    return value === null ? null : check(value);
  };
  if (raw.title !== undefined) patch.title = validateName(raw.title, 'title', LIMITS.title);
  if (raw.description !== undefined) patch.description = validateText(raw.description ?? '', 'description', LIMITS.description);
  if (raw.status !== undefined) patch.status = validateStatus(raw.status);
  if (raw.priority !== undefined) patch.priority = validatePriority(raw.priority);
  if (raw.labels !== undefined) patch.labels = validateLabels(raw.labels);
  if (raw.addLabels !== undefined) patch.addLabels = validateLabels(raw.addLabels, 'labels.add');
  if (raw.removeLabels !== undefined) patch.removeLabels = validateLabels(raw.removeLabels, 'labels.remove');
  const milestoneId = nullable('milestoneId', (v) => optionalId(v, 'milestoneId') ?? null);
  if (milestoneId !== undefined) patch.milestoneId = milestoneId;
  const initiativeId = nullable('initiativeId', (v) => optionalId(v, 'initiativeId') ?? null);
  if (initiativeId !== undefined) patch.initiativeId = initiativeId;
  const parentId = nullable('parentId', (v) => optionalId(v, 'parentId') ?? null);
  if (parentId !== undefined) patch.parentId = parentId;
  const dueDate = nullable('dueDate', (v) => validateDate(v, 'dueDate'));
  if (dueDate !== undefined) patch.dueDate = dueDate;
  const estimate = nullable('estimate', (v) => validateEstimate(v));
  if (estimate !== undefined) patch.estimate = estimate;
  if (raw.dependencies !== undefined) patch.dependencies = validateIdList(raw.dependencies, 'dependencies', LIMITS.dependencies);
  if (raw.acceptanceChecks !== undefined) patch.acceptanceChecks = validateChecks(raw.acceptanceChecks);
  const agentId = nullable('assignedAgentId', (v) => (v === '' ? null : validateAgentId(v)));
  if (agentId !== undefined) patch.assignedAgentId = agentId;
  if (raw.instructions !== undefined) patch.instructions = validateInstructionsPatch(raw.instructions);
  if (patch.labels !== undefined && (patch.addLabels !== undefined || patch.removeLabels !== undefined)) {
    throw invalidInput('labels', "'labels' replaces every label: do not combine it with 'add' or 'remove'");
  }
  return patch;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/** Fields whose values activity does not repeat (long text): only the name is kept. */
const NAME_ONLY_FIELDS = new Set(['description', 'acceptanceChecks']);

export interface PatchResult {
  next: TaskFields;
  changes: FieldChange[];
}

/**
 * Applies a validated patch to a task. Status moves go through `assertMove` (409
 * `invalid-transition`); references are checked for existence by the caller, which knows the
 * store. `newCheckId` names new acceptance checks.
 */
export function applyPatch(current: TaskFields, patch: TaskPatch, actor: MoveActor, newCheckId: () => string): PatchResult {
  // A shallow copy: a changed field gets a new value (a new array, a new agent object), so the
  // fields left as they were may share `current`'s values without either changing the other.
  const next: TaskFields = { ...current };
  const changes: FieldChange[] = [];
  const record = (field: string, from: unknown, to: unknown): void => {
    changes.push(NAME_ONLY_FIELDS.has(field) || field.startsWith('agent.instructions.') ? { field } : { field, from: from ?? null, to: to ?? null });
  };
  const setOptional = <K extends 'milestoneId' | 'initiativeId' | 'parentId' | 'dueDate' | 'estimate'>(key: K, value: TaskFields[K] | null | undefined): void => {
    if (value === undefined) return;
    const to = value === null ? undefined : value;
    if (sameJson(current[key], to)) return;
    if (to === undefined) delete next[key];
    else next[key] = to;
    record(key, current[key], to);
  };

  if (patch.title !== undefined && patch.title !== current.title) {
    next.title = patch.title;
    record('title', current.title, patch.title);
  }
  if (patch.description !== undefined && patch.description !== current.description) {
    next.description = patch.description;
    record('description', undefined, undefined);
  }
  if (patch.status !== undefined && patch.status !== current.status) {
    assertMove(current.status, patch.status, actor);
    next.status = patch.status;
    record('status', current.status, patch.status);
  }
  if (patch.priority !== undefined && patch.priority !== current.priority) {
    next.priority = patch.priority;
    record('priority', current.priority, patch.priority);
  }
  let labels = current.labels;
  if (patch.labels !== undefined) labels = patch.labels;
  if (patch.addLabels) labels = [...labels, ...patch.addLabels.filter((l) => !labels.includes(l))];
  if (patch.removeLabels) labels = labels.filter((l) => !patch.removeLabels?.includes(l));
  if (labels.length > LIMITS.labels) throw invalidInput('labels', `'labels' must hold at most ${LIMITS.labels} labels`);
  if (!sameJson(labels, current.labels)) {
    next.labels = [...labels];
    record('labels', current.labels, labels);
  }
  setOptional('milestoneId', patch.milestoneId);
  setOptional('initiativeId', patch.initiativeId);
  setOptional('parentId', patch.parentId);
  setOptional('dueDate', patch.dueDate);
  setOptional('estimate', patch.estimate);
  if (patch.dependencies !== undefined && !sameJson([...patch.dependencies].sort(), [...current.dependencies].sort())) {
    next.dependencies = [...patch.dependencies];
    record('dependencies', current.dependencies, patch.dependencies);
  }
  if (patch.acceptanceChecks !== undefined) {
    const checks = mergeChecks(current.acceptanceChecks, patch.acceptanceChecks, newCheckId);
    if (!sameJson(checks, current.acceptanceChecks)) {
      next.acceptanceChecks = checks;
      record('acceptanceChecks', undefined, undefined);
    }
  }
  if (patch.assignedAgentId !== undefined) {
    const to = patch.assignedAgentId ?? undefined;
    if (to !== current.agent.assignedAgentId) {
      next.agent = { ...next.agent };
      if (to === undefined) delete next.agent.assignedAgentId;
      else next.agent.assignedAgentId = to;
      record('agent.assignedAgentId', current.agent.assignedAgentId, to);
    }
  }
  if (patch.instructions !== undefined) {
    const merged = mergeInstructions(current.agent.instructions, patch.instructions);
    next.agent = { ...next.agent, instructions: merged.next };
    for (const section of merged.changed) record(sectionField(section), undefined, undefined);
  }
  return { next, changes };
}

/**
 * The acceptance checks a patch asks for: entries with a known id keep it (title and done taken
 * from the patch, done kept when not given); entries without an id are new checks.
 */
function mergeChecks(current: readonly AcceptanceCheck[], wanted: readonly AcceptanceCheckInput[], newCheckId: () => string): AcceptanceCheck[] {
  return wanted.map((w, i) => {
    if (w.id === undefined) return { id: newCheckId(), title: w.title, done: w.done ?? false };
    const existing = current.find((c) => c.id === w.id);
    if (!existing) throw invalidInput(`acceptanceChecks[${i}].id`, `'acceptanceChecks[${i}].id' names no acceptance check of this task`);
    return { id: existing.id, title: w.title, done: w.done ?? existing.done };
  });
}

/** New acceptance checks of a task being created (ids as given, or new ones). */
export function newChecks(wanted: readonly AcceptanceCheckInput[], newCheckId: () => string): AcceptanceCheck[] {
  return wanted.map((w) => ({ id: w.id ?? newCheckId(), title: w.title, done: w.done ?? false }));
}

/** Names of the fields a patch changes, for events (never values). */
export function changedFieldNames(changes: readonly FieldChange[]): string[] {
  return [...new Set(changes.map((c) => c.field))];
}

export { isTaskStatus };
