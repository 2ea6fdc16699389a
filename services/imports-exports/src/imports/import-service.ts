import type { MessageInitShape } from '@bufbuild/protobuf';
import { ImportService, type ImportCommitSchema, type ImportPreviewSchema, type ImportRowProblemSchema } from '@planning/proto/planning/imports/v1/imports_pb';
import type { ServiceImplementation } from '@planning/rpc';
import type { CommitView, ImportsCore, PreviewView } from './imports-core.js';
import type { RowError } from './schema.js';

export { ImportService };

function toRowProblems(problems: RowError[]): MessageInitShape<typeof ImportRowProblemSchema>[] {
  return problems.map((p) => ({ row: p.row, field: p.field, code: p.code }));
}

/**
 * `planning.imports.v1.ImportPreview` from the Import preview resource, field for field. A JSON
 * null becomes an absent `optional` field; the gateway maps absent back to null.
 */
export function toImportPreviewMessage(v: PreviewView): MessageInitShape<typeof ImportPreviewSchema> {
  const { imports, storedTasks } = v.quotaImpact;
  return {
    id: v.id,
    idempotencyKey: v.idempotencyKey,
    status: v.status,
    workspaceId: v.workspaceId,
    createdAt: v.createdAt,
    expiresAt: v.expiresAt,
    source: { format: v.source.format, schema: { ...(v.source.schema.schemaVersion !== null ? { schemaVersion: v.source.schema.schemaVersion } : {}), status: v.source.schema.status } },
    summary: { ...v.summary },
    progress: {
      status: v.progress.status,
      activeStep: v.progress.activeStep,
      percentComplete: v.progress.percentComplete,
      processedRows: v.progress.processedRows,
      blockedRows: v.progress.blockedRows,
      completedRows: v.progress.completedRows,
      checkpoints: v.progress.checkpoints.map((c) => ({ chunk: c.chunk, rows: c.rows, status: c.status, created: c.created, updated: c.updated, skipped: c.skipped })),
    },
    recovery: { recoverable: v.recovery.recoverable, idempotencyKey: v.recovery.idempotencyKey },
    quotaImpact: {
      imports: { ...(imports.limit !== null ? { limit: imports.limit } : {}), used: imports.used, required: imports.required, exceeded: imports.exceeded },
      storedTasks: { ...(storedTasks.limit !== null ? { limit: storedTasks.limit } : {}), used: storedTasks.used, creates: storedTasks.creates, exceeded: storedTasks.exceeded },
    },
    artifact: { sha256: v.artifact.sha256, bytes: BigInt(v.artifact.bytes), rows: v.artifact.rows },
    errors: toRowProblems(v.errors),
    conflicts: toRowProblems(v.conflicts),
    ...(v.commitId !== null ? { commitId: v.commitId } : {}),
  };
}

/** `planning.imports.v1.ImportCommit` from the Import commit resource, field for field. */
export function toImportCommitMessage(v: CommitView): MessageInitShape<typeof ImportCommitSchema> {
  return {
    id: v.id,
    previewId: v.previewId,
    status: v.status,
    summary: { ...v.summary },
    errors: toRowProblems(v.errors),
    ...(v.committedAt !== null ? { committedAt: v.committedAt } : {}),
  };
}

/**
 * gRPC handlers of imports: decode, call the core, answer typed messages. The row schema stays
 * JSON (it is a JSON Schema document), as does the request's payload (the caller's own JSON).
 */
export function createImportService(core: ImportsCore): ServiceImplementation<typeof ImportService> {
  return {
    getImportSchema() {
      const s = core.schema();
      return Promise.resolve({ schemaId: s.schemaId, schemaVersion: s.schemaVersion, rowSchemaJson: JSON.stringify(s.rowSchema) });
    },
    async previewImport(request, ctx) {
      const preview = await core.preview(ctx, {
        idempotencyKey: request.idempotencyKey,
        plan: request.plan,
        format: request.format,
        payloadJson: request.payloadJson,
        ...(request.workspaceId ? { workspaceId: request.workspaceId } : {}),
      });
      return { preview: toImportPreviewMessage(preview) };
    },
    async commitImport(request, ctx) {
      const commit = await core.commit(ctx, request.idempotencyKey, request.previewId);
      return { commit: toImportCommitMessage(commit) };
    },
  };
}
