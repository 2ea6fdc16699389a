/**
 * The document store contract: every adapter of the port must pass this suite. It covers every
 * operation and option of the port with the semantics the repositories rely on. Each test uses
 * fresh collections (random names), so the suite can run against a shared MongoDB database.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DuplicateKeyError,
  isDuplicateKeyError,
  type Collection,
  type DocumentStore,
  type StoreSession,
  type StoredDocument,
} from '../port.js';
import { escapeRegExp } from '../regex.js';

type Doc = StoredDocument;

function ids(docs: readonly (Doc | null)[]): string[] {
  return docs.map((d) => (d ? d._id : '<null>'));
}

function sortedIds(docs: readonly Doc[]): string[] {
  return ids(docs).sort();
}

async function rejectsDuplicate(promise: Promise<unknown>, index: string): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected DuplicateKeyError on ${index}`).toBeInstanceOf(DuplicateKeyError);
  expect((err as DuplicateKeyError).index).toBe(index);
}

export function describeStoreContract(adapterName: string, open: () => Promise<DocumentStore>): void {
  describe(`document store contract (${adapterName})`, () => {
    let store: DocumentStore;

    beforeAll(async () => {
      store = await open();
    });

    afterAll(async () => {
      await store?.close();
    });

    const fresh = <T extends Doc = Doc>(label = 'c'): Collection<T> => store.collection<T>(`${label}_${randomBytes(6).toString('hex')}`);

    /** A collection with some documents, created outside any transaction. */
    const seeded = async (docs: Doc[], label = 'c'): Promise<Collection> => {
      const c = fresh(label);
      if (docs.length > 0) await c.insertMany(docs);
      return c;
    };

    // ---- basics ------------------------------------------------------------------------------

    describe('basics', () => {
      it('store: ping resolves and kind names the adapter', async () => {
        await expect(store.ping()).resolves.toBeUndefined();
        expect(typeof store.kind).toBe('string');
        expect(store.kind.length).toBeGreaterThan(0);
      });

      it('collection: exposes its name', () => {
        const c = store.collection('named_collection_x');
        expect(c.name).toBe('named_collection_x');
      });

      it('insertOne: stored documents come back equal, and neither input nor output aliases the stored copy', async () => {
        const c = fresh();
        const input = { _id: 'a', title: 'one', tags: ['x'], meta: { n: 1, deep: { ok: true } } };
        await c.insertOne(input);
        input.tags.push('mutated');
        input.meta.n = 99;
        const first = await c.findOne({ _id: 'a' });
        expect(first).toEqual({ _id: 'a', title: 'one', tags: ['x'], meta: { n: 1, deep: { ok: true } } });
        (first?.tags as string[]).push('again');
        const second = await c.findOne({ _id: 'a' });
        expect(second?.tags).toEqual(['x']);
      });

      it('insertOne: a duplicate _id is rejected with DuplicateKeyError on _id_', async () => {
        const c = fresh();
        await c.insertOne({ _id: 'a', v: 1 });
        await rejectsDuplicate(c.insertOne({ _id: 'a', v: 2 }), '_id_');
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', v: 1 });
        expect(isDuplicateKeyError(await c.insertOne({ _id: 'a' }).catch((e: unknown) => e), '_id_')).toBe(true);
      });

      it('insertMany: ordered insert stops at the first failure and keeps the documents before it', async () => {
        const c = fresh();
        await rejectsDuplicate(c.insertMany([{ _id: 'a' }, { _id: 'b' }, { _id: 'a' }, { _id: 'c' }]), '_id_');
        expect(sortedIds(await c.find({}))).toEqual(['a', 'b']);
      });

      it('insertMany: an empty list is a no-op', async () => {
        const c = fresh();
        await c.insertMany([]);
        expect(await c.countDocuments({})).toBe(0);
      });

      it('insertOne: fields set to undefined are not stored', async () => {
        const c = fresh();
        await c.insertOne({ _id: 'a', present: 1, absent: undefined });
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', present: 1 });
        expect(await c.countDocuments({ absent: { $exists: true } })).toBe(0);
      });

      it('dates: Date values round-trip and compare as dates in filters and sorts', async () => {
        const c = fresh();
        const t0 = new Date('2024-01-01T00:00:00.000Z');
        const at = (ms: number): Date => new Date(t0.getTime() + ms);
        await c.insertMany([
          { _id: 'a', at: at(3000), nested: { when: at(1) }, list: [at(2)] },
          { _id: 'b', at: at(1000) },
          { _id: 'c', at: at(2000) },
        ]);
        const a = await c.findOne({ _id: 'a' });
        expect(a?.at).toBeInstanceOf(Date);
        expect((a?.at as Date).getTime()).toBe(at(3000).getTime());
        expect(((a?.nested as { when: Date }).when as Date).getTime()).toBe(at(1).getTime());
        expect((a?.list as Date[])[0]).toBeInstanceOf(Date);
        expect(ids(await c.find({ at: { $gt: at(1000) } }, { sort: { at: 1 } }))).toEqual(['c', 'a']);
        expect(ids(await c.find({ at: { $lte: at(2000) } }, { sort: { at: -1 } }))).toEqual(['c', 'b']);
        expect(ids(await c.find({ at: at(2000) }))).toEqual(['c']);
      });
    });

    // ---- filters -----------------------------------------------------------------------------

    describe('filters', () => {
      const base: Doc[] = [
        { _id: 'a', s: 'x', n: 1 },
        { _id: 'b', s: 'y', n: 2 },
        { _id: 'c', n: 3 },
        { _id: 'd', s: null, n: 4 },
      ];

      it('filter: $eq, $ne, $in and $nin, with null matching missing fields', async () => {
        const c = await seeded(base);
        expect(sortedIds(await c.find({ s: 'x' }))).toEqual(['a']);
        expect(sortedIds(await c.find({ s: { $eq: 'x' } }))).toEqual(['a']);
        expect(sortedIds(await c.find({ s: { $ne: 'x' } }))).toEqual(['b', 'c', 'd']);
        expect(sortedIds(await c.find({ s: { $in: ['x', 'y'] } }))).toEqual(['a', 'b']);
        expect(sortedIds(await c.find({ s: { $nin: ['x'] } }))).toEqual(['b', 'c', 'd']);
        expect(sortedIds(await c.find({ s: null }))).toEqual(['c', 'd']);
        expect(sortedIds(await c.find({ s: { $in: [null, 'y'] } }))).toEqual(['b', 'c', 'd']);
        expect(sortedIds(await c.find({ s: { $in: [] } }))).toEqual([]);
        expect(sortedIds(await c.find({}))).toEqual(['a', 'b', 'c', 'd']);
      });

      it('filter: $gt, $gte, $lt and $lte compare within one type only', async () => {
        const c = await seeded([...base, { _id: 'e', n: '10' }, { _id: 'f', n: new Date(5) }]);
        expect(sortedIds(await c.find({ n: { $gt: 2 } }))).toEqual(['c', 'd']);
        expect(sortedIds(await c.find({ n: { $gte: 2 } }))).toEqual(['b', 'c', 'd']);
        expect(sortedIds(await c.find({ n: { $lt: 3 } }))).toEqual(['a', 'b']);
        expect(sortedIds(await c.find({ n: { $lte: 3, $gt: 1 } }))).toEqual(['b', 'c']);
        expect(sortedIds(await c.find({ n: { $gte: '0' } }))).toEqual(['e']);
      });

      it('filter: $exists tells present (even null) from missing fields', async () => {
        const c = await seeded(base);
        expect(sortedIds(await c.find({ s: { $exists: true } }))).toEqual(['a', 'b', 'd']);
        expect(sortedIds(await c.find({ s: { $exists: false } }))).toEqual(['c']);
      });

      it('filter: $and, $or and $nor combine conditions', async () => {
        const c = await seeded(base);
        expect(sortedIds(await c.find({ $and: [{ n: { $gt: 1 } }, { n: { $lt: 4 } }] }))).toEqual(['b', 'c']);
        expect(sortedIds(await c.find({ $or: [{ s: 'x' }, { n: 4 }] }))).toEqual(['a', 'd']);
        expect(sortedIds(await c.find({ n: { $gte: 2 }, $or: [{ s: 'y' }, { s: { $exists: false } }] }))).toEqual(['b', 'c']);
        expect(sortedIds(await c.find({ $nor: [{ s: 'x' }, { n: { $gte: 3 } }] }))).toEqual(['b']);
      });

      it('filter: $not negates an operator condition', async () => {
        const c = await seeded(base);
        expect(sortedIds(await c.find({ n: { $not: { $gt: 2 } } }))).toEqual(['a', 'b']);
      });

      it('filter: dotted paths reach into sub-documents and arrays of sub-documents', async () => {
        const c = await seeded([
          { _id: 'a', meta: { owner: 'u1', tags: { level: 2 } }, items: [{ k: 'x', q: 1 }, { k: 'y', q: 5 }] },
          { _id: 'b', meta: { owner: 'u2' }, items: [{ k: 'y', q: 2 }] },
          { _id: 'c' },
        ]);
        expect(sortedIds(await c.find({ 'meta.owner': 'u1' }))).toEqual(['a']);
        expect(sortedIds(await c.find({ 'meta.tags.level': { $gte: 2 } }))).toEqual(['a']);
        expect(sortedIds(await c.find({ 'items.k': 'y' }))).toEqual(['a', 'b']);
        expect(sortedIds(await c.find({ 'items.q': { $gt: 4 } }))).toEqual(['a']);
        expect(sortedIds(await c.find({ 'meta.owner': { $exists: false } }))).toEqual(['c']);
      });

      it('filter: a scalar condition on an array matches any element; an array value matches the whole array', async () => {
        const c = await seeded([
          { _id: 'a', labels: ['bug', 'ui'] },
          { _id: 'b', labels: ['ui'] },
          { _id: 'c', labels: [] },
        ]);
        expect(sortedIds(await c.find({ labels: 'bug' }))).toEqual(['a']);
        expect(sortedIds(await c.find({ labels: 'ui' }))).toEqual(['a', 'b']);
        expect(sortedIds(await c.find({ labels: { $in: ['bug', 'nope'] } }))).toEqual(['a']);
        expect(sortedIds(await c.find({ labels: ['bug', 'ui'] }))).toEqual(['a']);
        expect(sortedIds(await c.find({ labels: ['ui', 'bug'] }))).toEqual([]);
        expect(sortedIds(await c.find({ labels: { $all: ['ui', 'bug'] } }))).toEqual(['a']);
        expect(sortedIds(await c.find({ labels: { $size: 0 } }))).toEqual(['c']);
        expect(sortedIds(await c.find({ labels: { $nin: ['bug'] } }))).toEqual(['b', 'c']);
      });

      it('filter: $elemMatch needs a single element to satisfy every condition', async () => {
        const c = await seeded([
          { _id: 'a', items: [{ k: 'x', q: 1 }, { k: 'y', q: 5 }], scores: [1, 9] },
          { _id: 'b', items: [{ k: 'x', q: 6 }], scores: [4] },
        ]);
        expect(sortedIds(await c.find({ items: { $elemMatch: { k: 'x', q: { $gte: 5 } } } }))).toEqual(['b']);
        // Without $elemMatch the two conditions may be met by different elements.
        expect(sortedIds(await c.find({ 'items.k': 'x', 'items.q': { $gte: 5 } }))).toEqual(['a', 'b']);
        expect(sortedIds(await c.find({ scores: { $elemMatch: { $gt: 3, $lt: 6 } } }))).toEqual(['b']);
        expect(sortedIds(await c.find({ scores: { $gt: 3, $lt: 6 } }))).toEqual(['a', 'b']);
      });

      it('filter: $regex matches escaped user text literally', async () => {
        const c = await seeded([
          { _id: 'a', title: 'Fix a.b(c) [x]? now' },
          { _id: 'b', title: 'fix abbc x now' },
          { _id: 'c', title: 'Refactor $HOME/*' },
        ]);
        expect(sortedIds(await c.find({ title: { $regex: escapeRegExp('a.b(c) [x]?') } }))).toEqual(['a']);
        expect(sortedIds(await c.find({ title: { $regex: 'a.b' } }))).toEqual(['a', 'b']);
        expect(sortedIds(await c.find({ title: { $regex: escapeRegExp('$home/*'), $options: 'i' } }))).toEqual(['c']);
        expect(sortedIds(await c.find({ title: { $regex: `^${escapeRegExp('fix')}`, $options: 'i' } }))).toEqual(['a', 'b']);
        expect(sortedIds(await c.find({ title: /^fix/ }))).toEqual(['b']);
        expect(sortedIds(await c.find({ title: { $regex: /NOW$/i } }))).toEqual(['a', 'b']);
      });

      it('filter: an unknown operator is rejected', async () => {
        const c = await seeded(base);
        await expect(c.find({ n: { $bogus: 1 } })).rejects.toThrow();
        await expect(c.find({ $bogus: [{ n: 1 }] })).rejects.toThrow();
      });

      it('filter: undefined values are rejected instead of widening the filter', async () => {
        const c = await seeded(base);
        await expect(c.find({ s: undefined })).rejects.toThrow(/undefined/);
        await expect(c.deleteMany({ s: undefined })).rejects.toThrow(/undefined/);
        expect(await c.countDocuments({})).toBe(4);
      });

      it('countDocuments: counts the matches', async () => {
        const c = await seeded(base);
        expect(await c.countDocuments({})).toBe(4);
        expect(await c.countDocuments({ n: { $gte: 2 } })).toBe(3);
        expect(await c.countDocuments({ s: 'nope' })).toBe(0);
      });
    });

    // ---- sort, skip, limit, projection ---------------------------------------------------------

    describe('sort, skip, limit and projection', () => {
      const people: Doc[] = [
        { _id: 'p1', team: 'b', age: 30, name: 'Ann' },
        { _id: 'p2', team: 'a', age: 25, name: 'Bob' },
        { _id: 'p3', team: 'b', age: 25, name: 'Cid' },
        { _id: 'p4', team: 'a', age: 40, name: 'Dee' },
        { _id: 'p5', team: 'c', age: 35, name: 'Eve' },
      ];

      it('sort: orders by several keys with mixed directions', async () => {
        const c = await seeded(people);
        expect(ids(await c.find({}, { sort: { team: 1, age: -1 } }))).toEqual(['p4', 'p2', 'p1', 'p3', 'p5']);
        expect(ids(await c.find({}, { sort: { age: 1, name: -1 } }))).toEqual(['p3', 'p2', 'p1', 'p5', 'p4']);
        expect(ids(await c.find({ team: { $in: ['a', 'b'] } }, { sort: { age: -1, _id: 1 } }))).toEqual(['p4', 'p1', 'p2', 'p3']);
      });

      it('sort: mixed types order like MongoDB (null and missing, numbers, strings, booleans, dates)', async () => {
        const c = await seeded([
          { _id: 'date', v: new Date(0) },
          { _id: 'str-b', v: 'b' },
          { _id: 'num-2', v: 2.5 },
          { _id: 'null', v: null },
          { _id: 'bool', v: true },
          { _id: 'missing' },
          { _id: 'str-a', v: 'a' },
          { _id: 'num-1', v: 1 },
        ]);
        const asc = ids(await c.find({}, { sort: { v: 1, _id: 1 } }));
        expect(asc).toEqual(['missing', 'null', 'num-1', 'num-2', 'str-a', 'str-b', 'bool', 'date']);
        const desc = ids(await c.find({}, { sort: { v: -1, _id: -1 } }));
        expect(desc).toEqual([...asc].reverse());
      });

      it('skip and limit: page through sorted results; limit 0 means no limit', async () => {
        const c = await seeded(people);
        expect(ids(await c.find({}, { sort: { _id: 1 }, limit: 2 }))).toEqual(['p1', 'p2']);
        expect(ids(await c.find({}, { sort: { _id: 1 }, skip: 2, limit: 2 }))).toEqual(['p3', 'p4']);
        expect(ids(await c.find({}, { sort: { _id: 1 }, skip: 4, limit: 2 }))).toEqual(['p5']);
        expect(ids(await c.find({}, { sort: { _id: -1 }, skip: 1 }))).toEqual(['p4', 'p3', 'p2', 'p1']);
        expect(ids(await c.find({}, { sort: { _id: 1 }, limit: 0 }))).toHaveLength(5);
        expect(await c.find({}, { skip: 10 })).toEqual([]);
      });

      it('findOne: honours sort and projection', async () => {
        const c = await seeded(people);
        expect(await c.findOne({ team: 'b' }, { sort: { age: 1 }, projection: { name: 1 } })).toEqual({ _id: 'p3', name: 'Cid' });
        expect(await c.findOne({ team: 'zzz' })).toBeNull();
      });

      it('projection: inclusion keeps the named fields and _id unless _id is excluded', async () => {
        const c = await seeded([{ _id: 'a', x: 1, y: 2, z: { p: 1, q: 2 }, arr: [{ p: 1, q: 2 }, { p: 3 }] }]);
        expect(await c.find({}, { projection: { x: 1 } })).toEqual([{ _id: 'a', x: 1 }]);
        expect(await c.find({}, { projection: { x: 1, _id: 0 } })).toEqual([{ x: 1 }]);
        expect(await c.find({}, { projection: { 'z.q': 1 } })).toEqual([{ _id: 'a', z: { q: 2 } }]);
        expect(await c.find({}, { projection: { 'arr.p': 1, _id: 0 } })).toEqual([{ arr: [{ p: 1 }, { p: 3 }] }]);
        expect(await c.find({}, { projection: { _id: 1 } })).toEqual([{ _id: 'a' }]);
        expect(await c.find({}, { projection: { nope: 1 } })).toEqual([{ _id: 'a' }]);
      });

      it('projection: exclusion drops the named fields', async () => {
        const c = await seeded([{ _id: 'a', x: 1, y: 2, z: { p: 1, q: 2 } }]);
        expect(await c.find({}, { projection: { y: 0 } })).toEqual([{ _id: 'a', x: 1, z: { p: 1, q: 2 } }]);
        expect(await c.find({}, { projection: { 'z.p': 0, _id: 0 } })).toEqual([{ x: 1, y: 2, z: { q: 2 } }]);
        expect(await c.find({}, { projection: { _id: 0 } })).toEqual([{ x: 1, y: 2, z: { p: 1, q: 2 } }]);
      });

      it('readonly: documents come back deep-frozen and equal to a copy; a later read sees an update; a session read stays its own', async () => {
        const c = await seeded([
          { _id: 'a', n: 1, tags: ['x'], meta: { deep: { ok: true } }, big: 'drop me' },
          { _id: 'b', n: 2, tags: [], meta: { deep: { ok: false } }, big: 'and me' },
        ]);
        const projection = { big: 0 } as const;
        const copies = await c.find({}, { sort: { n: 1 }, projection });
        const frozen = await c.find({}, { sort: { n: 1 }, projection, readonly: true });
        expect(frozen).toEqual(copies);
        for (const doc of frozen) {
          expect(Object.isFrozen(doc)).toBe(true);
          expect(Object.isFrozen(doc.tags)).toBe(true);
          expect(Object.isFrozen((doc.meta as Doc).deep)).toBe(true);
          expect(() => (doc.tags as string[]).push('y')).toThrow(TypeError);
          expect(() => {
            ((doc.meta as Doc).deep as Doc).ok = 'changed';
          }).toThrow(TypeError);
        }
        const one = await c.findOne({ _id: 'a' }, { readonly: true });
        expect(Object.isFrozen(one)).toBe(true);
        expect(one).toEqual({ _id: 'a', n: 1, tags: ['x'], meta: { deep: { ok: true } }, big: 'drop me' });
        // A copy read afterwards is the caller's own, whatever a readonly read handed out.
        const mine = await c.findOne({ _id: 'a' });
        expect(Object.isFrozen(mine)).toBe(false);
        (mine?.tags as string[]).push('mine');
        expect((await c.findOne({ _id: 'a' }, { readonly: true }))?.tags).toEqual(['x']);

        await c.updateOne({ _id: 'a' }, { $set: { n: 3, 'meta.deep.ok': 'yes' }, $push: { tags: 'z' } });
        const after = await c.find({}, { sort: { n: 1 }, projection, readonly: true });
        expect(after).toEqual([
          { _id: 'b', n: 2, tags: [], meta: { deep: { ok: false } } },
          { _id: 'a', n: 3, tags: ['x', 'z'], meta: { deep: { ok: 'yes' } } },
        ]);
        // Before the update's read, the frozen documents kept what they were read as.
        expect(frozen[0]).toEqual({ _id: 'a', n: 1, tags: ['x'], meta: { deep: { ok: true } } });

        await store.withTransaction(async (session) => {
          await c.updateOne({ _id: 'b' }, { $set: { n: 4 } }, { session });
          const inside = await c.findOne({ _id: 'b' }, { session, readonly: true, projection });
          expect(inside).toEqual({ _id: 'b', n: 4, tags: [], meta: { deep: { ok: false } } });
          expect(Object.isFrozen(inside)).toBe(true);
          expect((await c.findOne({ _id: 'b' }, { readonly: true }))?.n).toBe(2);
        });
        expect((await c.findOne({ _id: 'b' }, { readonly: true }))?.n).toBe(4);
      });

      it('projection: mixing inclusion and exclusion is rejected', async () => {
        const c = await seeded([{ _id: 'a', x: 1, y: 2 }]);
        await expect(c.find({}, { projection: { x: 1, y: 0 } })).rejects.toThrow();
      });
    });

    // ---- update operators --------------------------------------------------------------------

    describe('update operators', () => {
      it('$set: sets top-level and nested fields, creating sub-documents', async () => {
        const c = await seeded([{ _id: 'a', x: 1 }]);
        const res = await c.updateOne({ _id: 'a' }, { $set: { x: 2, 'meta.owner': 'u1', list: [1, 2] } });
        expect(res).toEqual({ matchedCount: 1, modifiedCount: 1 });
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', x: 2, meta: { owner: 'u1' }, list: [1, 2] });
      });

      it('$set: an unchanged value counts as matched but not modified', async () => {
        const c = await seeded([{ _id: 'a', x: 1 }]);
        expect(await c.updateOne({ _id: 'a' }, { $set: { x: 1 } })).toEqual({ matchedCount: 1, modifiedCount: 0 });
        expect(await c.updateOne({ _id: 'zzz' }, { $set: { x: 1 } })).toEqual({ matchedCount: 0, modifiedCount: 0 });
      });

      it('$unset: removes fields, including nested ones', async () => {
        const c = await seeded([{ _id: 'a', x: 1, y: 2, meta: { p: 1, q: 2 } }]);
        await c.updateOne({ _id: 'a' }, { $unset: { y: '', 'meta.p': '', missing: '' } });
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', x: 1, meta: { q: 2 } });
      });

      it('$inc: adds to numbers and creates missing fields', async () => {
        const c = await seeded([{ _id: 'a', n: 5 }]);
        await c.updateOne({ _id: 'a' }, { $inc: { n: -2, 'stats.hits': 1 } });
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', n: 3, stats: { hits: 1 } });
      });

      it('$inc: on a non-number is rejected and changes nothing', async () => {
        const c = await seeded([{ _id: 'a', s: 'text', n: 1 }]);
        await expect(c.updateOne({ _id: 'a' }, { $inc: { s: 1 } })).rejects.toThrow();
        await expect(c.updateOne({ _id: 'a' }, { $inc: { n: 'one' } })).rejects.toThrow();
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', s: 'text', n: 1 });
      });

      it('$push: appends, creates the array, and supports $each, $slice, $position and $sort', async () => {
        const c = await seeded([{ _id: 'a', log: [1, 2] }]);
        await c.updateOne({ _id: 'a' }, { $push: { log: 3, fresh: 'x' } });
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', log: [1, 2, 3], fresh: ['x'] });
        await c.updateOne({ _id: 'a' }, { $push: { log: { $each: [4, 5], $slice: -3 } } });
        expect((await c.findOne({ _id: 'a' }))?.log).toEqual([3, 4, 5]);
        await c.updateOne({ _id: 'a' }, { $push: { log: { $each: [0], $position: 0 } } });
        expect((await c.findOne({ _id: 'a' }))?.log).toEqual([0, 3, 4, 5]);
        await c.updateOne({ _id: 'a' }, { $push: { log: { $each: [2, 9], $sort: -1, $slice: 3 } } });
        expect((await c.findOne({ _id: 'a' }))?.log).toEqual([9, 5, 4]);
        await c.updateOne({ _id: 'a' }, { $push: { events: { $each: [{ at: 2 }, { at: 1 }], $sort: { at: 1 } } } });
        expect((await c.findOne({ _id: 'a' }))?.events).toEqual([{ at: 1 }, { at: 2 }]);
      });

      it('$push: on a field that is not an array is rejected and changes nothing', async () => {
        const c = await seeded([{ _id: 'a', log: 'text' }]);
        await expect(c.updateOne({ _id: 'a' }, { $push: { log: 1 } })).rejects.toThrow();
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', log: 'text' });
      });

      it('$pull: removes equal values and elements matching a condition', async () => {
        const c = await seeded([{ _id: 'a', n: [1, 2, 3, 2, 5], items: [{ k: 'x', q: 1 }, { k: 'y', q: 2 }, { k: 'x', q: 3 }] }]);
        await c.updateOne({ _id: 'a' }, { $pull: { n: 2, items: { k: 'x' } } });
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', n: [1, 3, 5], items: [{ k: 'y', q: 2 }] });
        await c.updateOne({ _id: 'a' }, { $pull: { n: { $gte: 3 } } });
        expect((await c.findOne({ _id: 'a' }))?.n).toEqual([1]);
        expect(await c.updateOne({ _id: 'a' }, { $pull: { n: 42 } })).toEqual({ matchedCount: 1, modifiedCount: 0 });
      });

      it('$addToSet: adds only missing values, also with $each', async () => {
        const c = await seeded([{ _id: 'a', tags: ['x'] }]);
        await c.updateOne({ _id: 'a' }, { $addToSet: { tags: 'x' } });
        expect((await c.findOne({ _id: 'a' }))?.tags).toEqual(['x']);
        await c.updateOne({ _id: 'a' }, { $addToSet: { tags: { $each: ['y', 'x', 'z'] }, created: 'n' } });
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', tags: ['x', 'y', 'z'], created: ['n'] });
      });

      it('$min and $max: keep the smaller or larger value, for numbers and dates', async () => {
        const d1 = new Date('2024-01-01T00:00:00Z');
        const d2 = new Date('2024-06-01T00:00:00Z');
        const c = await seeded([{ _id: 'a', lo: 5, hi: 5, first: d2, last: d1 }]);
        await c.updateOne({ _id: 'a' }, { $min: { lo: 3, first: d1 }, $max: { hi: 9, last: d2, fresh: 1 } });
        const doc = await c.findOne({ _id: 'a' });
        expect(doc?.lo).toBe(3);
        expect(doc?.hi).toBe(9);
        expect(doc?.fresh).toBe(1);
        expect((doc?.first as Date).getTime()).toBe(d1.getTime());
        expect((doc?.last as Date).getTime()).toBe(d2.getTime());
        expect(await c.updateOne({ _id: 'a' }, { $min: { lo: 4 }, $max: { hi: 8 } })).toEqual({ matchedCount: 1, modifiedCount: 0 });
      });

      it('update: replacement documents, empty updates and unknown operators are rejected', async () => {
        const c = await seeded([{ _id: 'a', x: 1 }]);
        await expect(c.updateOne({ _id: 'a' }, { x: 2 })).rejects.toThrow();
        await expect(c.updateMany({ _id: 'a' }, { x: 2 })).rejects.toThrow();
        await expect(c.findOneAndUpdate({ _id: 'a' }, { x: 2 })).rejects.toThrow();
        await expect(c.updateOne({ _id: 'a' }, {})).rejects.toThrow();
        await expect(c.updateOne({ _id: 'a' }, { $bogus: { x: 2 } })).rejects.toThrow();
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', x: 1 });
      });

      it('update: changing _id or updating one path twice is rejected', async () => {
        const c = await seeded([{ _id: 'a', x: 1 }]);
        await expect(c.updateOne({ _id: 'a' }, { $set: { _id: 'b' } })).rejects.toThrow();
        await expect(c.updateOne({ _id: 'a' }, { $set: { x: 5 }, $inc: { x: 1 } })).rejects.toThrow();
        await expect(c.updateOne({ _id: 'a' }, { $set: { y: 1, 'y.z': 2 } })).rejects.toThrow();
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', x: 1 });
      });

      it('updateOne updates one match; updateMany updates all and reports counts', async () => {
        const c = await seeded([
          { _id: 'a', g: 1, v: 0 },
          { _id: 'b', g: 1, v: 0 },
          { _id: 'c', g: 1, v: 7 },
          { _id: 'd', g: 2, v: 0 },
        ]);
        expect(await c.updateOne({ g: 1 }, { $set: { touched: true } })).toEqual({ matchedCount: 1, modifiedCount: 1 });
        expect(await c.countDocuments({ touched: true })).toBe(1);
        expect(await c.updateMany({ g: 1 }, { $set: { v: 7 } })).toEqual({ matchedCount: 3, modifiedCount: 2 });
        expect(sortedIds(await c.find({ v: 7 }))).toEqual(['a', 'b', 'c']);
        expect(await c.updateMany({ g: 9 }, { $set: { v: 1 } })).toEqual({ matchedCount: 0, modifiedCount: 0 });
      });
    });

    // ---- upserts -----------------------------------------------------------------------------

    describe('upserts', () => {
      it('upsert: inserts a document seeded from the filter equalities and reports upsertedId', async () => {
        const c = fresh();
        const createdAt = new Date('2024-02-02T00:00:00Z');
        const res = await c.updateOne(
          { _id: 'u1', workspaceId: 'w1', 'meta.kind': 'k', n: { $gt: 5 }, $and: [{ status: { $eq: 'open' } }] },
          { $set: { x: 1 }, $setOnInsert: { createdAt }, $inc: { count: 1 } },
          { upsert: true },
        );
        expect(res).toEqual({ matchedCount: 0, modifiedCount: 0, upsertedId: 'u1' });
        expect(await c.findOne({ _id: 'u1' })).toEqual({
          _id: 'u1',
          workspaceId: 'w1',
          meta: { kind: 'k' },
          status: 'open',
          x: 1,
          createdAt,
          count: 1,
        });
      });

      it('upsert: $setOnInsert applies only when inserting', async () => {
        const c = fresh();
        const filter = { _id: 'k1' };
        await c.updateOne(filter, { $setOnInsert: { createdBy: 'first' }, $set: { v: 1 } }, { upsert: true });
        const res = await c.updateOne(filter, { $setOnInsert: { createdBy: 'second' }, $set: { v: 2 } }, { upsert: true });
        expect(res).toEqual({ matchedCount: 1, modifiedCount: 1 });
        expect(await c.findOne(filter)).toEqual({ _id: 'k1', createdBy: 'first', v: 2 });
      });

      it('upsert: the _id can come from $setOnInsert when the filter matches on other fields', async () => {
        const c = fresh();
        const res = await c.updateOne({ key: 'alpha' }, { $setOnInsert: { _id: 'id-alpha' }, $set: { v: 1 } }, { upsert: true });
        expect(res.upsertedId).toBe('id-alpha');
        expect(await c.findOne({ key: 'alpha' })).toEqual({ _id: 'id-alpha', key: 'alpha', v: 1 });
        const again = await c.updateOne({ key: 'alpha' }, { $setOnInsert: { _id: 'id-other' }, $set: { v: 2 } }, { upsert: true });
        expect(again).toEqual({ matchedCount: 1, modifiedCount: 1 });
        expect(await c.countDocuments({})).toBe(1);
      });

      it('upsert: 50 concurrent upserts of one _id create one document and lose no update', async () => {
        const c = fresh();
        await Promise.all(
          Array.from({ length: 50 }, () => c.updateOne({ _id: 'counter' }, { $inc: { n: 1 }, $setOnInsert: { kind: 'c' } }, { upsert: true })),
        );
        expect(await c.find({})).toEqual([{ _id: 'counter', n: 50, kind: 'c' }]);
      });

      it('upsert: updateMany inserts one document when nothing matches', async () => {
        const c = fresh();
        const res = await c.updateMany({ _id: 'm1', kind: 'x' }, { $set: { v: 1 } }, { upsert: true });
        expect(res).toEqual({ matchedCount: 0, modifiedCount: 0, upsertedId: 'm1' });
        expect(await c.find({})).toEqual([{ _id: 'm1', kind: 'x', v: 1 }]);
      });
    });

    // ---- deletes -----------------------------------------------------------------------------

    describe('deletes', () => {
      it('deleteOne deletes a single match; deleteMany deletes every match', async () => {
        const c = await seeded([
          { _id: 'a', g: 1 },
          { _id: 'b', g: 1 },
          { _id: 'c', g: 1 },
          { _id: 'd', g: 2 },
        ]);
        expect(await c.deleteOne({ g: 1 })).toEqual({ deletedCount: 1 });
        expect(await c.countDocuments({ g: 1 })).toBe(2);
        expect(await c.deleteMany({ g: 1 })).toEqual({ deletedCount: 2 });
        expect(await c.deleteOne({ g: 1 })).toEqual({ deletedCount: 0 });
        expect(sortedIds(await c.find({}))).toEqual(['d']);
        expect(await c.deleteMany({})).toEqual({ deletedCount: 1 });
      });

      it('findOneAndDelete: returns the removed document, honouring sort and projection', async () => {
        const c = await seeded([
          { _id: 'a', p: 2, x: 1 },
          { _id: 'b', p: 1, x: 2 },
          { _id: 'c', p: 3, x: 3 },
        ]);
        expect(await c.findOneAndDelete({}, { sort: { p: 1 } })).toEqual({ _id: 'b', p: 1, x: 2 });
        expect(await c.findOneAndDelete({}, { sort: { p: -1 }, projection: { x: 1, _id: 0 } })).toEqual({ x: 3 });
        expect(await c.findOneAndDelete({ _id: 'zzz' })).toBeNull();
        expect(sortedIds(await c.find({}))).toEqual(['a']);
      });
    });

    describe('atomic removal', () => {
      it('findOneAndDelete: 50 concurrent removals of one document, exactly one gets it', async () => {
        const c = await seeded([{ _id: 'job', payload: 1 }]);
        const results = await Promise.all(Array.from({ length: 50 }, () => c.findOneAndDelete({ _id: 'job' })));
        expect(results.filter((r) => r !== null)).toEqual([{ _id: 'job', payload: 1 }]);
        expect(await c.countDocuments({})).toBe(0);
      });
    });

    // ---- findOneAndUpdate ----------------------------------------------------------------------

    describe('findOneAndUpdate', () => {
      it('findOneAndUpdate: returns the document after the update by default, before on request', async () => {
        const c = await seeded([{ _id: 'a', n: 1 }]);
        expect(await c.findOneAndUpdate({ _id: 'a' }, { $inc: { n: 1 } })).toEqual({ _id: 'a', n: 2 });
        expect(await c.findOneAndUpdate({ _id: 'a' }, { $inc: { n: 1 } }, { returnDocument: 'before' })).toEqual({ _id: 'a', n: 2 });
        expect(await c.findOneAndUpdate({ _id: 'a' }, { $inc: { n: 1 } }, { returnDocument: 'after' })).toEqual({ _id: 'a', n: 4 });
      });

      it('findOneAndUpdate: returns null and writes nothing when nothing matches', async () => {
        const c = await seeded([{ _id: 'a', n: 1 }]);
        expect(await c.findOneAndUpdate({ _id: 'a', n: 2 }, { $set: { n: 3 } })).toBeNull();
        expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a', n: 1 });
      });

      it('findOneAndUpdate: with upsert returns the inserted document (after) or null (before)', async () => {
        const c = fresh();
        expect(await c.findOneAndUpdate({ _id: 'u', k: 1 }, { $set: { v: 1 } }, { upsert: true })).toEqual({ _id: 'u', k: 1, v: 1 });
        expect(await c.findOneAndUpdate({ _id: 'w' }, { $set: { v: 1 } }, { upsert: true, returnDocument: 'before' })).toBeNull();
        expect(await c.findOne({ _id: 'w' })).toEqual({ _id: 'w', v: 1 });
      });

      it('findOneAndUpdate: sort picks the document and projection shapes the result', async () => {
        const c = await seeded([
          { _id: 'a', rank: 2, status: 'ready', title: 'A' },
          { _id: 'b', rank: 1, status: 'ready', title: 'B' },
          { _id: 'c', rank: 0, status: 'done', title: 'C' },
        ]);
        const got = await c.findOneAndUpdate(
          { status: 'ready' },
          { $set: { status: 'taken' } },
          { sort: { rank: 1 }, projection: { status: 1, _id: 0 } },
        );
        expect(got).toEqual({ status: 'taken' });
        expect((await c.findOne({ _id: 'b' }))?.status).toBe('taken');
        expect((await c.findOne({ _id: 'a' }))?.status).toBe('ready');
      });

      it('findOneAndUpdate: 50 concurrent conditional updates of one document, exactly one wins', async () => {
        const c = await seeded([{ _id: 'task', status: 'ready' }]);
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            c.findOneAndUpdate({ _id: 'task', status: 'ready' }, { $set: { status: 'claimed', by: `agent-${i}` } }),
          ),
        );
        const winners = results.filter((r) => r !== null);
        expect(winners).toHaveLength(1);
        const doc = await c.findOne({ _id: 'task' });
        expect(doc?.status).toBe('claimed');
        expect(doc?.by).toBe(winners[0]?.by);
      });
    });

    // ---- indexes -----------------------------------------------------------------------------

    describe('indexes', () => {
      it('createIndexes: creating the same index again is a no-op; an empty list is accepted', async () => {
        const c = fresh();
        const spec = { name: 'by_key', keys: { key: 1 as const }, unique: true };
        await c.createIndexes([spec]);
        await c.createIndexes([spec]);
        await c.createIndexes([]);
        await c.insertOne({ _id: 'a', key: 'k' });
        await rejectsDuplicate(c.insertOne({ _id: 'b', key: 'k' }), 'by_key');
      });

      it('createIndexes: reusing a name for other keys is rejected', async () => {
        const c = fresh();
        await c.createIndexes([{ name: 'idx', keys: { a: 1 } }]);
        await expect(c.createIndexes([{ name: 'idx', keys: { b: 1 } }])).rejects.toThrow();
      });

      it('dropIndexes: a dropped index\'s rules stop (its name may then name other keys); unknown names and an empty list are ignored', async () => {
        const c = fresh();
        await c.createIndexes([
          { name: 'email_unique', keys: { email: 1 }, unique: true },
          { name: 'by_n', keys: { n: 1 } },
        ]);
        await c.insertMany([
          { _id: 'a', email: 'x@example.com', n: 2 },
          { _id: 'b', email: 'y@example.com', n: 1 },
        ]);
        await rejectsDuplicate(c.insertOne({ _id: 'c', email: 'x@example.com' }), 'email_unique');
        await c.dropIndexes(['email_unique', 'no_such_index']);
        await c.dropIndexes(['email_unique']);
        await c.dropIndexes([]);
        await c.insertOne({ _id: 'c', email: 'x@example.com', n: 3 });
        // The other index still serves, and its name's twin can be created with other keys.
        expect((await c.find({ n: { $gte: 2 } }, { sort: { n: 1 } })).map((d) => d._id)).toEqual(['a', 'c']);
        await c.createIndexes([{ name: 'email_unique', keys: { n: 1, email: 1 } }]);
        expect((await c.find({ email: 'x@example.com' }, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['a', 'c']);
        await c.dropIndexes(['by_n', 'email_unique']);
        expect(await c.countDocuments({ n: { $gt: 0 } })).toBe(3);
      });

      it('unique index: a second document with the same key is rejected with the index name', async () => {
        const c = fresh();
        await c.createIndexes([{ name: 'email_unique', keys: { email: 1 }, unique: true }]);
        await c.insertOne({ _id: 'a', email: 'x@example.com' });
        await rejectsDuplicate(c.insertOne({ _id: 'b', email: 'x@example.com' }), 'email_unique');
        await c.insertOne({ _id: 'c', email: 'y@example.com' });
        expect(sortedIds(await c.find({}))).toEqual(['a', 'c']);
      });

      it('unique index: an update that would duplicate a key is rejected and changes nothing', async () => {
        const c = fresh();
        await c.createIndexes([{ name: 'slug_unique', keys: { slug: 1 }, unique: true }]);
        await c.insertMany([
          { _id: 'a', slug: 'one', v: 1 },
          { _id: 'b', slug: 'two', v: 1 },
        ]);
        await rejectsDuplicate(c.updateOne({ _id: 'b' }, { $set: { slug: 'one', v: 2 } }), 'slug_unique');
        await rejectsDuplicate(c.findOneAndUpdate({ _id: 'b' }, { $set: { slug: 'one', v: 3 } }), 'slug_unique');
        expect(await c.findOne({ _id: 'b' })).toEqual({ _id: 'b', slug: 'two', v: 1 });
      });

      it('unique index: an upsert that would duplicate a key inserts nothing', async () => {
        const c = fresh();
        await c.createIndexes([{ name: 'slug_unique', keys: { slug: 1 }, unique: true }]);
        await c.insertOne({ _id: 'a', slug: 'one' });
        await rejectsDuplicate(c.updateOne({ _id: 'b' }, { $set: { slug: 'one' } }, { upsert: true }), 'slug_unique');
        expect(await c.findOne({ _id: 'b' })).toBeNull();
        expect(await c.countDocuments({})).toBe(1);
      });

      it('unique index: creating one over duplicate data is refused with the index name', async () => {
        const c = await seeded([
          { _id: 'a', k: 1 },
          { _id: 'b', k: 1 },
        ]);
        await rejectsDuplicate(c.createIndexes([{ name: 'k_unique', keys: { k: 1 }, unique: true }]), 'k_unique');
        await c.insertOne({ _id: 'c', k: 1 });
        expect(await c.countDocuments({ k: 1 })).toBe(3);
      });

      it('unique compound index: only the whole key combination must be unique', async () => {
        const c = fresh();
        await c.createIndexes([{ name: 'ws_slug', keys: { workspaceId: 1, slug: 1 }, unique: true }]);
        await c.insertMany([
          { _id: 'a', workspaceId: 'w1', slug: 's' },
          { _id: 'b', workspaceId: 'w2', slug: 's' },
          { _id: 'c', workspaceId: 'w1', slug: 't' },
        ]);
        await rejectsDuplicate(c.insertOne({ _id: 'd', workspaceId: 'w2', slug: 's' }), 'ws_slug');
      });

      it('partial unique index: only documents matching its filter are indexed and checked', async () => {
        const c = fresh();
        await c.createIndexes([
          { name: 'one_active_claim', keys: { taskId: 1 }, unique: true, partialFilterExpression: { status: 'active' } },
        ]);
        await c.insertMany([
          { _id: 'c1', taskId: 't1', status: 'released' },
          { _id: 'c2', taskId: 't1', status: 'released' },
          { _id: 'c3', taskId: 't1', status: 'active' },
          { _id: 'c4', taskId: 't2', status: 'active' },
        ]);
        await rejectsDuplicate(c.insertOne({ _id: 'c5', taskId: 't1', status: 'active' }), 'one_active_claim');
        // Moving a released claim back to active would make two active claims: refused, unchanged.
        await rejectsDuplicate(c.updateOne({ _id: 'c1' }, { $set: { status: 'active' } }), 'one_active_claim');
        expect((await c.findOne({ _id: 'c1' }))?.status).toBe('released');
        // Once the active claim is released, another may become active.
        await c.updateOne({ _id: 'c3' }, { $set: { status: 'released' } });
        await c.updateOne({ _id: 'c1' }, { $set: { status: 'active' } });
        expect(sortedIds(await c.find({ taskId: 't1', status: 'active' }))).toEqual(['c1']);
      });

      it('partial unique index: 50 concurrent inserts of an active claim for one task, exactly one succeeds', async () => {
        const c = fresh();
        await c.createIndexes([
          { name: 'one_active_claim', keys: { taskId: 1 }, unique: true, partialFilterExpression: { status: 'active' } },
        ]);
        const outcomes = await Promise.allSettled(
          Array.from({ length: 50 }, (_, i) => c.insertOne({ _id: `claim-${i}`, taskId: 't1', status: 'active' })),
        );
        const ok = outcomes.filter((o) => o.status === 'fulfilled');
        const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
        expect(ok).toHaveLength(1);
        expect(failed.every((f) => isDuplicateKeyError(f.reason, 'one_active_claim'))).toBe(true);
        expect(await c.countDocuments({ taskId: 't1', status: 'active' })).toBe(1);
      });

      it('TTL index: creation with expireAfterSeconds is accepted and live documents stay readable', async () => {
        const c = fresh();
        await c.createIndexes([{ name: 'expires', keys: { expiresAt: 1 }, expireAfterSeconds: 0 }]);
        await c.createIndexes([{ name: 'expires', keys: { expiresAt: 1 }, expireAfterSeconds: 0 }]);
        await c.insertOne({ _id: 'live', expiresAt: new Date(Date.now() + 3_600_000) });
        expect(await c.findOne({ _id: 'live' })).not.toBeNull();
      });

      it('indexes: queries answer the same with and without an index', async () => {
        const docs: Doc[] = Array.from({ length: 60 }, (_, i) => ({
          _id: `d${String(i).padStart(2, '0')}`,
          ws: `w${i % 3}`,
          status: ['open', 'done', 'blocked'][i % 4 === 0 ? 2 : i % 2] as string,
          rank: (i * 7) % 13,
          labels: i % 5 === 0 ? ['x', 'y'] : ['y'],
        }));
        const plain = await seeded(docs, 'plain');
        const indexed = await seeded(docs, 'indexed');
        await indexed.createIndexes([
          { name: 'ws_status_rank', keys: { ws: 1, status: 1, rank: -1 } },
          { name: 'labels', keys: { labels: 1 } },
          { name: 'rank', keys: { rank: 1 } },
        ]);
        const queries: [Record<string, unknown>, Record<string, unknown>][] = [
          [{ ws: 'w1' }, { sort: { rank: -1, _id: 1 } }],
          [{ ws: 'w1', status: 'open' }, { sort: { rank: -1, _id: -1 }, limit: 3 }],
          [{ ws: { $in: ['w0', 'w2'] }, status: { $in: ['open', 'blocked'] } }, { sort: { rank: 1, _id: 1 }, skip: 2, limit: 5 }],
          [{ ws: 'w2', status: 'done', rank: { $gte: 3, $lt: 9 } }, { sort: { rank: -1, _id: -1 } }],
          [{ labels: 'x' }, { sort: { _id: -1 } }],
          [{ rank: { $gt: 10 } }, { sort: { rank: 1, _id: 1 }, limit: 4 }],
          [{}, { sort: { rank: 1, _id: -1 }, skip: 5, limit: 7 }],
        ];
        for (const [filter, options] of queries) {
          expect(ids(await indexed.find(filter, options)), JSON.stringify([filter, options])).toEqual(ids(await plain.find(filter, options)));
          expect(await indexed.countDocuments(filter)).toBe(await plain.countDocuments(filter));
        }
      });
    });

    // ---- transactions ------------------------------------------------------------------------

    describe('transactions', () => {
      it('transaction: writes become visible to others only at commit, all together', async () => {
        const tasks = await seeded([{ _id: 't1', status: 'ready' }], 'tasks');
        const events = await seeded([{ _id: 'seed' }], 'events');
        const result = await store.withTransaction(async (session) => {
          await tasks.updateOne({ _id: 't1' }, { $set: { status: 'done' } }, { session });
          await events.insertOne({ _id: 'e1', type: 'task.done' }, { session });
          expect((await tasks.findOne({ _id: 't1' }))?.status).toBe('ready');
          expect(await events.findOne({ _id: 'e1' })).toBeNull();
          return 'committed';
        });
        expect(result).toBe('committed');
        expect((await tasks.findOne({ _id: 't1' }))?.status).toBe('done');
        expect(await events.findOne({ _id: 'e1' })).toEqual({ _id: 'e1', type: 'task.done' });
      });

      it('transaction: reads with the session see the transaction\'s own writes', async () => {
        const c = await seeded([
          { _id: 'a', n: 1 },
          { _id: 'b', n: 2 },
          { _id: 'c', n: 3 },
        ]);
        await store.withTransaction(async (session) => {
          await c.insertOne({ _id: 'd', n: 0 }, { session });
          await c.updateOne({ _id: 'c' }, { $set: { n: -1 } }, { session });
          await c.deleteOne({ _id: 'a' }, { session });
          expect(ids(await c.find({}, { session, sort: { n: 1 } }))).toEqual(['c', 'd', 'b']);
          expect(ids(await c.find({ n: { $gte: 0 } }, { session, sort: { n: -1 }, limit: 1 }))).toEqual(['b']);
          expect(await c.countDocuments({}, { session })).toBe(3);
          expect(await c.findOne({ _id: 'a' }, { session })).toBeNull();
          expect(await c.findOne({ _id: 'd' }, { session })).toEqual({ _id: 'd', n: 0 });
          expect(await c.findOneAndUpdate({ _id: 'd' }, { $inc: { n: 5 } }, { session })).toEqual({ _id: 'd', n: 5 });
          expect(await c.countDocuments({})).toBe(3);
          expect(await c.findOne({ _id: 'd' })).toBeNull();
        });
        expect(ids(await c.find({}, { sort: { n: 1 } }))).toEqual(['c', 'b', 'd']);
      });

      it('transaction: when fn throws nothing is applied and the error is rethrown', async () => {
        const c = await seeded([{ _id: 'a', n: 1 }]);
        const boom = new Error('boom');
        await expect(
          store.withTransaction(async (session) => {
            await c.updateOne({ _id: 'a' }, { $set: { n: 2 } }, { session });
            await c.insertOne({ _id: 'b' }, { session });
            await c.deleteOne({ _id: 'a' }, { session });
            throw boom;
          }),
        ).rejects.toBe(boom);
        expect(await c.find({})).toEqual([{ _id: 'a', n: 1 }]);
      });

      it('transaction: onCommitted is called once, after the commit (its writes visible) and before the promise resolves; never for a failed transaction', async () => {
        const c = await seeded([{ _id: 'counter', n: 1 }]);
        const seen: string[] = [];
        let visible: unknown;
        const done = store
          .withTransaction(
            async (session) => {
              await c.updateOne({ _id: 'counter' }, { $inc: { n: 1 } }, { session });
              seen.push('fn');
            },
            {
              onCommitted: () => {
                seen.push('committed');
                // The next transaction can start here and read what this one wrote.
                visible = store.withTransaction(async (session) => (await c.findOne({ _id: 'counter' }, { session }))?.n);
              },
            },
          )
          .then(() => seen.push('resolved'));
        await done;
        expect(seen).toEqual(['fn', 'committed', 'resolved']);
        expect(await visible).toBe(2);
        const failed: string[] = [];
        await expect(
          store.withTransaction(
            async (session) => {
              await c.updateOne({ _id: 'counter' }, { $inc: { n: 1 } }, { session });
              throw new Error('boom');
            },
            { onCommitted: () => failed.push('committed') },
          ),
        ).rejects.toThrow('boom');
        await rejectsDuplicate(
          store.withTransaction(async (session) => c.insertOne({ _id: 'counter' }, { session }), { onCommitted: () => failed.push('committed') }),
          '_id_',
        );
        expect(failed).toEqual([]);
        expect((await c.findOne({ _id: 'counter' }))?.n).toBe(2);
        // A callback that throws changes nothing about the commit: the transaction resolves, and
        // so does a write committed with it.
        const beside = c.insertOne({ _id: 'beside' });
        await expect(
          store.withTransaction(async (session) => c.updateOne({ _id: 'counter' }, { $inc: { n: 1 } }, { session }), {
            onCommitted: () => {
              throw new Error('callback failed');
            },
          }),
        ).resolves.toMatchObject({ modifiedCount: 1 });
        await beside;
        expect((await c.findOne({ _id: 'counter' }))?.n).toBe(3);
        // The same for a transaction that wrote nothing.
        await expect(
          store.withTransaction(async (session) => c.findOne({ _id: 'counter' }, { session }), {
            onCommitted: () => {
              throw new Error('callback failed');
            },
          }),
        ).resolves.toMatchObject({ n: 3 });
      });

      it('transaction: a duplicate key inside rejects with DuplicateKeyError and applies nothing', async () => {
        const c = await seeded([{ _id: 'a' }]);
        const other = await seeded([{ _id: 'seed' }]);
        await rejectsDuplicate(
          store.withTransaction(async (session) => {
            await other.insertOne({ _id: 'x' }, { session });
            await c.insertOne({ _id: 'a' }, { session });
          }),
          '_id_',
        );
        expect(await other.findOne({ _id: 'x' })).toBeNull();
      });

      it('transaction: an id someone else inserts after the transaction inserted it makes fn run again, and the retry meets the duplicate', async () => {
        const c = await seeded([{ _id: 'seed' }]);
        const log = await seeded([{ _id: 'seed' }], 'log');
        let attempts = 0;
        await rejectsDuplicate(
          store.withTransaction(async (session) => {
            attempts++;
            await log.insertOne({ _id: `entry-${attempts}` }, { session });
            await c.insertOne({ _id: 'x', by: 'transaction' }, { session });
            if (attempts === 1) await c.insertOne({ _id: 'x', by: 'other' });
          }),
          '_id_',
        );
        expect(attempts).toBe(2);
        expect(await c.findOne({ _id: 'x' })).toMatchObject({ by: 'other' });
        expect(await log.countDocuments({ _id: { $ne: 'seed' } })).toBe(0);
      });

      it('transaction: concurrent transactions inserting one new id, exactly one commits', async () => {
        const c = await seeded([{ _id: 'seed' }]);
        const outcomes = await Promise.allSettled(
          Array.from({ length: 8 }, (_, i) =>
            store.withTransaction(async (session) => {
              if ((await c.findOne({ _id: 'x' }, { session })) !== null) return 'taken';
              await c.insertOne({ _id: 'x', by: i }, { session });
              return 'inserted';
            }),
          ),
        );
        const inserted = outcomes.flatMap((o, i) => (o.status === 'fulfilled' && o.value === 'inserted' ? [i] : []));
        expect(inserted).toHaveLength(1);
        for (const o of outcomes) if (o.status === 'rejected') expect(isDuplicateKeyError(o.reason, '_id_')).toBe(true);
        expect(await c.findOne({ _id: 'x' })).toMatchObject({ by: inserted[0] });
      });

      it('transaction: a document changed by someone else after the transaction read it makes fn run again on fresh data', async () => {
        const c = await seeded([{ _id: 'counter', n: 10 }]);
        let attempts = 0;
        await store.withTransaction(async (session) => {
          attempts++;
          const doc = await c.findOne({ _id: 'counter' }, { session });
          if (attempts === 1) await c.updateOne({ _id: 'counter' }, { $inc: { n: 5 } });
          await c.updateOne({ _id: 'counter' }, { $set: { n: (doc?.n as number) * 2 } }, { session });
        });
        expect(attempts).toBe(2);
        expect((await c.findOne({ _id: 'counter' }))?.n).toBe(30);
      });

      it('transaction: a stale read that leads to an update changing nothing still makes fn run again', async () => {
        const c = await seeded([{ _id: 'counter', n: 0 }]);
        let attempts = 0;
        await store.withTransaction(async (session) => {
          attempts++;
          const doc = await c.findOne({ _id: 'counter' }, { session });
          // Someone else commits the very value this transaction is about to compute from its stale read.
          if (attempts === 1) await c.updateOne({ _id: 'counter' }, { $set: { n: 1 } });
          await c.updateOne({ _id: 'counter' }, { $set: { n: (doc?.n as number) + 1 } }, { session });
        });
        expect(attempts).toBe(2);
        expect((await c.findOne({ _id: 'counter' }))?.n).toBe(2);
      });

      it('transaction: concurrent read-modify-write transactions lose no update', async () => {
        const c = await seeded([{ _id: 'counter', n: 0 }]);
        const workers = 10;
        await Promise.all(
          Array.from({ length: workers }, () =>
            store.withTransaction(async (session) => {
              const doc = await c.findOne({ _id: 'counter' }, { session });
              await c.updateOne({ _id: 'counter' }, { $set: { n: (doc?.n as number) + 1 } }, { session });
            }),
          ),
        );
        expect((await c.findOne({ _id: 'counter' }))?.n).toBe(workers);
      });

      it('transaction: concurrent transactions claiming one task, exactly one claim commits', async () => {
        const claims = fresh('claims');
        await claims.createIndexes([
          { name: 'one_active_claim', keys: { taskId: 1 }, unique: true, partialFilterExpression: { status: 'active' } },
        ]);
        const tasks = await seeded([{ _id: 't1', status: 'ready' }], 'tasks');
        const outcomes = await Promise.allSettled(
          Array.from({ length: 8 }, (_, i) =>
            store.withTransaction(async (session) => {
              const task = await tasks.findOne({ _id: 't1', status: 'ready' }, { session });
              if (!task) return 'not-ready';
              await claims.insertOne({ _id: `claim-${i}`, taskId: 't1', status: 'active' }, { session });
              await tasks.updateOne({ _id: 't1' }, { $set: { status: 'in-progress', claim: `claim-${i}` } }, { session });
              return 'claimed';
            }),
          ),
        );
        const claimed = outcomes.filter((o) => o.status === 'fulfilled' && o.value === 'claimed');
        expect(claimed).toHaveLength(1);
        for (const o of outcomes) {
          if (o.status === 'rejected') expect(isDuplicateKeyError(o.reason, 'one_active_claim')).toBe(true);
        }
        const active = await claims.find({ taskId: 't1', status: 'active' });
        expect(active).toHaveLength(1);
        expect((await tasks.findOne({ _id: 't1' }))?.claim).toBe(active[0]?._id);
      });

      it('transaction: a session cannot be used once its transaction has ended', async () => {
        const c = await seeded([{ _id: 'a' }]);
        let leaked: StoreSession | undefined;
        await store.withTransaction(async (session) => {
          leaked = session;
          await c.findOne({ _id: 'a' }, { session });
        });
        await expect(c.insertOne({ _id: 'b' }, { session: leaked as StoreSession })).rejects.toThrow();
        expect(await c.findOne({ _id: 'b' })).toBeNull();
      });
    });
  });
}
