/**
 * The import resources on the wire (API document §2 "Import preview" and "Import commit";
 * docs/imports.md): their JSON Schemas (the response schemas of the routes, in the OpenAPI
 * document) and the mapping from the typed `planning.imports.v1` messages to them. A field the
 * message carries as an absent `optional` is `null` in JSON.
 */
import { ServiceError } from '@planning/errors';
import type {
  ImportCheckpoint,
  ImportCommit,
  ImportPreview,
  ImportRowProblem,
} from '@planning/proto/planning/imports/v1/imports_pb';
import { component } from '../openapi.js';

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const nullableStr = { type: ['string', 'null'] } as const;

const rowErrorSchema = component('ImportRowProblem', {
  type: 'object',
  required: ['row', 'field', 'code'],
  properties: { row: { ...int, description: '1-based position of the row in the payload.' }, field: str, code: str },
});

const checkpointSchema = component('ImportCheckpoint', {
  type: 'object',
  required: ['chunk', 'rows', 'status', 'created', 'updated', 'skipped'],
  properties: { chunk: int, rows: int, status: { type: 'string', enum: ['pending', 'done'] }, created: int, updated: int, skipped: int },
});

const limitOrNull = { type: ['integer', 'null'], description: 'null: unlimited.' } as const;

export const importPreviewSchema = component('ImportPreview', {
  type: 'object',
  required: ['id', 'idempotencyKey', 'status', 'workspaceId', 'createdAt', 'expiresAt', 'source', 'summary', 'progress', 'recovery', 'quotaImpact', 'artifact', 'errors', 'conflicts', 'commitId'],
  properties: {
    id: str,
    idempotencyKey: str,
    status: { type: 'string', enum: ['ready', 'blocked', 'committed', 'expired'] },
    workspaceId: str,
    createdAt: { type: 'string', format: 'date-time' },
    expiresAt: { type: 'string', format: 'date-time', description: 'After this instant the preview can no longer be committed.' },
    source: {
      type: 'object',
      required: ['format', 'schema'],
      properties: {
        format: str,
        schema: {
          type: 'object',
          required: ['schemaVersion', 'status'],
          properties: {
            schemaVersion: { ...nullableStr, description: 'As the payload names it (null for a bare array).' },
            status: { type: 'string', enum: ['current', 'compatible', 'legacy', 'unsupported'] },
          },
        },
      },
    },
    summary: {
      type: 'object',
      required: ['totalRows', 'creates', 'updates', 'conflicts', 'errors', 'quotaExceeded', 'problemsTruncated'],
      properties: {
        totalRows: int,
        creates: int,
        updates: int,
        conflicts: int,
        errors: int,
        quotaExceeded: { type: 'boolean' },
        problemsTruncated: {
          type: 'boolean',
          description: '`errors` / `conflicts` list at most 5 problems per row and 10,000 in all; true when some were left out (the counts are complete).',
        },
      },
    },
    progress: {
      type: 'object',
      required: ['status', 'activeStep', 'percentComplete', 'processedRows', 'blockedRows', 'completedRows', 'checkpoints'],
      properties: {
        status: { type: 'string', enum: ['ready', 'blocked', 'committing', 'committed', 'expired'] },
        activeStep: { type: 'string', enum: ['validate', 'commit', 'write', 'done', 'expired'] },
        percentComplete: int,
        processedRows: int,
        blockedRows: { ...int, description: 'Rows with errors or conflicts: they are not written.' },
        completedRows: int,
        checkpoints: { type: 'array', items: checkpointSchema },
      },
    },
    recovery: {
      type: 'object',
      required: ['recoverable', 'idempotencyKey'],
      properties: {
        recoverable: { type: 'boolean', description: 'An interrupted commit is finished by retrying it; no row is written twice.' },
        idempotencyKey: str,
      },
    },
    quotaImpact: {
      type: 'object',
      required: ['imports', 'storedTasks'],
      properties: {
        imports: {
          type: 'object',
          required: ['limit', 'used', 'required', 'exceeded'],
          properties: { limit: limitOrNull, used: int, required: int, exceeded: { type: 'boolean' } },
        },
        storedTasks: {
          type: 'object',
          required: ['limit', 'used', 'creates', 'exceeded'],
          properties: { limit: limitOrNull, used: int, creates: int, exceeded: { type: 'boolean' } },
        },
      },
    },
    artifact: {
      type: 'object',
      required: ['sha256', 'bytes', 'rows'],
      properties: { sha256: str, bytes: int, rows: int },
    },
    errors: { type: 'array', items: rowErrorSchema, description: 'Validation failures: row, field and code, never row content.' },
    conflicts: { type: 'array', items: rowErrorSchema, description: 'duplicate-id, duplicate-external-id, active-claim, changed-since-source.' },
    commitId: nullableStr,
  },
});

