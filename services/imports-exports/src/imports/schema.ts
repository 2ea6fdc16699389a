/**
 * The import schema (DECISIONS §8): which payloads a preview accepts, how their schema status is
 * decided before any row is read, how rows are normalised, and the fingerprints that idempotency
 * and artifacts use. Pure functions; the service and its tests share them.
 */
import { createHash } from 'node:crypto';
import { invalidInput } from '@planning/errors';
import { EXPORT_SCHEMA_ID, EXPORT_SCHEMA_VERSION } from '../exports/formats.js';

export const IMPORT_SCHEMA_ID = 'service.issue-import';
/** The current import schema version: a constant shaped `YYYY-MM-DD.issue-import.v1`. */
export const IMPORT_SCHEMA_VERSION = '2026-11-22.issue-import.v1';

/** Limits of DECISIONS §8. */
export const MAX_IMPORT_ROWS = 10_000;
export const MAX_IMPORT_BYTES = 10 * 1_048_576;
/** How deeply a payload may nest arrays and objects (a row needs 4 levels: envelope, issues, row, labels). */
export const MAX_PAYLOAD_DEPTH = 32;
/** Row problems a preview lists per row, and in all (errors and conflicts each); the summary counts every one. */
export const MAX_PROBLEMS_PER_ROW = 5;
export const MAX_PROBLEMS = 10_000;

export type SchemaStatus = 'current' | 'compatible' | 'legacy' | 'unsupported';

const IMPORT_VERSION = /^(\d{4}-\d{2}-\d{2})\.issue-import\.v(\d+)$/;
const EXPORT_VERSION = /^(\d{4}-\d{2}-\d{2})\.issue-export\.v(\d+)$/;

/** The row fields of the current schema (everything else is an `unknown-field` error in it). */
export const ROW_FIELDS = [
  'id',
  'workspaceId',
  'projectId',
  'title',
  'description',
  'status',
  'priority',
  'labels',
  'milestoneId',
  'dueDate',
  'estimate',
  'dependencies',
  'externalId',
  'updatedAt',
] as const;

const id = { type: 'string', pattern: '^[A-Za-z0-9_:.-]{1,64}$' } as const;

/** JSON Schema (2020-12) of one row of the current schema. */
export const ROW_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'service.issue-import row',
  type: 'object',
  additionalProperties: false,
  required: ['workspaceId', 'projectId', 'title'],
  properties: {
    id: { ...id, description: 'A task of the workspace with this id is updated; otherwise the row creates a task (with a new id).' },
    workspaceId: { ...id, description: 'Must be the target workspace (the body\'s workspaceId, or the one every row names).' },
    projectId: { ...id, description: 'A project of the workspace. An update cannot move a task to another project.' },
    title: { type: 'string', minLength: 1, maxLength: 200 },
    description: { type: 'string', maxLength: 20_000 },
    status: { enum: ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] },
    priority: { enum: ['urgent', 'high', 'medium', 'low', 'none'] },
    labels: { type: 'array', items: { type: 'string' }, maxItems: 20 },
    milestoneId: { anyOf: [id, { type: 'null' }], description: "A milestone of the task's project." },
    dueDate: { anyOf: [{ type: 'string', format: 'date' }, { type: 'null' }] },
    estimate: { anyOf: [{ type: 'number', minimum: 0 }, { type: 'null' }] },
    dependencies: { type: 'array', items: id, description: 'Ids of tasks already in the workspace.' },
    externalId: {
      type: 'string',
      pattern: '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$',
      description: 'Your own id: a task created with it is updated by later rows naming it.',
    },
    updatedAt: {
      type: 'string',
      format: 'date-time',
      description: 'When the row was last changed at its source: a task changed after it is a conflict.',
    },
  },
} as const;

/**
 * Whether `value` nests arrays and objects deeper than `max` levels (the value itself is level 1).
 * Iterative, so a payload nested thousands deep is measured, not a stack overflow.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const { value: v, depth } = stack.pop() as { value: unknown; depth: number };
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
    for (const child of children) if (child !== null && typeof child === 'object') stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}

/** A 400 for a payload nested deeper than MAX_PAYLOAD_DEPTH. */
export function assertPayloadDepth(payload: unknown): void {
  if (nestedDeeperThan(payload, MAX_PAYLOAD_DEPTH)) {
    throw invalidInput('payload', `'payload' nests arrays and objects more than ${MAX_PAYLOAD_DEPTH} levels deep`);
  }
}

