/**
 * The contract of idempotency-key records: every store adapter the services run on must pass it,
 * for every behaviour the callers rely on (claims: owners, progress notes, takeovers, stored
 * refusals; imports: per-kind keys, answers written inside the caller's transaction). Each test
 * uses a fresh collection, so the suite can share one database.
 */
import { randomBytes } from 'node:crypto';
import type { DocumentStore } from '@planning/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyKeys, idempotencyRecordId, validateIdempotencyKey, type Begin } from '../idempotency-keys.js';

export interface IdempotencyContractTarget {
  store: DocumentStore;
  /**
   * Runs the store's TTL expiry as of `now` (adapters whose expiry the test can drive); absent,
   * the suite checks only that records stop answering at `expiresAt` and that the TTL index exists.
   */
  expireAt?: (now: Date) => Promise<void> | void;
}

const T0 = new Date('2026-01-05T10:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const LEASE = 30_000;

export function describeIdempotencyContract(adapterName: string, open: () => Promise<IdempotencyContractTarget>): void {
  describe(`idempotency contract (${adapterName})`, () => {
    let target: IdempotencyContractTarget;

    beforeAll(async () => {
      target = await open();
    });

    afterAll(async () => {
      await target?.store.close();
    });

    const fresh = (options: { ttlMs?: number } = {}) =>
      IdempotencyKeys.open(target.store, { collection: `idem_${randomBytes(6).toString('hex')}`, ...options });
    const id = (key = randomBytes(4).toString('hex')) => idempotencyRecordId('key_agent', key);
    const begin = (keys: IdempotencyKeys, rid: string, requestHash = 'h1', now = T0, kind = 'claim') =>
      keys.begin({ id: rid, kind, requestHash, now, leaseMs: LEASE });
    const owned = (b: Begin): { id: string; owner: string } => {
      if (b.kind !== 'new' && b.kind !== 'takeover') throw new Error(`expected to own the record, got ${b.kind}`);
      return b;
    };

    it('idempotency: the same key and body after the first answered replays its answer, success or refusal', async () => {
      const keys = await fresh();
      const a = owned(await begin(keys, id('a')));
      expect(await keys.finish(a.id, a.owner, { ok: true, result: { claimId: 'clm_1', n: 1 } })).toBe(true);
      expect(await begin(keys, id('a'), 'h1', at(1_000))).toEqual({ kind: 'replay', answer: { ok: true, result: { claimId: 'clm_1', n: 1 } } });
      const b = owned(await begin(keys, id('b')));
      const refusal = { ok: false as const, error: { code: 'work-already-claimed', message: 'taken', details: { reason: 'active-claim' } } };
      await keys.finish(b.id, b.owner, refusal);
      expect(await begin(keys, id('b'), 'h1', at(1_000))).toEqual({ kind: 'replay', answer: refusal });
    });

    it('idempotency: the same key with another body, or for another kind of request, is a mismatch', async () => {
      const keys = await fresh();
      const a = owned(await begin(keys, id('k')));
      expect(await begin(keys, id('k'), 'h2')).toEqual({ kind: 'mismatch' });
      await keys.finish(a.id, a.owner, { ok: true, result: {} });
      expect(await begin(keys, id('k'), 'h2', at(5))).toEqual({ kind: 'mismatch' });
      expect(await begin(keys, id('k'), 'h1', at(5), 'import-commit')).toEqual({ kind: 'mismatch' });
      // Keys are per caller: another caller's identical key is its own record.
      expect((await keys.begin({ id: idempotencyRecordId('key_other', 'k'), kind: 'claim', requestHash: 'h2', now: T0, leaseMs: LEASE })).kind).toBe('new');
    });

    it('idempotency: while the first request runs (within its lease) a retry is in flight', async () => {
      const keys = await fresh();
      owned(await begin(keys, id('k')));
      expect(await begin(keys, id('k'), 'h1', at(LEASE - 1))).toEqual({ kind: 'in-flight' });
    });

    it('idempotency: racing first requests with one key: exactly one runs, the others are in flight', async () => {
      const keys = await fresh();
      const results = await Promise.all(Array.from({ length: 20 }, () => begin(keys, id('race'))));
      expect(results.filter((r) => r.kind === 'new')).toHaveLength(1);
      expect(results.filter((r) => r.kind === 'in-flight')).toHaveLength(19);
    });

    it('idempotency: after the lease a retry takes over with what the dead request noted; the old owner can change nothing', async () => {
      const keys = await fresh();
      const first = owned(await begin(keys, id('k')));
      expect(await keys.note(first.id, first.owner, { claimId: 'clm_9' })).toBe(true);
      const taken = await begin(keys, id('k'), 'h1', at(LEASE));
      expect(taken).toMatchObject({ kind: 'takeover', progress: { claimId: 'clm_9' } });
      const retry = owned(taken);
      expect(retry.owner).not.toBe(first.owner);
      // The first request outlived its lease: none of its writes land.
      expect(await keys.note(first.id, first.owner, { claimId: 'clm_x' })).toBe(false);
      expect(await keys.finish(first.id, first.owner, { ok: true, result: { late: true } })).toBe(false);
      await keys.abandon(first.id, first.owner);
      await keys.release(first.id, first.owner, at(LEASE + 1));
      expect(await begin(keys, id('k'), 'h1', at(LEASE + 2))).toEqual({ kind: 'in-flight' });
      expect(await keys.finish(retry.id, retry.owner, { ok: true, result: { claimId: 'clm_9' } })).toBe(true);
      expect(await begin(keys, id('k'), 'h1', at(LEASE + 3))).toEqual({ kind: 'replay', answer: { ok: true, result: { claimId: 'clm_9' } } });
    });

    it('idempotency: notes merge, and racing takeovers leave exactly one owner', async () => {
      const keys = await fresh();
      const first = owned(await begin(keys, id('k')));
      await keys.note(first.id, first.owner, { a: '1' });
      await keys.note(first.id, first.owner, { b: '2' });
      const results = await Promise.all(Array.from({ length: 10 }, () => begin(keys, id('k'), 'h1', at(LEASE))));
      const takeovers = results.filter((r) => r.kind === 'takeover');
      expect(takeovers).toHaveLength(1);
      expect(takeovers[0]).toMatchObject({ progress: { a: '1', b: '2' } });
      expect(results.filter((r) => r.kind === 'in-flight')).toHaveLength(9);
    });

    it('idempotency: an abandoned request leaves no record; a released one is taken over at once', async () => {
      const keys = await fresh();
      const a = owned(await begin(keys, id('a')));
      await keys.abandon(a.id, a.owner);
      expect((await begin(keys, id('a'), 'h2', at(1))).kind).toBe('new');
      const b = owned(await begin(keys, id('b')));
      await keys.note(b.id, b.owner, { claimId: 'clm_2' });
      await keys.release(b.id, b.owner, at(5));
      expect(await begin(keys, id('b'), 'h1', at(5))).toMatchObject({ kind: 'takeover', progress: { claimId: 'clm_2' } });
    });

    it('idempotency: the answer is written with the change it answers, inside the caller\'s transaction, or not at all', async () => {
      const keys = await fresh();
      const things = target.store.collection(`things_${randomBytes(4).toString('hex')}`);
      const a = owned(await begin(keys, id('a')));
      await expect(
        target.store.withTransaction(async (session) => {
          await things.insertOne({ _id: 'made' }, { session });
          await keys.finish(a.id, a.owner, { ok: true, result: { id: 'made' } }, { session });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await things.findOne({ _id: 'made' })).toBeNull();
      expect(await begin(keys, id('a'), 'h1', at(1))).toEqual({ kind: 'in-flight' });
      await target.store.withTransaction(async (session) => {
        await things.insertOne({ _id: 'made' }, { session });
        expect(await keys.finish(a.id, a.owner, { ok: true, result: { id: 'made' } }, { session })).toBe(true);
      });
      expect(await begin(keys, id('a'), 'h1', at(2))).toEqual({ kind: 'replay', answer: { ok: true, result: { id: 'made' } } });
    });

    it('idempotency: a record stops answering at its expiry, whether or not the TTL index has removed it yet', async () => {
      const keys = await fresh({ ttlMs: 60_000 });
      const a = owned(await begin(keys, id('k')));
      await keys.finish(a.id, a.owner, { ok: true, result: { first: true } });
      expect((await begin(keys, id('k'), 'h1', at(59_999))).kind).toBe('replay');
      // Past expiry the key is new again, even with another body.
      expect((await begin(keys, id('k'), 'h2', at(60_000))).kind).toBe('new');
      const stored = await keys.get(id('k'));
      expect(stored?.requestHash).toBe('h2');
      expect(stored?.expiresAt.toISOString()).toBe(at(120_000).toISOString());
    });

    it('idempotency: records are removed by the store\'s TTL index on expiresAt', async () => {
      const keys = await fresh({ ttlMs: 60_000 });
      const a = owned(await begin(keys, id('old')));
      await keys.finish(a.id, a.owner, { ok: true, result: {} });
      owned(await begin(keys, id('young'), 'h1', at(30_000)));
      if (!target.expireAt) return;
      await target.expireAt(at(60_001));
      expect(await keys.get(id('old'))).toBeNull();
      expect(await keys.get(id('young'))).not.toBeNull();
    });

    it('idempotency: keys are 1 to 255 printable ASCII characters without spaces; required where the caller says', () => {
      expect(validateIdempotencyKey('abc-123_X.~')).toBe('abc-123_X.~');
      expect(validateIdempotencyKey(undefined)).toBeUndefined();
      expect(validateIdempotencyKey('x'.repeat(255))).toHaveLength(255);
      for (const bad of ['', 'has space', 'x'.repeat(256), 'ünï', 'tab\t']) {
        if (bad === '') continue;
        expect(() => validateIdempotencyKey(bad)).toThrowError(expect.objectContaining({ code: 'invalid-input', details: { field: 'idempotency-key' } }) as Error);
      }
      expect(() => validateIdempotencyKey('', { required: true })).toThrowError(expect.objectContaining({ code: 'invalid-input' }) as Error);
      expect(() => validateIdempotencyKey(undefined, { required: true })).toThrowError(expect.objectContaining({ code: 'invalid-input' }) as Error);
    });
  });
}