export const importCommitSchema = component('ImportCommit', {
  type: 'object',
  required: ['id', 'previewId', 'status', 'summary', 'errors', 'committedAt'],
  properties: {
    id: str,
    previewId: str,
    status: { type: 'string', enum: ['committed'] },
    summary: {
      type: 'object',
      required: ['created', 'updated', 'skipped', 'totalOperations'],
      properties: { created: int, updated: int, skipped: int, totalOperations: { ...int, description: 'Tasks written: created + updated.' } },
    },
    errors: { type: 'array', items: rowErrorSchema, description: 'Why each skipped row was not written.' },
    committedAt: nullableStr,
  },
});

/** A sub-message the service always sends; without it the answer is broken (500, never a guess). */
function need<T>(value: T | undefined): T {
  if (value === undefined) throw new ServiceError('internal', 'Internal error');
  return value;
}

function rowProblemJson(p: ImportRowProblem) {
  return { row: p.row, field: p.field, code: p.code };
}

function checkpointJson(c: ImportCheckpoint) {
  return { chunk: c.chunk, rows: c.rows, status: c.status, created: c.created, updated: c.updated, skipped: c.skipped };
}

/** The Import preview resource from `planning.imports.v1.ImportPreview`. */
export function importPreviewJson(p: ImportPreview) {
  const source = need(p.source);
  const schema = need(source.schema);
  const summary = need(p.summary);
  const progress = need(p.progress);
  const recovery = need(p.recovery);
  const quotaImpact = need(p.quotaImpact);
  const imports = need(quotaImpact.imports);
  const storedTasks = need(quotaImpact.storedTasks);
  const artifact = need(p.artifact);
  return {
    id: p.id,
    idempotencyKey: p.idempotencyKey,
    status: p.status,
    workspaceId: p.workspaceId,
    createdAt: p.createdAt,
    expiresAt: p.expiresAt,
    source: { format: source.format, schema: { schemaVersion: schema.schemaVersion ?? null, status: schema.status } },
    summary: {
      totalRows: summary.totalRows,
      creates: summary.creates,
      updates: summary.updates,
      conflicts: summary.conflicts,
      errors: summary.errors,
      quotaExceeded: summary.quotaExceeded,
      problemsTruncated: summary.problemsTruncated,
    },
    progress: {
      status: progress.status,
      activeStep: progress.activeStep,
      percentComplete: progress.percentComplete,
      processedRows: progress.processedRows,
      blockedRows: progress.blockedRows,
      completedRows: progress.completedRows,
      checkpoints: progress.checkpoints.map(checkpointJson),
    },
    recovery: { recoverable: recovery.recoverable, idempotencyKey: recovery.idempotencyKey },
    quotaImpact: {
      imports: { limit: imports.limit ?? null, used: imports.used, required: imports.required, exceeded: imports.exceeded },
      storedTasks: { limit: storedTasks.limit ?? null, used: storedTasks.used, creates: storedTasks.creates, exceeded: storedTasks.exceeded },
    },
    artifact: { sha256: artifact.sha256, bytes: Number(artifact.bytes), rows: artifact.rows },
    errors: p.errors.map(rowProblemJson),
    conflicts: p.conflicts.map(rowProblemJson),
    commitId: p.commitId ?? null,
  };
}

/** The Import commit resource from `planning.imports.v1.ImportCommit`. */
export function importCommitJson(c: ImportCommit) {
  const summary = need(c.summary);
  return {
    id: c.id,
    previewId: c.previewId,
    status: c.status,
    summary: { created: summary.created, updated: summary.updated, skipped: summary.skipped, totalOperations: summary.totalOperations },
    errors: c.errors.map(rowProblemJson),
    committedAt: c.committedAt ?? null,
  };
}
