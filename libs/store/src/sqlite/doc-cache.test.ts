/**
 * The decoded-document cache: bounded, exact by version, and never reachable by callers. Every
 * test reads first (so the document is cached), then changes or fails to change it, then reads
 * again: what the second read returns must be what is committed, whatever was done to the first
 * read's result.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DuplicateKeyError, TransactionConflictError } from '../port.js';
import { DocCache } from './doc-cache.js';
import { createSqliteStore, type SqliteDocumentStore } from './sqlite-store.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

const STORES: [string, (cacheKiB?: number) => SqliteDocumentStore][] = [
  ['in memory', (documentCacheKiB) => createSqliteStore({ path: ':memory:', ...(documentCacheKiB !== undefined ? { documentCacheKiB } : {}) })],
  [
    'on a file',
    (documentCacheKiB) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'doc-cache-'));
      dirs.push(dir);
      return createSqliteStore({ path: path.join(dir, 'store.sqlite'), ...(documentCacheKiB !== undefined ? { documentCacheKiB } : {}) });
    },
  ],
];

async function using<R>(open: () => SqliteDocumentStore, fn: (store: SqliteDocumentStore) => Promise<R>): Promise<R> {
  const store = open();
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

interface Item {
  _id: string;
  n: number;
  tags: string[];
  nested: { at: Date; list: { k: number }[] };
  [key: string]: unknown;
}

const item = (id: string, n: number): Item => ({ _id: id, n, tags: ['a', 'b'], nested: { at: new Date(1000 + n), list: [{ k: n }] } });

/** Changes every part of a document in place (what a careless caller might do). */
function vandalize(doc: Item): void {
  doc.n = -1;
  doc.tags.push('z');
  doc.nested.at.setTime(0);
  (doc.nested.list[0] as { k: number }).k = -1;
  doc.extra = true;
}

