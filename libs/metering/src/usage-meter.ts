import { ServiceError } from '@planning/errors';
import { quotaPeriod, quotaResetsAt, type QuotaKind } from '@planning/plans';
import { isDuplicateKeyError, type Collection, type DocumentStore, type StoreSession, type StoredDocument } from '@planning/store';

/** One counter: `<workspaceId>:<kind>:<YYYY-MM>`. */
export interface UsageCounter extends StoredDocument {
  workspaceId: string;
  kind: string;
  period: string;
  used: number;
  updatedAt: Date;
  /** Housekeeping only: counters of old months disappear some time after this. */
  expiresAt: Date;
}

export interface MeterDecision {
  allowed: boolean;
  /** The count after this decision (unchanged when denied). */
  used: number;
  /** Null: unlimited. */
  limit: number | null;
  /** `YYYY-MM` (UTC). */
  period: string;
  /** When the period ends and the count starts over. */
  resetsAt: string;
}

export interface ConsumeRequest {
  workspaceId: string;
  kind: QuotaKind;
  /** The plan's monthly limit; null for unlimited (the use is still counted). */
  limit: number | null;
  /** Default 1. */
  amount?: number;
  now?: Date;
  /** Meter inside the caller's transaction (e.g. with the claim it pays for). */
  session?: StoreSession;
}

export interface UsageMeter {
  /**
   * Adds `amount` to the month's counter if the result stays within `limit`, atomically: of
   * concurrent callers (any number of replicas) never more than `limit` in total are allowed.
   */
  tryConsume(request: ConsumeRequest): Promise<MeterDecision>;
  /** Gives back what a `tryConsume` took when the work it paid for did not happen. */
  refund(request: { workspaceId: string; kind: QuotaKind; period: string; amount?: number; session?: StoreSession }): Promise<void>;
  /** The month's count (0 when nothing was counted). */
  used(workspaceId: string, kind: QuotaKind, now?: Date): Promise<number>;
}

/** Counters outlive their month by this long, for late reads; then they are swept. */
const RETENTION_MS = 100 * 86_400_000;

function counterId(workspaceId: string, kind: string, period: string): string {
  return `${workspaceId}:${kind}:${period}`;
}

/** The 403 `quota-exceeded` of DECISIONS §2, with the redacted quota object. */
export function quotaExceeded(kind: QuotaKind, decision: Pick<MeterDecision, 'limit' | 'used' | 'resetsAt'>): ServiceError {
  return new ServiceError('quota-exceeded', `The workspace's monthly ${kind} quota is used up`, {
    quota: { kind, limit: decision.limit ?? 0, used: decision.used, resetsAt: decision.resetsAt },
  });
}

/**
 * Usage counters on the document store port. The increment is conditional on the stored count
 * (`used <= limit - amount`), so the store decides atomically: no read-then-write race, and one
 * store write per use (reads only when a use is refused).
 */
export async function createUsageMeter(
  store: DocumentStore,
  options: { collection?: string; clock?: () => Date } = {},
): Promise<UsageMeter> {
  const counters: Collection<UsageCounter> = store.collection<UsageCounter>(options.collection ?? 'usage_counters');
  await counters.createIndexes([
    { name: 'workspace_kind', keys: { workspaceId: 1, kind: 1, period: 1 } },
    { name: 'expiry_ttl', keys: { expiresAt: 1 }, expireAfterSeconds: 0 },
  ]);
  const clock = options.clock ?? (() => new Date());

  const onInsert = (workspaceId: string, kind: string, period: string, now: Date) => ({
    workspaceId,
    kind,
    period,
    expiresAt: new Date(quotaResetsAt(now).getTime() + RETENTION_MS),
  });

  const read = async (id: string, session?: StoreSession): Promise<number> => {
    const found = await counters.findOne({ _id: id }, session ? { session } : undefined);
    return found?.used ?? 0;
  };

  return {
    async tryConsume(request) {
      const amount = request.amount ?? 1;
      if (!Number.isInteger(amount) || amount <= 0) throw new RangeError(`metering amount must be a positive integer, got ${amount}`);
      const now = request.now ?? clock();
      const period = quotaPeriod(now);
      const resetsAt = quotaResetsAt(now).toISOString();
      const id = counterId(request.workspaceId, request.kind, period);
      const session = request.session;
      const base = { limit: request.limit, period, resetsAt };
      if (request.limit !== null && amount > request.limit) {
        return { ...base, allowed: false, used: await read(id, session) };
      }
      const filter: Record<string, unknown> = { _id: id };
      if (request.limit !== null) filter.used = { $lte: request.limit - amount };
      if (session) {
        // Inside a transaction a failed write would abort it (MongoDB): make sure the counter
        // exists, then increment it conditionally.
        await counters.updateOne(
          { _id: id },
          { $setOnInsert: { ...onInsert(request.workspaceId, request.kind, period, now), used: 0, updatedAt: now } },
          { upsert: true, session },
        );
        const updated = await counters.findOneAndUpdate(filter, { $inc: { used: amount }, $set: { updatedAt: now } }, { returnDocument: 'after', session });
        if (updated) return { ...base, allowed: true, used: updated.used };
        return { ...base, allowed: false, used: await read(id, session) };
      }
      // One write: the conditional increment upserts the month's counter on its first use. When
      // the counter exists but has no room, the filter misses and the upsert collides with it
      // (duplicate _id): that is the refusal.
      try {
        const updated = await counters.findOneAndUpdate(
          filter,
          {
            $inc: { used: amount },
            $set: { updatedAt: now },
            $setOnInsert: onInsert(request.workspaceId, request.kind, period, now),
          },
          { upsert: true, returnDocument: 'after' },
        );
        if (updated) return { ...base, allowed: true, used: updated.used };
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      return { ...base, allowed: false, used: await read(id) };
    },

    async refund(request) {
      const amount = request.amount ?? 1;
      await counters.updateOne(
        { _id: counterId(request.workspaceId, request.kind, request.period), used: { $gte: amount } },
        { $inc: { used: -amount } },
        request.session ? { session: request.session } : undefined,
      );
    },

    used(workspaceId, kind, now = clock()) {
      return read(counterId(workspaceId, kind, quotaPeriod(now)));
    },
  };
}
