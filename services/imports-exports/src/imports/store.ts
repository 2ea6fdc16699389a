import { randomUUID } from 'node:crypto';
import { isDuplicateKeyError, type Collection, type DocumentStore, type StoredDocument, type StoreSession } from '@planning/store';
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

/** A preview or commit request's idempotency key, per principal. */
export interface KeyRecord extends StoredDocument {
  kind: 'preview' | 'commit';
  requestHash: string;
  state: 'in-flight' | 'done';
  ownerUntil?: Date;
  /** The request holding the in-flight key (a random token per begin or takeover). */
  holder?: string;
  previewId?: string;
  expiresAt: Date;
}

export type KeyBegin = { kind: 'new' | 'takeover'; token: string } | { kind: 'done'; previewId: string } | { kind: 'mismatch' } | { kind: 'in-flight' };

/** Keys answer for 24 h (DECISIONS §8). */
export const KEY_TTL_MS = 24 * 3_600_000;

/** Previews, their stored rows, and idempotency keys, in the imports-exports store. */
export class ImportRepository {
  private constructor(
    readonly previews: Collection<PreviewRecord>,
    readonly chunks: Collection<RowChunk>,
    private readonly keys: Collection<KeyRecord>,
  ) {}

  static async open(store: DocumentStore): Promise<ImportRepository> {
    const previews = store.collection<PreviewRecord>('import_previews');
    const chunks = store.collection<RowChunk>('import_preview_rows');
    const keys = store.collection<KeyRecord>('import_keys');
    await previews.createIndexes([{ name: 'purge_ttl', keys: { purgeAt: 1 }, expireAfterSeconds: 0 }]);
    await chunks.createIndexes([
      { name: 'preview_index', keys: { previewId: 1, index: 1 } },
      { name: 'purge_ttl', keys: { purgeAt: 1 }, expireAfterSeconds: 0 },
    ]);
    await keys.createIndexes([{ name: 'expiry_ttl', keys: { expiresAt: 1 }, expireAfterSeconds: 0 }]);
    return new ImportRepository(previews, chunks, keys);
  }

  /**
   * Begins a request under its key: the insert decides who runs, so racing retries never both
   * run; a record whose owner's lease passed (its process died) is taken over.
   */
  async beginKey(id: string, kind: KeyRecord['kind'], requestHash: string, now: Date, leaseMs: number): Promise<KeyBegin> {
    const token = randomUUID();
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.keys.insertOne({
          holder: token,
          _id: id,
          kind,
          requestHash,
          state: 'in-flight',
          ownerUntil: new Date(now.getTime() + leaseMs),
          expiresAt: new Date(now.getTime() + KEY_TTL_MS),
        });
        return { kind: 'new', token };
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      const existing = await this.keys.findOne({ _id: id });
      if (!existing) continue;
      if (existing.expiresAt <= now) {
        await this.keys.deleteOne({ _id: id, expiresAt: { $lte: now } });
        continue;
      }
      if (existing.kind !== kind || existing.requestHash !== requestHash) return { kind: 'mismatch' };
      if (existing.state === 'done' && existing.previewId) return { kind: 'done', previewId: existing.previewId };
      if (existing.ownerUntil && existing.ownerUntil > now) return { kind: 'in-flight' };
      const taken = await this.keys.findOneAndUpdate(
        { _id: id, state: 'in-flight', ownerUntil: { $lte: now } },
        { $set: { ownerUntil: new Date(now.getTime() + leaseMs), holder: token } },
        { returnDocument: 'after' },
      );
      if (taken) return { kind: 'takeover', token };
    }
    return { kind: 'in-flight' };
  }

  async finishKey(id: string, previewId: string, session?: StoreSession): Promise<void> {
    await this.keys.updateOne({ _id: id }, { $set: { state: 'done', previewId }, $unset: { ownerUntil: '' } }, session ? { session } : undefined);
  }

  /** Gives up a key this request holds (`token` from beginKey): never one another request took over. */
  async abandonKey(id: string, token: string): Promise<void> {
    await this.keys.deleteOne({ _id: id, state: 'in-flight', holder: token });
  }

  get(id: string): Promise<PreviewRecord | null> {
    return this.previews.findOne({ _id: id });
  }

  chunk(previewId: string, index: number): Promise<RowChunk | null> {
    return this.chunks.findOne({ _id: `${previewId}:${index}` });
  }
}
