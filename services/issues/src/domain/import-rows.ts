/**
 * Rows of a JSON issue import (DECISIONS §8), validated with the rules every task write uses
 * (`validatePatch`, `validateNewTask`, `applyPatch`): a row is a new task or a patch of the task
 * it matches. Problems name the field and a code, never the row's content.
 */
import { createHash } from 'node:crypto';
import { ServiceError } from '@planning/errors';
import { optionalId, validateTimestamp } from './fields.js';
import { validateNewTask, validatePatch, type RawTaskPatch, type TaskPatch, type ValidNewTask } from './tasks.js';

export interface RowProblem {
  field: string;
  code: string;
}

/** Row fields a patch carries (wire names equal `TaskPatch` keys). */
const PATCH_FIELDS = ['title', 'description', 'status', 'priority', 'labels', 'milestoneId', 'dueDate', 'estimate', 'dependencies'] as const;

/** Row fields that identify or describe the row rather than change the task. */
const ROW_FIELDS = ['id', 'workspaceId', 'projectId', 'externalId', 'updatedAt'] as const;

export const IMPORT_ROW_FIELDS: readonly string[] = [...ROW_FIELDS, ...PATCH_FIELDS];

export interface ParsedRow {
  id?: string;
  externalId?: string;
  projectId?: string;
  updatedAt?: string;
  /** The fields the row sets, validated (absent fields are left alone on update). */
  patch: TaskPatch;
  errors: RowProblem[];
}

const EXTERNAL_ID = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;

function problemOf(err: unknown, field: string): RowProblem {
  if (err instanceof ServiceError) {
    const named = typeof err.details.field === 'string' ? err.details.field : field;
    return { field: named, code: err.code === 'invalid-input' ? 'invalid' : err.code };
  }
  throw err;
}

/**
 * Validates one row field by field (every problem is reported, not just the first). Fields the
 * import does not know are not looked at here: the imports service decides about them by schema.
 */
export function parseImportRow(raw: Record<string, unknown>): ParsedRow {
  const errors: RowProblem[] = [];
  const out: ParsedRow = { patch: {}, errors };
  const attempt = <T>(field: string, check: () => T): T | undefined => {
    try {
      return check();
    } catch (err) {
      errors.push(problemOf(err, field));
      return undefined;
    }
  };
  const id = attempt('id', () => optionalId(raw.id, 'id'));
  if (id !== undefined) out.id = id;
  if (raw.externalId !== undefined && raw.externalId !== null) {
    if (typeof raw.externalId === 'string' && EXTERNAL_ID.test(raw.externalId)) out.externalId = raw.externalId;
    else errors.push({ field: 'externalId', code: 'invalid' });
  }
  const projectId = attempt('projectId', () => optionalId(raw.projectId, 'projectId'));
  if (projectId !== undefined) out.projectId = projectId;
  if (raw.updatedAt !== undefined && raw.updatedAt !== null) {
    const at = attempt('updatedAt', () => validateTimestamp(raw.updatedAt, 'updatedAt'));
    if (at !== undefined) out.updatedAt = at;
  }
  for (const field of PATCH_FIELDS) {
    if (raw[field] === undefined) continue;
    const one = attempt(field, () => validatePatch({ [field]: raw[field] } as RawTaskPatch));
    if (one) Object.assign(out.patch, one);
  }
  return out;
}

/** The new task a row creates; problems when it lacks what a new task needs. */
export function newTaskOf(row: ParsedRow): { task?: ValidNewTask; errors: RowProblem[] } {
  const errors: RowProblem[] = [];
  if (row.projectId === undefined) errors.push({ field: 'projectId', code: 'required' });
  if (row.patch.title === undefined) errors.push({ field: 'title', code: 'required' });
  if (errors.length > 0 || row.projectId === undefined) return { errors };
  const p = row.patch;
  try {
    const task = validateNewTask({
      projectId: row.projectId,
      title: p.title,
      ...(p.description !== undefined ? { description: p.description } : {}),
      ...(p.status !== undefined ? { status: p.status } : {}),
      ...(p.priority !== undefined ? { priority: p.priority } : {}),
      ...(p.labels !== undefined ? { labels: p.labels } : {}),
      ...(p.milestoneId ? { milestoneId: p.milestoneId } : {}),
      ...(p.dueDate ? { dueDate: p.dueDate } : {}),
      ...(p.estimate !== undefined && p.estimate !== null ? { estimate: p.estimate } : {}),
      ...(p.dependencies !== undefined ? { dependencies: p.dependencies } : {}),
    });
    return { task, errors };
  } catch (err) {
    return { errors: [problemOf(err, 'row')] };
  }
}

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * The id of the task an import row creates: derived from the commit and the row, shaped like
 * every task id (`iss_` and 26 Crockford base32 characters), so a chunk written again after a
 * crash meets its own tasks instead of adding new ones.
 */
export function importedTaskId(commitId: string, row: number): string {
  const digest = createHash('sha256').update(`${commitId}\u0000${row}`).digest();
  let out = '';
  // 26 characters of 5 bits each from the digest's first 130 bits.
  let bits = 0;
  let value = 0;
  for (const byte of digest) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 26) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
    if (out.length === 26) break;
  }
  return `iss_${out}`;
}
