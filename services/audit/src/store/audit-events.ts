import type { EventEnvelope } from '@planning/bus';
import { isDuplicateKeyError, type Collection, type DocumentStore, type Filter, type IndexSpec, type StoredDocument } from '@planning/store';

/**
 * An audit event (DECISIONS §10). Built from a bus event by keeping only ids, the outcome and
 * the reason: whatever else an event carries never reaches the audit store, so a raw token,
 * secret, title or body cannot end up here even if an event carried one by mistake.
 */
export interface AuditEventRecord extends StoredDocument {
  type: string;
  source: string;
  workspaceId?: string;
  actor: { type: string; id: string };
  subject: { type: string; id: string };
  outcome: 'allowed' | 'denied';
  reason?: string;
  /** Names (never values) of the fields a change touched. */
  changedFields?: string[];
  at: string;
}

const ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;
const REASON_PATTERN = /^[a-z0-9-]{1,64}$/;

function safeRef(value: unknown, fallbackType: string): { type: string; id: string } {
  const ref = value as { type?: unknown; id?: unknown } | undefined;
  const type = typeof ref?.type === 'string' && /^[a-z-]{1,32}$/.test(ref.type) ? ref.type : fallbackType;
  const id = typeof ref?.id === 'string' && ID_PATTERN.test(ref.id) ? ref.id : 'unknown';
  return { type, id };
}

/** Maps a bus event to its audit record, dropping everything that is not an id, outcome or reason. */
export function toAuditRecord(event: EventEnvelope): AuditEventRecord {
  const data = event.data as Record<string, unknown>;
  const record: AuditEventRecord = {
    _id: event.id,
    type: event.type,
    source: event.source,
    actor: safeRef(event.actor, 'system'),
    subject: safeRef(data.subject, event.type.split('.')[0] ?? 'unknown'),
    outcome: data.outcome === 'denied' ? 'denied' : 'allowed',
    at: event.occurredAt,
  };
  if (typeof event.workspaceId === 'string' && ID_PATTERN.test(event.workspaceId)) record.workspaceId = event.workspaceId;
  if (typeof data.reason === 'string' && REASON_PATTERN.test(data.reason)) record.reason = data.reason;
  if (Array.isArray(data.changedFields)) {
    const names = data.changedFields.filter((f): f is string => typeof f === 'string' && /^[A-Za-z0-9_.]{1,64}$/.test(f));
    if (names.length > 0) record.changedFields = names.slice(0, 50);
  }
  return record;
}

export interface AuditScope {
  /** Every workspace, and events without one (system administrators). */
  all: boolean;
  workspaceIds: readonly string[];
}

export const AUDIT_EVENT_INDEXES: IndexSpec[] = [
  { name: 'workspace_id', keys: { workspaceId: 1, _id: -1 } },
  { name: 'type_id', keys: { type: 1, _id: -1 } },
  { name: 'denied_at', keys: { outcome: 1, at: -1 }, partialFilterExpression: { outcome: 'denied' } },
];

export class AuditEventRepository {
  private constructor(private readonly events: Collection<AuditEventRecord>) {}

  /**
   * The indexes serve the list's order, newest id first: by workspace (a workspace admin's list
   * and counts) and by type, each ending in `_id`, so a page, and the page after a cursor, reads
   * its own rows however many events there are; a system admin's list walks the `_id` index. The
   * recent denials are counted in an index of the denied events alone (keyed by outcome and time,
   * as the count asks, so its plan is the one the index of every event gave): every event is
   * recorded, most are allowed, and that index of every event (`outcome_at`, dropped when the
   * repository opens) cost each record one more entry. `workspace_at` and `type_at`
   * (time, then id) served the filters but not the order: each page sorted every event of the
   * workspace (hundreds of ms a page at 100,000 events on SQLite: docs/benchmarks.md); they are
   * dropped too.
   */
  static async open(store: DocumentStore): Promise<AuditEventRepository> {
    const events = store.collection<AuditEventRecord>('audit_events');
    await events.dropIndexes(['workspace_at', 'type_at', 'outcome_at']);
    await events.createIndexes(AUDIT_EVENT_INDEXES);
    return new AuditEventRepository(events);
  }

  /** Stores an event once: a redelivered event is recognised by its id. Returns false for a repeat. */
  async record(event: EventEnvelope): Promise<boolean> {
    try {
      await this.events.insertOne(toAuditRecord(event));
      return true;
    } catch (err) {
      if (isDuplicateKeyError(err)) return false;
      throw err;
    }
  }

  /**
   * Stores several events in one write (one transaction, one commit, each index page written once)
   * storing each once: a batch holding an event already recorded (a redelivery) is stored record
   * by record instead, so the rest of the batch is still recorded exactly once.
   */
  async recordMany(events: readonly EventEnvelope[]): Promise<void> {
    if (events.length === 0) return;
    try {
      await this.events.insertMany(events.map(toAuditRecord));
      return;
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
    }
    // An ordered insert stops at the duplicate; the records before it are in, which the one-by-one
    // pass below recognises as repeats.
    for (const event of events) await this.record(event);
  }

  private scopeFilter(scope: AuditScope): Filter {
    return scope.all ? {} : { workspaceId: { $in: [...scope.workspaceIds] } };
  }

  count(scope: AuditScope): Promise<number> {
    return this.events.countDocuments(this.scopeFilter(scope));
  }

  countDeniedSince(scope: AuditScope, since: Date): Promise<number> {
    return this.events.countDocuments({ ...this.scopeFilter(scope), outcome: 'denied', at: { $gte: since.toISOString() } });
  }

  list(
    scope: AuditScope,
    options: { type?: string; workspaceId?: string; limit: number; before?: string },
  ): Promise<AuditEventRecord[]> {
    const filter: Filter = { ...this.scopeFilter(scope) };
    if (options.workspaceId !== undefined) {
      filter.workspaceId = scope.all || scope.workspaceIds.includes(options.workspaceId) ? options.workspaceId : '\u0000none';
    }
    if (options.type !== undefined) filter.type = options.type;
    if (options.before !== undefined) filter._id = { $lt: options.before };
    return this.events.find(filter, { sort: { _id: -1 }, limit: options.limit });
  }
}
