/**
 * Idempotency-key records on the document store port, for requests that must run at most once
 * per key: one record per caller and key, holding the fingerprint of the first request's body,
 * its state and, once done, its answer.
 *
 * The first request inserts the record (in flight, with a random owner and an owner lease); the
 * insert decides who runs, so two retries racing never both run. A retry after the lease (the
 * first request's process died) takes the record over with a new owner; every later write (its
 * progress, its answer, giving it up) is conditional on the owner, so a request that outlived its
 * lease can no longer change a record another one owns. Records answer for `ttlMs` (24 h by
 * default) from the first request: that is decided here, by `expiresAt`, and a TTL index on
 * `expiresAt` removes them afterwards (housekeeping only; a store's TTL sweep may run late).
 */
import { createHash, randomUUID } from 'node:crypto';
import { conflict, invalidInput, type ServiceError } from '@planning/errors';
import { isDuplicateKeyError, type Collection, type DocumentStore, type StoredDocument, type StoreSession } from '@planning/store';

/** An answer kept for replay: the result of the first request, or the refusal it got. */
export type StoredAnswer =
  | { ok: true; result: Record<string, unknown> }
  | { ok: false; error: { code: string; message: string; details: Record<string, unknown> } };

export interface IdempotencyRecord extends StoredDocument {
  /** What kind of request the key was used for: the same key for another kind is a mismatch. */
  kind: string;
  /** Fingerprint of the first request's body. */
  requestHash: string;
  state: 'in-flight' | 'done';
  /** While in flight: the request that owns the record (random per begin or takeover). */
  owner?: string;
  /** While in flight: until when its owner holds it (after that, a retry takes over). */
  ownerUntil?: Date;
  /** What the owning request noted on its way (e.g. the id of what it created), for a takeover. */
  progress?: Record<string, string>;
  answer?: StoredAnswer;
  createdAt: Date;
  /** `createdAt + ttl`: the record no longer answers, and the TTL index removes it. */
  expiresAt: Date;
}

export type Begin =
  | { kind: 'new'; id: string; owner: string }
  | { kind: 'takeover'; id: string; owner: string; progress: Record<string, string> }
  | { kind: 'replay'; answer: StoredAnswer }
  | { kind: 'mismatch' }
  | { kind: 'in-flight' };

/** How long a key answers (24 h, as in DECISIONS §7 and §8). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/** The name of the TTL index every collection of records has. */
const TTL_INDEX = 'expiry_ttl';

/** Keys are the client's: printable ASCII without spaces, 1 to 255 characters (as in the IETF Idempotency-Key draft). */
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * The `idempotency-key` header, checked: 400 `invalid-input` (field `idempotency-key`) when it is
 * malformed, or missing where `required`.
 */
export function validateIdempotencyKey(value: string | undefined, options: { required: true }): string;
export function validateIdempotencyKey(value: string | undefined, options?: { required?: boolean }): string | undefined;
export function validateIdempotencyKey(value: string | undefined, options: { required?: boolean } = {}): string | undefined {
  if (value === undefined || value === '') {
    if (options.required) throw invalidInput('idempotency-key', "The 'idempotency-key' header is required");
    if (value === undefined) return undefined;
  }
  if (!KEY_PATTERN.test(value)) {
    throw invalidInput('idempotency-key', "The 'idempotency-key' header must be 1 to 255 printable ASCII characters without spaces");
  }
  return value;
}

/** The record id of `key` for a caller: keys are per caller, and the key itself is not stored. */
export function idempotencyRecordId(caller: string, key: string): string {
  return `${caller}:${createHash('sha256').update(key).digest('hex')}`;
}

/** 400: the key was used with another request. */
export function idempotencyMismatch(message = 'This idempotency key was used with another request body; use a new key for a new request'): ServiceError {
  return invalidInput('idempotency-key', message);
}

/** 409 `idempotency-in-flight`: the first request with the key is still running. */
export function idempotencyInFlight(message = 'A request with this idempotency key is still being processed; retry shortly'): ServiceError {
  return conflict('idempotency-in-flight', message);
}

