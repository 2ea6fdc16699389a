import { randomUUID } from 'node:crypto';
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
  /** While in flight: the request that owns it (random per begin or takeover); every later write names it. */
  owner?: string;
  /** The claim the request inserted, once it did (lets a takeover finish a claim that was granted). */
  claimId?: string;
  answer?: StoredAnswer;
  createdAt: Date;
  /** 24 h after the first request: the record no longer answers, and is swept. */
  expiresAt: Date;
}

export type Begin =
  | { kind: 'new'; id: string; owner: string }
  | { kind: 'takeover'; id: string; owner: string; claimId?: string }
  | { kind: 'replay'; answer: StoredAnswer }
  | { kind: 'mismatch' }
  | { kind: 'in-flight' };

/** How long a key answers (DECISIONS §7: 24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/**
 * Idempotency records of claim requests, per API key and key. The first request inserts the
 * record (in flight, with an owner and an owner lease); the insert decides who runs, so two
 * retries racing never both run. A retry after the lease takes the record over with a new owner;
 * every later write (the claim's id, the answer, giving the record up) is conditional on the
 * owner, so a request that outlived its lease can no longer change a record another one owns.
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
    const owner = randomUUID();
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.records.insertOne({
          _id: id,
          keyId,
          requestHash,
          state: 'in-flight',
          owner,
          ownerUntil: new Date(now.getTime() + leaseMs),
          createdAt: now,
          expiresAt: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
        });
        return { kind: 'new', id, owner };
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
        { $set: { ownerUntil: new Date(now.getTime() + leaseMs), owner } },
        { returnDocument: 'after' },
      );
      if (taken) return { kind: 'takeover', id, owner, ...(taken.claimId ? { claimId: taken.claimId } : {}) };
    }
    return { kind: 'in-flight' };
  }

  /** Notes the claim the request is about to insert; false when the request no longer owns the record. */
  async noteClaim(id: string, owner: string, claimId: string): Promise<boolean> {
    const res = await this.records.updateOne({ _id: id, state: 'in-flight', owner }, { $set: { claimId } });
    return res.matchedCount > 0;
  }

  /** Stores the answer; false when the request no longer owns the record (a retry took it over). */
  async finish(id: string, owner: string, answer: StoredAnswer): Promise<boolean> {
    const res = await this.records.updateOne(
      { _id: id, state: 'in-flight', owner },
      { $set: { state: 'done', answer }, $unset: { ownerUntil: '', owner: '' } },
    );
    return res.matchedCount > 0;
  }

  /** Forgets a request that failed before it took a claim, for a reason a retry may not meet again. */
  async abandon(id: string, owner: string): Promise<void> {
    await this.records.deleteOne({ _id: id, state: 'in-flight', owner });
  }

  /**
   * Gives up a request that failed after it noted a claim: the record stays (with the claim's id)
   * and the next retry takes it over at once, finishing or waiting for that claim.
   */
  async release(id: string, owner: string, now: Date): Promise<void> {
    await this.records.updateOne({ _id: id, state: 'in-flight', owner }, { $set: { ownerUntil: now } });
  }
}
