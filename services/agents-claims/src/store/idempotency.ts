import { isDuplicateKeyError, type Collection, type DocumentStore, type StoredDocument } from '@planning/store';
import { sha256 } from '../domain/claims.js';

/** An answer kept for replay: the result of the first request, or the error it got. */
export type StoredAnswer = { ok: true; result: Record<string, unknown> } | { ok: false; error: { code: string; message: string; details: Record<string, unknown> } };

export interface IdempotencyRecord extends StoredDocument {
  /** The API key that sent it: keys are per token. */
  keyId: string;
  requestHash: string;
  state: 'in-flight' | 'done';
  /** While in flight: until when its request owns it (after that, a retry takes over). */
  ownerUntil?: Date;
  /** The claim the request inserted, once it did (lets a takeover finish a claim that was granted). */
  claimId?: string;
  answer?: StoredAnswer;
  createdAt: Date;
  /** 24 h after the first request: the record no longer answers, and is swept. */
  expiresAt: Date;
}

export type Begin =
  | { kind: 'new'; id: string }
  | { kind: 'takeover'; id: string; claimId?: string }
  | { kind: 'replay'; answer: StoredAnswer }
  | { kind: 'mismatch' }
  | { kind: 'in-flight' };

/** How long a key answers (DECISIONS §7: 24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/**
 * Idempotency records of claim requests, per API key and key. The first request inserts the
 * record (in flight, with an owner lease); the insert decides who runs, so two retries racing
 * never both run. The answer is stored when the request finishes.
 */
export class IdempotencyRepository {
  private constructor(private readonly records: Collection<IdempotencyRecord>) {}

  static async open(store: DocumentStore): Promise<IdempotencyRepository> {
    const records = store.collection<IdempotencyRecord>('idempotency_keys');
    await records.createIndexes([{ name: 'expiry_ttl', keys: { expiresAt: 1 }, expireAfterSeconds: 0 }]);
    return new IdempotencyRepository(records);
  }

  async begin(keyId: string, key: string, requestHash: string, now: Date, leaseMs: number): Promise<Begin> {
    const id = `${keyId}:${sha256(key)}`;
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.records.insertOne({
          _id: id,
          keyId,
          requestHash,
          state: 'in-flight',
          ownerUntil: new Date(now.getTime() + leaseMs),
          createdAt: now,
          expiresAt: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
        });
        return { kind: 'new', id };
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      const existing = await this.records.findOne({ _id: id });
      if (!existing) continue;
      // Expiry is decided here, not by the TTL sweep: an old record no longer answers.
      if (existing.expiresAt <= now) {
        await this.records.deleteOne({ _id: id, expiresAt: { $lte: now } });
        continue;
      }
      if (existing.requestHash !== requestHash) return { kind: 'mismatch' };
      if (existing.state === 'done' && existing.answer) return { kind: 'replay', answer: existing.answer };
      if (existing.ownerUntil && existing.ownerUntil > now) return { kind: 'in-flight' };
      // The first request's process died while it ran: take the record over, conditionally.
      const taken = await this.records.findOneAndUpdate(
        { _id: id, state: 'in-flight', ownerUntil: { $lte: now } },
        { $set: { ownerUntil: new Date(now.getTime() + leaseMs) } },
        { returnDocument: 'after' },
      );
      if (taken) return { kind: 'takeover', id, ...(taken.claimId ? { claimId: taken.claimId } : {}) };
    }
    return { kind: 'in-flight' };
  }

  async noteClaim(id: string, claimId: string): Promise<void> {
    await this.records.updateOne({ _id: id, state: 'in-flight' }, { $set: { claimId } });
  }

  async finish(id: string, answer: StoredAnswer): Promise<void> {
    await this.records.updateOne({ _id: id, state: 'in-flight' }, { $set: { state: 'done', answer }, $unset: { ownerUntil: '' } });
  }

  /** Forgets a request that failed for a reason a retry may not meet again (unavailable, internal). */
  async abandon(id: string): Promise<void> {
    await this.records.deleteOne({ _id: id, state: 'in-flight' });
  }
}
