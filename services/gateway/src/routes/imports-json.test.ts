import { create } from '@bufbuild/protobuf';
import { ServiceError } from '@planning/errors';
import { ImportCommitSchema, ImportPreviewSchema } from '@planning/proto/planning/imports/v1/imports_pb';
import { describe, expect, it } from 'vitest';
import { importCommitJson, importPreviewJson } from './imports-json.js';

const preview = {
  id: 'imp_1',
  idempotencyKey: 'k-1',
  status: 'committed',
  workspaceId: 'ws_1',
  createdAt: '2026-11-22T09:00:00.000Z',
  expiresAt: '2026-11-23T09:00:00.000Z',
  source: { format: 'json', schema: { schemaVersion: '2026-11-22.issue-import.v1', status: 'current' } },
  summary: { totalRows: 3, creates: 1, updates: 1, conflicts: 0, errors: 1, quotaExceeded: false, problemsTruncated: true },
  progress: {
    status: 'committed',
    activeStep: 'done',
    percentComplete: 100,
    processedRows: 3,
    blockedRows: 1,
    completedRows: 2,
    checkpoints: [{ chunk: 0, rows: 2, status: 'done', created: 1, updated: 1, skipped: 0 }],
  },
  recovery: { recoverable: true, idempotencyKey: 'k-1' },
  quotaImpact: { imports: { limit: 500, used: 3, required: 1, exceeded: false }, storedTasks: { limit: 0, used: 0, creates: 1, exceeded: true } },
  artifact: { sha256: 'ab'.repeat(32), bytes: 5120, rows: 3 },
  errors: [{ row: 2, field: 'title', code: 'required' }],
  conflicts: [],
  commitId: 'imc_1',
};

describe('imports: the gateway maps typed messages to the JSON resources', () => {
  it('imports: a preview maps to the resource field for field, in the documented order', () => {
    const message = create(ImportPreviewSchema, { ...preview, artifact: { ...preview.artifact, bytes: 5120n } });
    expect(JSON.stringify(importPreviewJson(message))).toBe(JSON.stringify(preview));
  });

  it('imports: absent optional fields are JSON null; an explicit zero limit stays 0', () => {
    const message = create(ImportPreviewSchema, {
      ...preview,
      status: 'ready',
      source: { format: 'json', schema: { status: 'legacy' } },
      quotaImpact: { imports: { used: 0, required: 1, exceeded: false }, storedTasks: { limit: 0, used: 0, creates: 1, exceeded: true } },
      artifact: { ...preview.artifact, bytes: 5120n },
      commitId: undefined,
    });
    const json = importPreviewJson(message);
    expect(json.source.schema.schemaVersion).toBeNull();
    expect(json.quotaImpact.imports.limit).toBeNull();
    expect(json.quotaImpact.storedTasks.limit).toBe(0);
    expect(json.commitId).toBeNull();
  });

  it('imports: a preview without a required part is an internal error, not a guess', () => {
    const message = create(ImportPreviewSchema, { ...preview, artifact: undefined });
    expect(() => importPreviewJson(message)).toThrow(ServiceError);
  });

  it('imports: a commit maps to the resource; an absent committedAt is null', () => {
    const commit = {
      id: 'imc_1',
      previewId: 'imp_1',
      status: 'committed',
      summary: { created: 1, updated: 1, skipped: 1, totalOperations: 2 },
      errors: [{ row: 2, field: 'title', code: 'required' }],
      committedAt: '2026-11-22T09:30:00.000Z',
    };
    expect(JSON.stringify(importCommitJson(create(ImportCommitSchema, commit)))).toBe(JSON.stringify(commit));
    expect(importCommitJson(create(ImportCommitSchema, { ...commit, committedAt: undefined })).committedAt).toBeNull();
  });
});
