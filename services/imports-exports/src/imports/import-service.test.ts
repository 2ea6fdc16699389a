import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  CommitImportResponseSchema,
  PreviewImportResponseSchema,
  type ImportCommit,
  type ImportPreview,
} from '@planning/proto/planning/imports/v1/imports_pb';
import { describe, expect, it } from 'vitest';
import { commitView, previewView } from './imports-core.js';
import { toImportCommitMessage, toImportPreviewMessage } from './import-service.js';
import type { PreviewRecord } from './store.js';

const now = new Date('2026-11-22T10:00:00.000Z');

function record(over: Partial<PreviewRecord> = {}): PreviewRecord {
  return {
    _id: 'imp_1',
    workspaceId: 'ws_1',
    planId: 'pro',
    owner: 'user:u1',
    idempotencyKey: 'k-1',
    requestHash: 'h',
    status: 'ready',
    schema: { schemaVersion: '2026-11-22.issue-import.v1', status: 'current' },
    summary: { totalRows: 5, creates: 2, updates: 1, conflicts: 1, errors: 1, quotaExceeded: false },
    blockedRows: 2,
    processedRows: 5,
    errors: [{ row: 2, field: 'title', code: 'required' }],
    conflicts: [{ row: 4, field: 'id', code: 'active-claim' }],
    quotaImpact: {
      imports: { limit: 500, used: 3, required: 1, exceeded: false },
      storedTasks: { limit: 100_000, used: 120, creates: 2, exceeded: false },
    },
    artifact: { sha256: 'ab'.repeat(32), bytes: 5120, rows: 5 },
    chunkSizes: [2, 1],
    createdAt: new Date('2026-11-22T09:00:00.000Z'),
    expiresAt: new Date('2026-11-23T09:00:00.000Z'),
    purgeAt: new Date('2026-11-30T09:00:00.000Z'),
    ...over,
  };
}

/** Through the wire, as the gateway receives it. */
function previewOnWire(r: PreviewRecord): ImportPreview {
  const bytes = toBinary(PreviewImportResponseSchema, create(PreviewImportResponseSchema, { preview: toImportPreviewMessage(previewView(r, now)) }));
  const preview = fromBinary(PreviewImportResponseSchema, bytes).preview;
  if (!preview) throw new Error('no preview');
  return preview;
}

function commitOnWire(r: PreviewRecord): ImportCommit {
  const bytes = toBinary(CommitImportResponseSchema, create(CommitImportResponseSchema, { commit: toImportCommitMessage(commitView(r)) }));
  const commit = fromBinary(CommitImportResponseSchema, bytes).commit;
  if (!commit) throw new Error('no commit');
  return commit;
}

describe('imports: typed gRPC messages', () => {
  it('imports: a ready preview carries every field of the resource through the wire', () => {
    const p = previewOnWire(record());
    expect(p).toMatchObject({
      id: 'imp_1',
      idempotencyKey: 'k-1',
      status: 'ready',
      workspaceId: 'ws_1',
      createdAt: '2026-11-22T09:00:00.000Z',
      expiresAt: '2026-11-23T09:00:00.000Z',
      source: { format: 'json', schema: { schemaVersion: '2026-11-22.issue-import.v1', status: 'current' } },
      summary: { totalRows: 5, creates: 2, updates: 1, conflicts: 1, errors: 1, quotaExceeded: false, problemsTruncated: false },
      progress: { status: 'ready', activeStep: 'commit', percentComplete: 0, processedRows: 5, blockedRows: 2, completedRows: 0 },
      recovery: { recoverable: true, idempotencyKey: 'k-1' },
      quotaImpact: { imports: { limit: 500, used: 3, required: 1, exceeded: false }, storedTasks: { limit: 100_000, used: 120, creates: 2, exceeded: false } },
      artifact: { sha256: 'ab'.repeat(32), bytes: 5120n, rows: 5 },
    });
    expect(p.progress?.checkpoints.map((c) => [c.chunk, c.rows, c.status, c.created, c.updated, c.skipped])).toEqual([
      [0, 2, 'pending', 0, 0, 0],
      [1, 1, 'pending', 0, 0, 0],
    ]);
    expect(p.errors.map((e) => [e.row, e.field, e.code])).toEqual([[2, 'title', 'required']]);
    expect(p.conflicts.map((e) => [e.row, e.field, e.code])).toEqual([[4, 'id', 'active-claim']]);
    expect(p.commitId).toBeUndefined();
  });

  it('imports: JSON nulls are absent optional fields, and zero stays present', () => {
    const legacy = previewOnWire(
      record({
        schema: { schemaVersion: null, status: 'legacy' },
        quotaImpact: { imports: { limit: null, used: 0, required: 1, exceeded: false }, storedTasks: { limit: 0, used: 0, creates: 2, exceeded: true } },
      }),
    );
    expect(legacy.source?.schema?.schemaVersion).toBeUndefined();
    expect(legacy.source?.schema?.status).toBe('legacy');
    expect(legacy.quotaImpact?.imports?.limit).toBeUndefined();
    // An explicit zero limit is not "unlimited".
    expect(legacy.quotaImpact?.storedTasks?.limit).toBe(0);
  });

  it('imports: a committing, a committed and an expired preview keep their progress and commit id', () => {
    const commit = {
      id: 'imc_1',
      state: 'committing' as const,
      ownerUntil: now,
      startedAt: now,
      checkpoints: [
        { chunk: 0, rows: 2, status: 'done' as const, created: 1, updated: 1, skipped: 0 },
        { chunk: 1, rows: 1, status: 'pending' as const, created: 0, updated: 0, skipped: 0 },
      ],
      errors: [],
    };
    const committing = previewOnWire(record({ commit }));
    expect(committing).toMatchObject({ status: 'ready', commitId: 'imc_1', progress: { status: 'committing', activeStep: 'write', percentComplete: 66, completedRows: 2 } });
    expect(committing.progress?.checkpoints[0]).toMatchObject({ status: 'done', created: 1, updated: 1 });

    const done = record({
      status: 'committed',
      commit: { ...commit, state: 'committed', committedAt: now, result: { created: 2, updated: 1, skipped: 2, totalOperations: 3 } },
    });
    expect(previewOnWire(done)).toMatchObject({ status: 'committed', commitId: 'imc_1', progress: { status: 'committed', activeStep: 'done', percentComplete: 100 } });

    const expired = previewOnWire(record({ expiresAt: new Date(now.getTime() - 1) }));
    expect(expired).toMatchObject({ status: 'expired', progress: { status: 'expired', activeStep: 'expired' }, recovery: { recoverable: false } });
    expect(expired.commitId).toBeUndefined();
  });

  it('imports: a commit carries its summary, every skipped row and its time through the wire', () => {
    const c = commitOnWire(
      record({
        status: 'committed',
        commit: {
          id: 'imc_1',
          state: 'committed',
          startedAt: now,
          committedAt: now,
          checkpoints: [],
          errors: [{ row: 3, field: 'id', code: 'changed-since-preview' }],
          result: { created: 2, updated: 0, skipped: 3, totalOperations: 2 },
        },
      }),
    );
    expect(c).toMatchObject({ id: 'imc_1', previewId: 'imp_1', status: 'committed', summary: { created: 2, updated: 0, skipped: 3, totalOperations: 2 }, committedAt: now.toISOString() });
    expect(c.errors.map((e) => [e.row, e.field, e.code])).toEqual([
      [2, 'title', 'required'],
      [3, 'id', 'changed-since-preview'],
      [4, 'id', 'active-claim'],
    ]);
  });
});