export class IdempotencyKeys {
  private constructor(
    private readonly records: Collection<IdempotencyRecord>,
    private readonly ttlMs: number,
  ) {}

  /** The records in `collection` of `store` (the TTL index is created if missing). */
  static async open(store: DocumentStore, options: { collection: string; ttlMs?: number }): Promise<IdempotencyKeys> {
    const records = store.collection<IdempotencyRecord>(options.collection);
    await records.createIndexes([{ name: TTL_INDEX, keys: { expiresAt: 1 }, expireAfterSeconds: 0 }]);
    return new IdempotencyKeys(records, options.ttlMs ?? IDEMPOTENCY_TTL_MS);
  }

  /**
   * Begins a request under its key (`id` from `idempotencyRecordId`): `new` (this request runs and
   * owns the record), `takeover` (the owner's lease passed: this request owns it now, with what
   * the dead one noted), `replay` (done: the stored answer), `mismatch` (another kind or body) or
   * `in-flight` (the owner is still running).
   */
  async begin(request: { id: string; kind: string; requestHash: string; now: Date; leaseMs: number }): Promise<Begin> {
    const { id, kind, requestHash, now, leaseMs } = request;
    const owner = randomUUID();
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.records.insertOne({
          _id: id,
          kind,
          requestHash,
          state: 'in-flight',
          owner,
          ownerUntil: new Date(now.getTime() + leaseMs),
          createdAt: now,
          expiresAt: new Date(now.getTime() + this.ttlMs),
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
      if (existing.kind !== kind || existing.requestHash !== requestHash) return { kind: 'mismatch' };
      if (existing.state === 'done' && existing.answer) return { kind: 'replay', answer: existing.answer };
      if (existing.ownerUntil && existing.ownerUntil > now) return { kind: 'in-flight' };
      // The owner's process died (or gave up) while it ran: take the record over, conditionally.
      const taken = await this.records.findOneAndUpdate(
        { _id: id, state: 'in-flight', ownerUntil: { $lte: now } },
        { $set: { ownerUntil: new Date(now.getTime() + leaseMs), owner } },
        { returnDocument: 'after' },
      );
      if (taken) return { kind: 'takeover', id, owner, progress: taken.progress ?? {} };
    }
    return { kind: 'in-flight' };
  }

  /** Notes progress (merged into what was noted); false when `owner` no longer owns the record. */
  async note(id: string, owner: string, progress: Record<string, string>): Promise<boolean> {
    const set = Object.fromEntries(Object.entries(progress).map(([k, v]) => [`progress.${k}`, v]));
    const res = await this.records.updateOne({ _id: id, state: 'in-flight', owner }, { $set: set });
    return res.matchedCount > 0;
  }

  /**
   * Stores the answer (optionally inside the caller's transaction, with the change it answers);
   * false when `owner` no longer owns the record (a retry took it over).
   */
  async finish(id: string, owner: string, answer: StoredAnswer, options: { session?: StoreSession } = {}): Promise<boolean> {
    const res = await this.records.updateOne(
      { _id: id, state: 'in-flight', owner },
      { $set: { state: 'done', answer }, $unset: { ownerUntil: '', owner: '' } },
      options.session ? { session: options.session } : undefined,
    );
    return res.matchedCount > 0;
  }

  /** Forgets a request that failed for a reason a retry may not meet again (only if `owner` still owns it). */
  async abandon(id: string, owner: string): Promise<void> {
    await this.records.deleteOne({ _id: id, state: 'in-flight', owner });
  }

  /**
   * Gives up a request that failed after it noted progress: the record stays (with what was
   * noted) and the next retry takes it over at once.
   */
  async release(id: string, owner: string, now: Date): Promise<void> {
    await this.records.updateOne({ _id: id, state: 'in-flight', owner }, { $set: { ownerUntil: now } });
  }

  /** The record as stored (tests and diagnostics). */
  get(id: string): Promise<IdempotencyRecord | null> {
    return this.records.findOne({ _id: id });
  }
}