/**
 * The problems a preview lists: sorted by row (stable), at most MAX_PROBLEMS_PER_ROW per row and
 * MAX_PROBLEMS in all. `truncated` says some were left out.
 */
export function capProblems(problems: RowError[]): { kept: RowError[]; truncated: boolean } {
  const sorted = problems.slice().sort((a, b) => a.row - b.row);
  const kept: RowError[] = [];
  let truncated = false;
  let row = -1;
  let ofRow = 0;
  for (const p of sorted) {
    if (p.row !== row) {
      row = p.row;
      ofRow = 0;
    }
    ofRow += 1;
    if (ofRow > MAX_PROBLEMS_PER_ROW || kept.length >= MAX_PROBLEMS) {
      truncated = true;
      continue;
    }
    kept.push(p);
  }
  return { kept, truncated };
}

export interface DetectedSchema {
  status: SchemaStatus;
  /** The version the payload names (null for a bare array). */
  schemaVersion: string | null;
  /** The rows, unless the schema is unsupported (then they are not read). */
  rows?: unknown[];
  /** How many rows the payload holds (counted, not read). */
  rowCount: number;
}

function compareVersion(date: string, major: number, current: { date: string; major: number }): SchemaStatus {
  if (major !== current.major) return 'unsupported';
  if (date > current.date) return 'unsupported';
  return date === current.date ? 'current' : 'compatible';
}

const CURRENT = (() => {
  const m = IMPORT_VERSION.exec(IMPORT_SCHEMA_VERSION) as RegExpExecArray;
  return { date: m[1] as string, major: Number(m[2]) };
})();

const CURRENT_EXPORT = (() => {
  const m = EXPORT_VERSION.exec(EXPORT_SCHEMA_VERSION) as RegExpExecArray;
  return { date: m[1] as string, major: Number(m[2]) };
})();

/**
 * Decides the schema status of a payload: the current import envelope (`current`, or
 * `compatible` for an older date of the same major), an export envelope (`compatible`), a bare
 * array (`legacy`); a later date or another major is `unsupported`. A malformed envelope is a 400.
 */
export function detectSchema(payload: unknown): DetectedSchema {
  if (Array.isArray(payload)) return { status: 'legacy', schemaVersion: null, rows: payload, rowCount: payload.length };
  if (typeof payload !== 'object' || payload === null) {
    throw invalidInput('payload', "'payload' must be an import envelope { schemaId, schemaVersion, issues } or an array of rows");
  }
  const env = payload as Record<string, unknown>;
  const schemaId = env.schemaId;
  const version = env.schemaVersion;
  let status: SchemaStatus;
  if (schemaId === IMPORT_SCHEMA_ID || schemaId === EXPORT_SCHEMA_ID) {
    const pattern = schemaId === IMPORT_SCHEMA_ID ? IMPORT_VERSION : EXPORT_VERSION;
    const m = typeof version === 'string' ? pattern.exec(version) : null;
    if (!m) {
      const shape = schemaId === IMPORT_SCHEMA_ID ? 'YYYY-MM-DD.issue-import.vN' : 'YYYY-MM-DD.issue-export.vN';
      throw invalidInput('payload.schemaVersion', `'payload.schemaVersion' must be shaped ${shape}`);
    }
    const date = m[1] as string;
    const major = Number(m[2]);
    if (schemaId === IMPORT_SCHEMA_ID) status = compareVersion(date, major, CURRENT);
    else status = compareVersion(date, major, CURRENT_EXPORT) === 'unsupported' ? 'unsupported' : 'compatible';
  } else {
    throw invalidInput('payload.schemaId', `'payload.schemaId' must be ${IMPORT_SCHEMA_ID} (or ${EXPORT_SCHEMA_ID} for an export)`);
  }
  const issues = env.issues;
  const rowCount = Array.isArray(issues) ? issues.length : 0;
  if (status === 'unsupported') return { status, schemaVersion: version as string, rowCount };
  if (!Array.isArray(issues)) throw invalidInput('payload.issues', "'payload.issues' must be an array of rows");
  return { status, schemaVersion: version as string, rows: issues, rowCount };
}

