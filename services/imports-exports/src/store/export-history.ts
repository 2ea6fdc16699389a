import { randomBytes } from 'node:crypto';
import { isDuplicateKeyError, type Collection, type DocumentStore, type Filter, type StoreSession, type StoredDocument } from '@planning/store';
import type { RedactedFilter } from '../exports/filters.js';

/**
 * An export history entry (DECISIONS §9): what was exported, never what it contained. No title,
 * no raw filter id, no search text.
 */
export interface ExportHistoryRecord extends StoredDocument {
  workspaceId: string;
  format: string;
  redacted: true;
  retentionDays: number;
  schemaVersion: string;
  createdAt: Date;
  /** The entry disappears from this instant on: every query filters by it, a TTL index sweeps it. */
  expiresAt: Date;
  filters: RedactedFilter[];
  sha256: string;
  bytes: number;
  issueCount: number;
  auditEventIds: string[];
  /** The user or key id that exported (an id, as in audit events). */
  actor: { type: string; id: string };
}

/** A later chunk of a large artifact, kept briefly for the gateway to fetch (see ExportService). */
interface ArtifactChunk extends StoredDocument {
  exportId: string;
  index: number;
  /** The artifact's chunk count (the first chunk travels with the answer and is not stored). */
  total: number;
  /** The principal id that may read it. */
  ownerId: string;
  /** Base64: stores differ in how they keep binary; text is the same everywhere. */
  data: string;
  expiresAt: Date;
}

/** A workspace's secret key for hashing filter values in history entries (never leaves the service). */
interface FilterKey extends StoredDocument {
  /** 32 random bytes, base64. */
  key: string;
  createdAt: Date;
}

/** How long later chunks of an artifact wait for the gateway. */
export const CHUNK_TTL_MS = 10 * 60_000;

/**
 * An export's chunks: their ids are `<exportId>:<index>` (an export id has no colon), so the range
 * from `<exportId>:` up to `<exportId>;` (the next character) is read from the `_id` index instead
 * of testing every chunk of every export.
 */
function chunksOf(exportId: string): Filter {
  return { _id: { $gte: `${exportId}:`, $lt: `${exportId};` }, exportId };
}

export class ExportHistoryRepository {
  private constructor(
    private readonly entries: Collection<ExportHistoryRecord>,
    private readonly chunks: Collection<ArtifactChunk>,
    private readonly keys: Collection<FilterKey>,
  ) {}

  static async open(store: DocumentStore): Promise<ExportHistoryRepository> {
    const entries = store.collection<ExportHistoryRecord>('export_history');
    await entries.createIndexes([
      { name: 'workspace_newest', keys: { workspaceId: 1, _id: -1 } },
      // Housekeeping only: queries never show an expired entry, swept or not.
      { name: 'expiry_ttl', keys: { expiresAt: 1 }, expireAfterSeconds: 0 },
    ]);
    const chunks = store.collection<ArtifactChunk>('export_artifact_chunks');
    await chunks.createIndexes([{ name: 'expiry_ttl', keys: { expiresAt: 1 }, expireAfterSeconds: 0 }]);
    return new ExportHistoryRepository(entries, chunks, store.collection<FilterKey>('export_filter_keys'));
  }

  /**
   * The workspace's filter key (`_id` is the workspace id), made on first use. Two first exports
   * racing both try to insert; the loser reads the winner's key, so every entry uses the same one.
   */
  async filterKey(workspaceId: string, now: Date): Promise<Buffer> {
    const found = await this.keys.findOne({ _id: workspaceId });
    if (found) return Buffer.from(found.key, 'base64');
    const key = randomBytes(32);
    try {
      await this.keys.insertOne({ _id: workspaceId, key: key.toString('base64'), createdAt: now });
      return key;
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const winner = await this.keys.findOne({ _id: workspaceId });
      if (!winner) throw err;
      return Buffer.from(winner.key, 'base64');
    }
  }

  async insert(record: ExportHistoryRecord, session?: StoreSession): Promise<void> {
    await this.entries.insertOne(record, session ? { session } : undefined);
  }

  /** Unexpired entries of a workspace, newest first, after the entry id `after` (a cursor). */
  async list(workspaceId: string, now: Date, limit: number, after?: string): Promise<{ entries: ExportHistoryRecord[]; more: boolean }> {
    const filter: Filter = { workspaceId, expiresAt: { $gt: now } };
    if (after) filter._id = { $lt: after };
    const rows = await this.entries.find(filter, { sort: { _id: -1 }, limit: limit + 1 });
    return { entries: rows.slice(0, limit), more: rows.length > limit };
  }

  async putChunks(exportId: string, ownerId: string, chunks: readonly Buffer[], now: Date): Promise<void> {
    if (chunks.length === 0) return;
    const expiresAt = new Date(now.getTime() + CHUNK_TTL_MS);
    await this.chunks.insertMany(
      chunks.map((c, i) => ({ _id: `${exportId}:${i + 1}`, exportId, index: i + 1, total: chunks.length + 1, ownerId, data: c.toString('base64'), expiresAt })),
    );
  }

  /** Drops the chunks of an export its owner will not read (a download that ended early). */
  async releaseChunks(exportId: string, ownerId: string): Promise<number> {
    return (await this.chunks.deleteMany({ ...chunksOf(exportId), ownerId })).deletedCount;
  }

  /** A chunk for its owner, or null (unknown, expired, someone else's). The last read removes them all. */
  async takeChunk(exportId: string, index: number, ownerId: string, now: Date): Promise<Buffer | null> {
    const found = await this.chunks.findOne({ _id: `${exportId}:${index}`, ownerId, expiresAt: { $gt: now } });
    if (!found) return null;
    if (found.index === found.total - 1) await this.chunks.deleteMany(chunksOf(exportId));
    return Buffer.from(found.data, 'base64');
  }
}
