import { IdempotencyKeys } from '@planning/idempotency';
import type { Collection, DocumentStore, StoredDocument } from '@planning/store';
import type { RowError, SchemaStatus } from './schema.js';

export interface PlannedRow {
  row: number;
  fieldsJson: string;
  operation: 'create' | 'update';
  issueId?: string;
  expectedVersion: number;
}

export interface Checkpoint {
  chunk: number;
  rows: number;
  status: 'pending' | 'done';
  created: number;
  updated: number;
  skipped: number;
  /** The chunk's row errors (why rows were skipped), kept with its checkpoint; never in the checkpoint's JSON. */
  errors?: RowError[];
}

export interface QuotaImpact {
  imports: { limit: number | null; used: number; required: number; exceeded: boolean };
  storedTasks: { limit: number | null; used: number; creates: number; exceeded: boolean };
}

export interface CommitState {
  id: string;
  state: 'committing' | 'committed';
  ownerUntil?: Date;
  /** The runner holding the lease (a random token per take or takeover): every write of a run is conditioned on it. */
  runner?: string;
  startedAt: Date;
  committedAt?: Date;
  checkpoints: Checkpoint[];
  /** Row errors of commits written before errors were kept per checkpoint. */
  errors: RowError[];
  result?: { created: number; updated: number; skipped: number; totalOperations: number };
}

export interface PreviewRecord extends StoredDocument {
  workspaceId: string;
  planId: string;
  /** Who made it (`<type>:<id>`): idempotency keys are per principal. */
  owner: string;
  idempotencyKey: string;
  requestHash: string;
  status: 'ready' | 'blocked' | 'committed';
  schema: { schemaVersion: string | null; status: SchemaStatus };
  summary: { totalRows: number; creates: number; updates: number; conflicts: number; errors: number; quotaExceeded: boolean; problemsTruncated?: boolean };
  /** Rows that will not be written (errors or conflicts). */
  blockedRows: number;
  processedRows: number;
  errors: RowError[];
  conflicts: RowError[];
  quotaImpact: QuotaImpact;
  artifact: { sha256: string; bytes: number; rows: number };
  /** Stored chunks of planned rows (`import_preview_rows`), in commit order. */
  chunkSizes: number[];
  createdAt: Date;
  expiresAt: Date;
  /** The record (and its rows) disappear after this. */
  purgeAt: Date;
  commit?: CommitState;
}

export interface RowChunk extends StoredDocument {
  previewId: string;
  index: number;
  rows: PlannedRow[];
  purgeAt: Date;
}

/** Previews, their stored rows, and idempotency keys, in the imports-exports store. */
export class ImportRepository {
  private constructor(
    readonly previews: Collection<PreviewRecord>,
    readonly chunks: Collection<RowChunk>,
    /** Idempotency keys of preview and commit requests (per principal, 24 h). */
    readonly keys: IdempotencyKeys,
  ) {}

  static async open(store: DocumentStore): Promise<ImportRepository> {
    const previews = store.collection<PreviewRecord>('import_previews');
    const chunks = store.collection<RowChunk>('import_preview_rows');
    await previews.createIndexes([{ name: 'purge_ttl', keys: { purgeAt: 1 }, expireAfterSeconds: 0 }]);
    await chunks.createIndexes([
      { name: 'preview_index', keys: { previewId: 1, index: 1 } },
      { name: 'purge_ttl', keys: { purgeAt: 1 }, expireAfterSeconds: 0 },
    ]);
    return new ImportRepository(previews, chunks, await IdempotencyKeys.open(store, { collection: 'import_keys' }));
  }

  get(id: string): Promise<PreviewRecord | null> {
    return this.previews.findOne({ _id: id });
  }

  chunk(previewId: string, index: number): Promise<RowChunk | null> {
    return this.chunks.findOne({ _id: `${previewId}:${index}` });
  }
}