export interface RowError {
  row: number;
  field: string;
  code: string;
}

export interface NormalizedRow {
  row: number;
  fields: Record<string, unknown>;
}

const FIELD_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

/**
 * Turns the payload's rows into the fields the issues service checks, for the target workspace.
 * Rows that are not objects, name another workspace, or (in the current schema) carry unknown
 * fields get errors; rows of compatible and legacy payloads lose fields the schema does not know
 * (an export carries `createdAt`, `version`, `agent`...). Duplicated ids or externalIds are
 * conflicts on every row that carries them.
 */
export function normalizeRows(
  rows: readonly unknown[],
  status: SchemaStatus,
  workspaceId: string,
): { rows: NormalizedRow[]; errors: RowError[]; conflicts: RowError[] } {
  const out: NormalizedRow[] = [];
  const errors: RowError[] = [];
  const conflicts: RowError[] = [];
  const known = new Set<string>(ROW_FIELDS);
  const ids = new Map<string, number[]>();
  const externalIds = new Map<string, number[]>();
  rows.forEach((raw, i) => {
    const row = i + 1;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      errors.push({ row, field: 'row', code: 'invalid' });
      return;
    }
    const fields: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
      if (known.has(key)) fields[key] = value;
      else if (status === 'current') errors.push({ row, field: FIELD_NAME.test(key) ? key : 'row', code: 'unknown-field' });
    }
    if (fields.workspaceId !== undefined && fields.workspaceId !== workspaceId) {
      errors.push({ row, field: 'workspaceId', code: 'other-workspace' });
    }
    fields.workspaceId = workspaceId;
    if (typeof fields.id === 'string') ids.set(fields.id, [...(ids.get(fields.id) ?? []), row]);
    if (typeof fields.externalId === 'string') externalIds.set(fields.externalId, [...(externalIds.get(fields.externalId) ?? []), row]);
    out.push({ row, fields });
  });
  for (const rowsOf of ids.values()) if (rowsOf.length > 1) for (const row of rowsOf) conflicts.push({ row, field: 'id', code: 'duplicate-id' });
  for (const rowsOf of externalIds.values()) {
    if (rowsOf.length > 1) for (const row of rowsOf) conflicts.push({ row, field: 'externalId', code: 'duplicate-external-id' });
  }
  return { rows: out, errors, conflicts };
}

/**
 * The workspace a payload targets: the body's `workspaceId`, else the one every row names (only
 * the rows' `workspaceId` is looked at). Rows naming several workspaces, or none, are a 400.
 */
export function targetWorkspace(bodyWorkspaceId: string | undefined, rows: readonly unknown[] | undefined, fallback?: string): string {
  if (bodyWorkspaceId) return bodyWorkspaceId;
  const named = new Set<string>();
  for (const r of rows ?? []) {
    const ws = typeof r === 'object' && r !== null ? (r as Record<string, unknown>).workspaceId : undefined;
    if (typeof ws === 'string' && ws !== '') named.add(ws);
  }
  if (named.size === 1) return [...named][0] as string;
  if (named.size === 0 && fallback) return fallback;
  throw invalidInput(
    'workspaceId',
    named.size === 0 ? "Name the target workspace: 'workspaceId' in the body or in every row" : "The rows name several workspaces: name the target with 'workspaceId'",
  );
}

/** JSON with object keys sorted at every level: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The fingerprint of a preview request: same body (whatever its key order) gives the same one. */
export function requestFingerprint(body: { plan: string; format: string; workspaceId?: string; payload: unknown }): string {
  return sha256Hex(canonicalJson({ plan: body.plan, format: body.format, workspaceId: body.workspaceId ?? null, payload: body.payload }));
}

/** The artifact a preview describes: hash and size of the payload (canonical JSON) and its rows. */
export function artifactOf(payload: unknown, rows: number): { sha256: string; bytes: number; rows: number } {
  const text = canonicalJson(payload);
  return { sha256: sha256Hex(text), bytes: Buffer.byteLength(text, 'utf8'), rows };
}