for (const [where, open] of STORES) {
  describe(`sqlite store document cache (${where})`, () => {
    it('a caller changing a returned document changes nothing the next read returns (find, findOne, projections, find-and-modify)', async () => {
      await using(open, async (store) => {
        const c = store.collection<Item>('c');
        await c.insertMany([item('a', 1), item('b', 2)]);
        for (let round = 0; round < 2; round++) {
          // Twice: the first reads decode (and fill the cache), the second are served by it.
          for (const doc of await c.find({}, { sort: { n: 1 } })) vandalize(doc);
          vandalize((await c.findOne({ _id: 'a' })) as Item);
          vandalize((await c.findOne({ n: 2 })) as Item);
          const projected = (await c.find({ _id: 'b' }, { projection: { tags: 0 } }))[0] as Item;
          projected.tags = [];
          vandalize(projected);
        }
        const before = (await c.findOneAndUpdate({ _id: 'a' }, { $set: { m: 1 } }, { returnDocument: 'before' })) as Item;
        vandalize(before);
        const after = (await c.findOneAndUpdate({ _id: 'a' }, { $set: { m: 2 } })) as Item;
        vandalize(after);
        expect(await c.findOne({ _id: 'a' })).toEqual({ ...item('a', 1), m: 2 });
        expect(await c.find({}, { sort: { n: 1 } })).toEqual([{ ...item('a', 1), m: 2 }, item('b', 2)]);
        const deleted = (await c.findOneAndDelete({ _id: 'b' })) as Item;
        vandalize(deleted);
        await c.insertOne(item('b', 2));
        expect(await c.findOne({ _id: 'b' })).toEqual(item('b', 2));
      });
    });

    it('a transaction: documents it returns (committed or its own) cannot be changed through them', async () => {
      await using(open, async (store) => {
        const c = store.collection<Item>('c');
        await c.insertOne(item('a', 1));
        await c.findOne({ _id: 'a' });
        await store.withTransaction(async (session) => {
          vandalize((await c.findOne({ _id: 'a' }, { session })) as Item);
          await c.insertOne(item('own', 5), { session });
          vandalize((await c.findOne({ _id: 'own' }, { session })) as Item);
          for (const doc of await c.find({}, { session })) vandalize(doc);
          expect(await c.findOne({ _id: 'own' }, { session })).toEqual(item('own', 5));
        });
        expect(await c.find({}, { sort: { _id: 1 } })).toEqual([item('a', 1), item('own', 5)]);
      });
    });

    it('updates, deletes and a reused row are seen at once by the next read', async () => {
      await using(open, async (store) => {
        const c = store.collection<Item>('c');
        await c.insertMany([item('a', 1), item('b', 2)]);
        expect(await c.findOne({ _id: 'b' })).toEqual(item('b', 2));
        await c.updateOne({ _id: 'b' }, { $set: { n: 20 } });
        expect(await c.findOne({ _id: 'b' })).toEqual({ ...item('b', 2), n: 20 });
        expect(await c.find({ n: { $gt: 10 } })).toEqual([{ ...item('b', 2), n: 20 }]);
        await c.updateMany({}, { $inc: { n: 1 } });
        expect(await c.find({}, { sort: { _id: 1 } })).toEqual([{ ...item('a', 1), n: 2 }, { ...item('b', 2), n: 21 }]);
        // The last row deleted, then a new document: SQLite may give it the same rowid.
        await c.deleteOne({ _id: 'b' });
        expect(await c.findOne({ _id: 'b' })).toBeNull();
        await c.insertOne({ ...item('c', 3), tags: ['new'] });
        expect(await c.find({}, { sort: { _id: 1 } })).toEqual([{ ...item('a', 1), n: 2 }, { ...item('c', 3), tags: ['new'] }]);
      });
    });

    it('an aborted transaction, a conflict and a rolled-back write leave the committed version to read', async () => {
      await using(open, async (store) => {
        const c = store.collection<Item>('c');
        await c.createIndexes([{ name: 'n_unique', keys: { n: 1 }, unique: true }]);
        await c.insertMany([item('a', 1), item('b', 2)]);
        expect(await c.findOne({ _id: 'a' })).toEqual(item('a', 1));

        // Aborted: its writes never reach the documents.
        const aborted = store.beginTransaction();
        await c.updateOne({ _id: 'a' }, { $set: { n: 100 } }, { session: aborted.session });
        expect(await c.findOne({ _id: 'a' }, { session: aborted.session })).toEqual({ ...item('a', 1), n: 100 });
        aborted.abort();
        expect(await c.findOne({ _id: 'a' })).toEqual(item('a', 1));

        // A conflict: the first committer wins, the loser's version is never read.
        const loser = store.beginTransaction();
        expect(await c.findOne({ _id: 'a' }, { session: loser.session })).toEqual(item('a', 1));
        await c.updateOne({ _id: 'a' }, { $set: { n: 10 } }, { session: loser.session });
        await c.updateOne({ _id: 'a' }, { $set: { n: 11 } });
        await expect(loser.commit()).rejects.toBeInstanceOf(TransactionConflictError);
        expect(await c.findOne({ _id: 'a' })).toEqual({ ...item('a', 1), n: 11 });

        // A commit that fails part-way (its second document clashes on a unique key) rolls back
        // the first document's new version, which had already replaced the cached one.
        expect(await c.findOne({ _id: 'b' })).toEqual(item('b', 2));
        const tx = store.beginTransaction();
        await c.updateOne({ _id: 'a' }, { $set: { n: 50 } }, { session: tx.session });
        await c.updateOne({ _id: 'b' }, { $set: { n: 60 } }, { session: tx.session });
        await c.insertOne(item('x', 60));
        await expect(tx.commit()).rejects.toBeInstanceOf(TransactionConflictError);
        expect(await c.find({}, { sort: { _id: 1 } })).toEqual([{ ...item('a', 1), n: 11 }, item('b', 2), item('x', 60)]);

        // A direct write refused by the unique index changes nothing either.
        await expect(c.updateOne({ _id: 'a' }, { $set: { n: 2 } })).rejects.toBeInstanceOf(DuplicateKeyError);
        expect(await c.findOne({ _id: 'a' })).toEqual({ ...item('a', 1), n: 11 });
        expect(await c.findOne({ n: 11 })).toEqual({ ...item('a', 1), n: 11 });
      });
    });

    it('a cache smaller than the data, or none at all, gives the same answers', async () => {
      for (const kib of [0, 1, 4]) {
        await using(
          () => open(kib),
          async (store) => {
            const c = store.collection<Item>('c');
            const docs = Array.from({ length: 200 }, (_, i) => ({ ...item(`d${String(i).padStart(3, '0')}`, i), pad: 'p'.repeat(i * 3) }));
            await c.insertMany(docs);
            for (let round = 0; round < 3; round++) {
              expect(await c.find({}, { sort: { _id: 1 } })).toEqual(docs);
              expect(await c.find({ n: { $gte: 150 } }, { sort: { n: -1 }, limit: 20 })).toEqual(docs.slice(130).reverse().slice(0, 20));
              await c.updateMany({ n: { $lt: 5 } }, { $set: { round } });
              for (let i = 0; i < 5; i++) (docs[i] as Item).round = round;
            }
          },
        );
      }
    });
  });
}

