/**
 * Bulk update rules (DECISIONS §5): at most 200 ids, a bounded set of fields, and the plan
 * (`requestedCount`, `targetCount`, `skippedCount`, `changedFieldLabels`) a preview and an apply
 * both report.
 */
import { invalidInput } from '@planning/errors';
import { validateIdList } from './fields.js';
import type { FieldChange, TaskPatch } from './tasks.js';

export const BULK_MAX_IDS = 200;
export const BULK_MODES = ['preview', 'apply'] as const;
export type BulkMode = (typeof BULK_MODES)[number];

/** Human labels of the fields bulk update may change, in display order. */
export const FIELD_LABELS: ReadonlyArray<readonly [field: string, label: string]> = [
  ['status', 'Status'],
  ['priority', 'Priority'],
  ['labels', 'Labels'],
  ['milestoneId', 'Milestone'],
  ['dueDate', 'Due date'],
  ['estimate', 'Estimate'],
  ['agent.assignedAgentId', 'Agent'],
];

const BULK_PATCH_KEYS = new Set<keyof TaskPatch>([
  'status',
  'priority',
  'labels',
  'addLabels',
  'removeLabels',
  'milestoneId',
  'dueDate',
  'estimate',
  'assignedAgentId',
]);

/** Wire name of a patch key, for error messages. */
const WIRE: Partial<Record<keyof TaskPatch, string>> = {
  assignedAgentId: 'agent.assignedAgentId',
  instructions: 'agent.instructions',
  addLabels: 'labels.add',
  removeLabels: 'labels.remove',
};

/** Ids of a bulk request: 1..200 valid ids; repeats count once. */
export function validateBulkIds(value: unknown, field = 'issueIds'): string[] {
  if (!Array.isArray(value) || value.length === 0) throw invalidInput(field, `'${field}' must name at least one issue`);
  if (value.length > BULK_MAX_IDS) throw invalidInput(field, `'${field}' may name at most ${BULK_MAX_IDS} issues`);
  return validateIdList(value, field, BULK_MAX_IDS);
}

/** Refuses fields bulk update does not change, and an empty patch. */
export function assertBulkPatch(patch: TaskPatch): void {
  const keys = (Object.keys(patch) as (keyof TaskPatch)[]).filter((k) => patch[k] !== undefined);
  for (const key of keys) {
    if (!BULK_PATCH_KEYS.has(key)) {
      const wire = WIRE[key] ?? key;
      throw invalidInput(`patch.${wire}`, `'patch.${wire}' cannot be changed in bulk (status, priority, labels, milestoneId, dueDate, estimate, agent)`);
    }
  }
  if (keys.length === 0) throw invalidInput('patch', "'patch' must change at least one field");
}

export interface BulkPlan {
  requestedCount: number;
  targetCount: number;
  skippedCount: number;
  changedFieldLabels: string[];
}

/** The plan of a bulk change: `changes` holds each target's field changes (empty: skipped). */
export function bulkPlan(requestedCount: number, changes: readonly (readonly FieldChange[])[]): BulkPlan {
  const touched = new Set(changes.flatMap((c) => c.map((f) => f.field)));
  return {
    requestedCount,
    targetCount: changes.length,
    skippedCount: changes.filter((c) => c.length === 0).length,
    changedFieldLabels: FIELD_LABELS.filter(([field]) => touched.has(field)).map(([, label]) => label),
  };
}