describe('sqlite store: plans kept for a repeated query', () => {
  it('are made again when an index turns multikey or a new index is added', async () => {
    await using(() => createSqliteStore({ path: ':memory:' }), async (store) => {
      const c = store.collection('c');
      await c.createIndexes([{ name: 'k', keys: { k: 1 } }]);
      await c.insertMany([
        { _id: 'a', k: 3 },
        { _id: 'b', k: 1 },
        { _id: 'c', k: 2 },
      ]);
      const page = { sort: { k: 1 as const }, limit: 10 };
      expect((await c.find({}, page)).map((d) => d._id)).toEqual(['b', 'c', 'a']);
      expect(await c.explain({}, page)).toMatchObject({ plan: 'IXSCAN', index: 'k', inMemorySort: false });
      // An array value: walking the index would meet `d` twice and in the wrong place.
      await c.insertOne({ _id: 'd', k: [0, 9] });
      expect((await c.find({}, page)).map((d) => d._id)).toEqual(['d', 'b', 'c', 'a']);
      expect((await c.find({}, { sort: { k: -1 }, limit: 10 })).map((d) => d._id)).toEqual(['d', 'a', 'c', 'b']);
      const byN = { n: 5 };
      expect(await c.explain(byN)).toMatchObject({ plan: 'COLLSCAN' });
      await c.createIndexes([{ name: 'n', keys: { n: 1 } }]);
      expect(await c.explain(byN)).toMatchObject({ plan: 'IXSCAN', index: 'n' });
    });
  });
});

describe('DocCache', () => {
  it('finds a row only at the version it holds, and stays within its budget, least recently used first', () => {
    const cache = new DocCache(200);
    cache.set(1, 1, 10, { _id: 'a' }, 50);
    cache.set(1, 2, 11, { _id: 'b' }, 50);
    cache.set(1, 3, 12, { _id: 'c' }, 50);
    cache.set(1, 4, 13, { _id: 'd' }, 50);
    expect(cache.get(1, 1, 10)).toEqual({ _id: 'a' });
    expect(cache.get(1, 1, 12)).toBeUndefined();
    expect(cache.get(2, 1, 10)).toBeUndefined();
    // Row 1 was used last: row 2 goes when a fifth entry exceeds the budget.
    cache.set(1, 5, 14, { _id: 'e' }, 50);
    expect(cache.has(1, 2, 11)).toBe(false);
    expect(cache.has(1, 1, 10)).toBe(true);
    expect(cache.has(1, 5, 14)).toBe(true);
    // A new version replaces the old one; a document larger than a quarter of the budget is not kept.
    cache.set(1, 1, 15, { _id: 'a2' }, 50);
    expect(cache.get(1, 1, 10)).toBeUndefined();
    expect(cache.get(1, 1, 15)).toEqual({ _id: 'a2' });
    cache.set(1, 6, 16, { _id: 'big' }, 60);
    expect(cache.has(1, 6, 16)).toBe(false);
    cache.delete(1, 1);
    expect(cache.holds(1, 1)).toBe(false);
    expect(cache.size).toBe(3);
  });
});
