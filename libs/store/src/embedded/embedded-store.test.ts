import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { describeStoreContract } from '../contract/store-contract.js';
import { DuplicateKeyError, TransactionConflictError, type StoredDocument } from '../port.js';
import { MAX_TRANSACTION_ATTEMPTS } from '../retry-policy.js';
import { createEmbeddedStore, type EmbeddedDocumentStore } from './embedded-store.js';

const tempDirs: string[] = [];

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planning-store-'));
  tempDirs.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

describeStoreContract('embedded, in memory', async () => createEmbeddedStore());
describeStoreContract('embedded, with a data directory', async () => createEmbeddedStore({ dataDir: tempDir() }));

async function withStore<R>(store: EmbeddedDocumentStore, fn: (store: EmbeddedDocumentStore) => Promise<R>): Promise<R> {
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

describe('embedded store: persistence', () => {
  it('persistence: documents, indexes, updates, deletes and committed transactions survive close and reopen', async () => {
    const dir = tempDir();
    const at = new Date('2024-03-04T05:06:07.089Z');
    await withStore(createEmbeddedStore({ dataDir: dir }), async (store) => {
      const c = store.collection('things');
      await c.createIndexes([
        { name: 'slug_unique', keys: { slug: 1 }, unique: true },
        { name: 'active_owner', keys: { owner: 1 }, unique: true, partialFilterExpression: { active: true } },
      ]);
      await c.insertMany([
        { _id: 'a', slug: 'one', at, nested: { list: [at] }, n: 1 },
        { _id: 'b', slug: 'two', n: 2, owner: 'u1', active: true },
        { _id: 'c', slug: 'three', n: 3 },
      ]);
      await c.updateOne({ _id: 'a' }, { $inc: { n: 10 }, $push: { log: 'x' } });
      await c.deleteOne({ _id: 'c' });
      await store.withTransaction(async (session) => {
        await c.insertOne({ _id: 'd', slug: 'four', n: 4 }, { session });
        await c.updateOne({ _id: 'b' }, { $set: { n: 20 } }, { session });
      });
      await store
        .withTransaction(async (session) => {
          await c.insertOne({ _id: 'never', slug: 'never' }, { session });
          throw new Error('abort');
        })
        .catch(() => undefined);
    });
    await withStore(createEmbeddedStore({ dataDir: dir }), async (store) => {
      const c = store.collection('things');
      const docs = await c.find({}, { sort: { _id: 1 } });
      expect(docs.map((d) => d._id)).toEqual(['a', 'b', 'd']);
      expect(docs[0]).toEqual({ _id: 'a', slug: 'one', at, nested: { list: [at] }, n: 11, log: ['x'] });
      expect(docs[0]?.at).toBeInstanceOf(Date);
      expect(docs[1]?.n).toBe(20);
      await expect(c.insertOne({ _id: 'e', slug: 'one' })).rejects.toMatchObject({ index: 'slug_unique' });
      await expect(c.insertOne({ _id: 'f', slug: 'five', owner: 'u1', active: true })).rejects.toMatchObject({ index: 'active_owner' });
      expect((await c.explain({ slug: 'two' })).index).toBe('slug_unique');
      // Later changes land in a fresh journal over the compacted snapshot.
      await c.insertOne({ _id: 'g', slug: 'six' });
    });
    await withStore(createEmbeddedStore({ dataDir: dir }), async (store) => {
      expect((await store.collection('things').find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['a', 'b', 'd', 'g']);
    });
  });

  it('persistence: separate store names in one directory keep separate data', async () => {
    const dir = tempDir();
    await withStore(createEmbeddedStore({ dataDir: dir, name: 'one' }), (s) => s.collection('c').insertOne({ _id: 'x' }));
    await withStore(createEmbeddedStore({ dataDir: dir, name: 'two' }), async (s) => {
      expect(await s.collection('c').countDocuments({})).toBe(0);
    });
    await withStore(createEmbeddedStore({ dataDir: dir, name: 'one' }), async (s) => {
      expect(await s.collection('c').countDocuments({})).toBe(1);
    });
  });

  it('persistence: a torn last journal line is ignored and cleaned up', async () => {
    const dir = tempDir();
    await withStore(createEmbeddedStore({ dataDir: dir }), async (store) => {
      await store.collection('c').insertMany([{ _id: 'a' }, { _id: 'b' }]);
    });
    // A reopen compacts; write a journal line after that, then simulate a crash mid-way through the next one.
    await withStore(createEmbeddedStore({ dataDir: dir }), (store) => store.collection('c').insertOne({ _id: 'c' }));
    fs.appendFileSync(path.join(dir, 'store.journal'), '{"s":999,"o":[["p","c",{"_id":"torn"');
    await withStore(createEmbeddedStore({ dataDir: dir }), async (store) => {
      const c = store.collection('c');
      expect((await c.find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['a', 'b', 'c']);
      await c.insertOne({ _id: 'd' });
    });
    await withStore(createEmbeddedStore({ dataDir: dir }), async (store) => {
      expect((await store.collection('c').find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['a', 'b', 'c', 'd']);
    });
  });

  it('persistence: a corrupt line inside the journal is refused, not skipped', async () => {
    const dir = tempDir();
    await withStore(createEmbeddedStore({ dataDir: dir }), (store) => store.collection('c').insertOne({ _id: 'a' }));
    fs.writeFileSync(path.join(dir, 'store.journal'), 'garbage\n{"s":5,"o":[["p","c",{"_id":"b"}]]}\n');
    expect(() => createEmbeddedStore({ dataDir: dir })).toThrow(/corrupt at line 1/);
  });

  it('persistence: one process cannot open the same files twice', async () => {
    const dir = tempDir();
    await withStore(createEmbeddedStore({ dataDir: dir }), async () => {
      expect(() => createEmbeddedStore({ dataDir: dir })).toThrow(/already open/);
    });
    await createEmbeddedStore({ dataDir: dir }).close();
  });

  it('persistence: the journal is folded into the snapshot once it grows past the threshold', async () => {
    const dir = tempDir();
    const journal = path.join(dir, 'store.journal');
    await withStore(createEmbeddedStore({ dataDir: dir, compactAfterBytes: 4096 }), async (store) => {
      const c = store.collection('c');
      for (let i = 0; i < 200; i++) await c.insertOne({ _id: `d${i}`, payload: 'x'.repeat(50), i });
      expect(fs.statSync(journal).size).toBeLessThan(4096);
      expect(fs.existsSync(path.join(dir, 'store.snapshot'))).toBe(true);
      await c.deleteMany({ i: { $gte: 100 } });
    });
    await withStore(createEmbeddedStore({ dataDir: dir }), async (store) => {
      expect(await store.collection('c').countDocuments({})).toBe(100);
    });
  });

  it('persistence: a process killed right after its operations resolved loses none of them', async () => {
    const dir = tempDir();
    const script = path.join(dir, 'child.mts');
    const storeModule = path.join(path.dirname(fileURLToPath(import.meta.url)), 'embedded-store.ts');
    fs.writeFileSync(
      script,
      `import { createEmbeddedStore } from ${JSON.stringify(storeModule)};
const store = createEmbeddedStore({ dataDir: process.argv[2] });
const c = store.collection('crash');
await c.createIndexes([{ name: 'k_unique', keys: { k: 1 }, unique: true }]);
for (let i = 0; i < 50; i++) await c.insertOne({ _id: 'd' + i, k: i, at: new Date(i * 1000) });
await c.updateOne({ _id: 'd0' }, { $set: { touched: true } });
await store.withTransaction(async (session) => { await c.deleteOne({ _id: 'd1' }, { session }); });
process.stdout.write('ready\\n');
setInterval(() => {}, 1000);
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script, path.join(dir, 'data')], {
      cwd: path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('ready')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`child exited early (${code}): ${stderr}`)));
    });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    await withStore(createEmbeddedStore({ dataDir: path.join(dir, 'data') }), async (store) => {
      const c = store.collection('crash');
      expect(await c.countDocuments({})).toBe(49);
      expect(await c.findOne({ _id: 'd1' })).toBeNull();
      expect((await c.findOne({ _id: 'd0' }))?.touched).toBe(true);
      expect((await c.findOne({ _id: 'd49' }))?.at).toEqual(new Date(49_000));
      await expect(c.insertOne({ _id: 'x', k: 7 })).rejects.toMatchObject({ index: 'k_unique' });
    });
  });
});

interface Task extends StoredDocument {
  workspaceId: string;
  status: string;
  priority: number;
  updatedAt: Date;
  labels: string[];
  title: string;
}

describe('embedded store: query planner', () => {
  const statuses = ['open', 'ready', 'in-progress', 'blocked', 'done'];
  const total = 20_000;
  const t0 = Date.UTC(2024, 0, 1);
  const tasks: Task[] = Array.from({ length: total }, (_, i) => ({
    _id: `task-${String(i).padStart(6, '0')}`,
    workspaceId: `w${i % 4}`,
    status: statuses[(i * 7) % 5] as string,
    priority: (i * 13) % 5,
    updatedAt: new Date(t0 + ((i * 7919) % total) * 60_000),
    labels: i % 10 === 0 ? ['launch-blocker', 'bug'] : ['bug'],
    title: `Task ${i}`,
  }));

  async function openTasks(): Promise<{ store: EmbeddedDocumentStore; c: ReturnType<EmbeddedDocumentStore['collection']> }> {
    const store = createEmbeddedStore();
    const c = store.collection('tasks');
    await c.createIndexes([
      { name: 'ws_status_updated', keys: { workspaceId: 1, status: 1, updatedAt: -1 } },
      { name: 'ws_priority', keys: { workspaceId: 1, priority: 1 } },
      { name: 'labels', keys: { labels: 1 } },
      { name: 'open_by_ws', keys: { workspaceId: 1 }, partialFilterExpression: { status: 'open' } },
    ]);
    await c.insertMany(tasks);
    return { store, c };
  }

  const expected = (pred: (t: Task) => boolean, cmp: (a: Task, b: Task) => number, limit: number): string[] =>
    tasks
      .filter(pred)
      .sort(cmp)
      .slice(0, limit)
      .map((t) => t._id);
  const byUpdatedDesc = (a: Task, b: Task): number => b.updatedAt.getTime() - a.updatedAt.getTime() || (a._id < b._id ? 1 : -1);

  it('planner: equality prefix plus sort walks the index in order and stops at the limit', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const filter = { workspaceId: 'w1', status: 'open' };
      const options = { sort: { updatedAt: -1 as const }, limit: 20 };
      const plan = await c.explain(filter, options);
      expect(plan).toMatchObject({ plan: 'IXSCAN', index: 'ws_status_updated', inMemorySort: false, nReturned: 20 });
      // The index decides this filter exactly: 20 entries read, no document re-checked.
      expect(plan).toMatchObject({ keysExamined: 20, docsExamined: 0, indexOnly: true });
      const got = (await c.find(filter, options)).map((d) => d._id);
      expect(got).toEqual(expected((t) => t.workspaceId === 'w1' && t.status === 'open', byUpdatedDesc, 20));
    });
  });

  it('planner: an $in on a prefix key merges the runs in sort order', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const filter = { workspaceId: 'w2', status: { $in: ['blocked', 'open', 'ready'] } };
      const options = { sort: { updatedAt: -1 as const }, skip: 5, limit: 10 };
      const plan = await c.explain(filter, options);
      expect(plan).toMatchObject({ plan: 'IXSCAN', index: 'ws_status_updated', inMemorySort: false });
      expect(plan.keysExamined).toBe(15);
      const got = (await c.find(filter, options)).map((d) => d._id);
      const want = expected((t) => t.workspaceId === 'w2' && ['blocked', 'open', 'ready'].includes(t.status), byUpdatedDesc, 15).slice(5);
      expect(got).toEqual(want);
    });
  });

  it('planner: a range on the key after the equality prefix narrows the scan', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const since = new Date(t0 + 19_000 * 60_000);
      const filter = { workspaceId: 'w3', status: 'done', updatedAt: { $gte: since } };
      const matches = tasks.filter((t) => t.workspaceId === 'w3' && t.status === 'done' && t.updatedAt >= since);
      const plan = await c.explain(filter);
      expect(plan).toMatchObject({ plan: 'IXSCAN', index: 'ws_status_updated', nReturned: matches.length });
      expect(plan.docsExamined).toBe(matches.length);
      expect(await c.countDocuments(filter)).toBe(matches.length);
    });
  });

  it('planner: an unindexed filter falls back to a full scan with the same answer', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const plan = await c.explain({ title: 'Task 123' });
      expect(plan).toMatchObject({ plan: 'COLLSCAN', docsExamined: total, nReturned: 1 });
    });
  });

  it('planner: _id lookups read only the named documents', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const plan = await c.explain({ _id: { $in: ['task-000001', 'task-000002', 'nope'] }, status: { $exists: true } });
      expect(plan).toMatchObject({ plan: 'IDHACK', docsExamined: 2, nReturned: 2 });
    });
  });

  it('planner: a multikey index serves equality lookups but not sorts', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const plan = await c.explain({ labels: 'launch-blocker' }, { sort: { priority: 1 }, limit: 5 });
      expect(plan).toMatchObject({ plan: 'IXSCAN', index: 'labels', inMemorySort: true, docsExamined: total / 10 });
    });
  });

  it('planner: a partial index is used only when the filter implies its expression', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const open = tasks.filter((t) => t.workspaceId === 'w0' && t.status === 'open').length;
      // Both the partial index and the compound index fit; either way, only open tasks of w0 are read.
      expect((await c.explain({ workspaceId: 'w0', status: 'open' })).keysExamined).toBe(open);
      const plan = await c.explain({ workspaceId: 'w0', priority: { $exists: true } });
      expect(plan.index).not.toBe('open_by_ws');
      expect(plan.nReturned).toBe(total / 4);
    });
  });

  it('planner: indexes follow inserts, updates and deletes', async () => {
    const { store, c } = await openTasks();
    await withStore(store, async () => {
      const filter = { workspaceId: 'w1', status: 'done' };
      const before = await c.countDocuments(filter);
      const moved = await c.updateMany({ workspaceId: 'w1', status: 'open' }, { $set: { status: 'done' } });
      const removed = await c.deleteMany({ workspaceId: 'w1', status: 'done', priority: 0 });
      await c.insertOne({ ...(tasks[1] as Task), _id: 'new-task', status: 'done', priority: 1, updatedAt: new Date(t0 + 10 ** 12) });
      const after = await c.countDocuments(filter);
      expect(after).toBe(before + moved.modifiedCount - removed.deletedCount + 1);
      const plan = await c.explain(filter, { sort: { updatedAt: -1 }, limit: 1 });
      expect(plan).toMatchObject({ index: 'ws_status_updated', keysExamined: 1 });
      expect((await c.findOne(filter, { sort: { updatedAt: -1 } }))?._id).toBe('new-task');
      expect(await c.countDocuments({ workspaceId: 'w1', status: 'open' })).toBe(0);
    });
  });
});

describe('embedded store: planner equivalence', () => {
  /** Small seeded PRNG (mulberry32) so a failure reproduces. */
  function rng(seed: number): () => number {
    let a = seed;
    return () => {
      a = (a + 0x6d2b79f5) | 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  it('planner: random filters, sorts and pages answer the same with and without indexes, across writes', async () => {
    const random = rng(20240501);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    const MISSING = Symbol('missing');
    const aValues = ['x', 'y', 'z', 1, 2, 3, null, MISSING, new Date(1000), new Date(2000), true];
    const eValues = ['p', 'q', 'r', 's', MISSING];
    const makeDoc = (i: number): StoredDocument => {
      const doc: StoredDocument = { _id: `d${String(i).padStart(4, '0')}` };
      const a = pick(aValues);
      if (a !== MISSING) doc.a = a;
      const r = random();
      if (r < 0.6) doc.b = Math.floor(random() * 6);
      else if (r < 0.8) doc.b = [Math.floor(random() * 6), Math.floor(random() * 6)];
      const d = pick([1, 2, 'u', 'v', MISSING]);
      if (d !== MISSING) doc.c = { d };
      const e = pick(eValues);
      if (e !== MISSING) doc.e = e;
      return doc;
    };
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const plain = store.collection('plain');
      const indexed = store.collection('indexed');
      await indexed.createIndexes([
        { name: 'a_b', keys: { a: 1, b: 1 } },
        { name: 'a_e', keys: { a: 1, e: -1 } },
        { name: 'cd', keys: { 'c.d': 1 } },
        { name: 'b', keys: { b: -1 } },
        { name: 'e_a', keys: { e: 1, a: -1 } },
        { name: 'e_partial', keys: { e: 1 }, partialFilterExpression: { a: 'x' } },
      ]);
      const docs = Array.from({ length: 500 }, (_, i) => makeDoc(i));
      await plain.insertMany(docs);
      await indexed.insertMany(docs);
      let next = docs.length;

      const scalar = (field: string): unknown =>
        field === 'a' ? pick(aValues.filter((v) => v !== MISSING)) : field === 'e' ? pick(['p', 'q', 'r', 's']) : field === 'b' ? Math.floor(random() * 6) : pick([1, 2, 'u', 'v']);
      const condition = (field: string): unknown => {
        const r = random();
        if (r < 0.3) return scalar(field);
        if (r < 0.5) return { $in: [scalar(field), scalar(field), ...(random() < 0.3 ? [null] : [])] };
        if (r < 0.8) {
          const v = scalar(field);
          if (v === null || typeof v === 'boolean') return v;
          const ops = ['$gt', '$gte', '$lt', '$lte'];
          const cond: Record<string, unknown> = { [pick(ops)]: v };
          if (random() < 0.4) cond[pick(ops)] = scalar(field);
          return cond;
        }
        if (r < 0.9) return { $ne: scalar(field) };
        return { $exists: random() < 0.5 };
      };
      const randomFilter = (): Record<string, unknown> => {
        const filter: Record<string, unknown> = {};
        for (const field of ['a', 'b', 'c.d', 'e']) if (random() < 0.45) filter[field] = condition(field);
        if (random() < 0.1) filter.a = 'x';
        return filter;
      };
      const randomOptions = (): Record<string, unknown> => {
        const sort: Record<string, 1 | -1> = {};
        for (const field of ['a', 'e', 'b', 'c.d']) if (random() < 0.35) sort[field] = random() < 0.5 ? 1 : -1;
        // Ties are ordered by _id whichever plan runs, so _id need not be named.
        if (random() < 0.5 || Object.keys(sort).length === 0) sort._id = random() < 0.5 ? 1 : -1;
        const options: Record<string, unknown> = { sort };
        if (random() < 0.5) options.limit = 1 + Math.floor(random() * 20);
        if (random() < 0.3) options.skip = Math.floor(random() * 10);
        return options;
      };

      let indexedPlans = 0;
      let orderedWalks = 0;
      for (let round = 0; round < 6; round++) {
        for (let i = 0; i < 80; i++) {
          const filter = randomFilter();
          const options = randomOptions();
          const label = JSON.stringify({ filter, options });
          const want = (await plain.find(filter, options)).map((d) => d._id);
          expect((await indexed.find(filter, options)).map((d) => d._id), label).toEqual(want);
          expect(await indexed.countDocuments(filter), label).toBe(await plain.countDocuments(filter));
          const plan = await indexed.explain(filter, options);
          if (plan.plan === 'IXSCAN') indexedPlans++;
          if (plan.plan === 'IXSCAN' && !plan.inMemorySort) orderedWalks++;
        }
        // The same writes on both sides, so the indexes must follow inserts, updates and deletes.
        for (let i = 0; i < 40; i++) {
          const filter = randomFilter();
          const r = random();
          if (r < 0.3) {
            const doc = makeDoc(next++);
            await plain.insertOne(doc);
            await indexed.insertOne(doc);
          } else if (r < 0.6) {
            const update = { $set: { e: pick(['p', 'q', 's']), b: random() < 0.5 ? 7 : [1, 7] }, $inc: { n: 1 } };
            const [x, y] = [await plain.updateMany(filter, update), await indexed.updateMany(filter, update)];
            expect(y, JSON.stringify(filter)).toEqual(x);
          } else {
            // Single-document writes name their document: which of several matches `updateOne`
            // or `deleteOne` takes is unspecified (as in MongoDB) and may differ between plans.
            const target = { ...filter, _id: `d${String(Math.floor(random() * next)).padStart(4, '0')}` };
            if (r < 0.8) {
              const update = { $set: { a: scalar('a') }, $unset: { 'c.d': '' } };
              expect(await indexed.updateOne(target, update)).toEqual(await plain.updateOne(target, update));
            } else {
              expect(await indexed.deleteOne(target)).toEqual(await plain.deleteOne(target));
            }
          }
        }
        expect((await indexed.find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual((await plain.find({}, { sort: { _id: 1 } })).map((d) => d._id));
        // Reads inside a transaction merge its uncommitted writes over what the plan reads.
        await store.withTransaction(async (session) => {
          for (let i = 0; i < 15; i++) {
            const doc = makeDoc(next++);
            await plain.insertOne(doc, { session });
            await indexed.insertOne(doc, { session });
          }
          const filter = randomFilter();
          const update = { $set: { e: 'q', a: scalar('a') } };
          expect(await indexed.updateMany(filter, update, { session })).toEqual(await plain.updateMany(filter, update, { session }));
          const gone = `d${String(Math.floor(random() * next)).padStart(4, '0')}`;
          expect(await indexed.deleteOne({ _id: gone }, { session })).toEqual(await plain.deleteOne({ _id: gone }, { session }));
          for (let i = 0; i < 25; i++) {
            const q = randomFilter();
            const options = { ...randomOptions(), session };
            const label = JSON.stringify({ q, options });
            expect((await indexed.find(q, options)).map((d) => d._id), label).toEqual((await plain.find(q, options)).map((d) => d._id));
            expect(await indexed.countDocuments(q, { session }), label).toBe(await plain.countDocuments(q, { session }));
          }
        });
      }
      // The comparison is only meaningful if the indexed side really used its indexes.
      expect(indexedPlans).toBeGreaterThan(100);
      expect(orderedWalks).toBeGreaterThan(10);
    });
  });
});

describe('embedded store: TTL expiry', () => {
  it('ttl: a sweep removes documents whose date plus expireAfterSeconds has passed on the injected clock', async () => {
    let now = new Date('2024-05-01T12:00:00Z');
    const store = createEmbeddedStore({ clock: () => now });
    await withStore(store, async () => {
      const c = store.collection('sessions');
      await c.createIndexes([{ name: 'expiry', keys: { lastSeen: 1 }, expireAfterSeconds: 60 }]);
      await c.insertMany([
        { _id: 'old', lastSeen: new Date(now.getTime() - 120_000) },
        { _id: 'recent', lastSeen: new Date(now.getTime() - 30_000) },
        { _id: 'no-date' },
        { _id: 'string-date', lastSeen: '2000-01-01' },
      ]);
      expect(store.sweepExpired()).toBe(1);
      expect((await c.find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['no-date', 'recent', 'string-date']);
      now = new Date(now.getTime() + 31_000);
      expect(store.sweepExpired()).toBe(1);
      expect((await c.find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['no-date', 'string-date']);
    });
  });

  it('ttl: the sweep timer removes expired documents on its own', async () => {
    const store = createEmbeddedStore({ expirySweepMs: 10 });
    await withStore(store, async () => {
      const c = store.collection('tokens');
      await c.createIndexes([{ name: 'expiry', keys: { expiresAt: 1 }, expireAfterSeconds: 0 }]);
      await c.insertMany([
        { _id: 'gone', expiresAt: new Date(Date.now() - 1000) },
        { _id: 'kept', expiresAt: new Date(Date.now() + 3_600_000) },
      ]);
      await vi.waitFor(async () => expect(await c.findOne({ _id: 'gone' })).toBeNull(), { timeout: 5000, interval: 10 });
      expect(await c.findOne({ _id: 'kept' })).not.toBeNull();
    });
  });
});

describe('embedded store: transactions', () => {
  it('transaction: gives up with TransactionConflictError after the bounded number of attempts', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const c = store.collection('c');
      await c.insertOne({ _id: 'hot', n: 0 });
      let attempts = 0;
      const err = await store
        .withTransaction(async (session) => {
          attempts++;
          await c.findOne({ _id: 'hot' }, { session });
          await c.updateOne({ _id: 'hot' }, { $inc: { n: 1 } });
          await c.updateOne({ _id: 'hot' }, { $set: { tx: attempts } }, { session });
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransactionConflictError);
      expect(attempts).toBe(MAX_TRANSACTION_ATTEMPTS);
      expect((await c.findOne({ _id: 'hot' }))?.tx).toBeUndefined();
    });
  });

  it('transaction: a conflict swallowed inside fn still fails that attempt', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const c = store.collection('c');
      await c.insertOne({ _id: 'doc', n: 0 });
      let attempts = 0;
      await store.withTransaction(async (session) => {
        attempts++;
        await c.findOne({ _id: 'doc' }, { session });
        if (attempts === 1) await c.updateOne({ _id: 'doc' }, { $set: { n: 1 } });
        await c.updateOne({ _id: 'doc' }, { $set: { seenBy: attempts } }, { session }).catch(() => undefined);
      });
      expect(attempts).toBe(2);
      expect(await c.findOne({ _id: 'doc' })).toEqual({ _id: 'doc', n: 1, seenBy: 2 });
    });
  });

  it('transaction: a unique key committed by someone else before commit forces a retry, which then sees the duplicate', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const c = store.collection('claims');
      await c.createIndexes([{ name: 'one_active', keys: { taskId: 1 }, unique: true, partialFilterExpression: { active: true } }]);
      let attempts = 0;
      const err = await store
        .withTransaction(async (session) => {
          attempts++;
          await c.insertOne({ _id: `mine-${attempts}`, taskId: 't1', active: true }, { session });
          if (attempts === 1) await c.insertOne({ _id: 'theirs', taskId: 't1', active: true });
        })
        .catch((e: unknown) => e);
      expect(attempts).toBe(2);
      expect(err).toBeInstanceOf(DuplicateKeyError);
      expect((err as DuplicateKeyError).index).toBe('one_active');
      expect((await c.find({})).map((d) => d._id)).toEqual(['theirs']);
    });
  });

  it('transaction: a session object not issued by this store is rejected', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      await expect(store.collection('c').findOne({}, { session: { id: 'forged' } })).rejects.toThrow(/unknown session/);
    });
  });

  it('transaction: unique keys are checked against the transaction\'s own writes', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const c = store.collection('c');
      await c.createIndexes([{ name: 'slug', keys: { slug: 1 }, unique: true }]);
      await c.insertOne({ _id: 'a', slug: 'one' });
      await store.withTransaction(async (session) => {
        // Freeing a key and reusing it within one transaction is fine.
        await c.updateOne({ _id: 'a' }, { $set: { slug: 'uno' } }, { session });
        await c.insertOne({ _id: 'b', slug: 'one' }, { session });
        await expect(c.insertOne({ _id: 'c', slug: 'uno' }, { session })).rejects.toBeInstanceOf(DuplicateKeyError);
      });
      expect((await c.find({}, { sort: { _id: 1 } })).map((d) => d.slug)).toEqual(['uno', 'one']);
    });
  });
});

describe('embedded store: explicit transactions (beginTransaction)', () => {
  it('beginTransaction: writes stay invisible until commit, then appear together', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const a = store.collection('a');
      const b = store.collection('b');
      await a.insertOne({ _id: 'x', n: 1 });
      const tx = store.beginTransaction();
      expect(tx.state).toBe('active');
      await a.updateOne({ _id: 'x' }, { $set: { n: 2 } }, { session: tx.session });
      await b.insertOne({ _id: 'y' }, { session: tx.session });
      expect((await a.findOne({ _id: 'x' }))?.n).toBe(1);
      expect(await b.findOne({ _id: 'y' })).toBeNull();
      expect((await a.findOne({ _id: 'x' }, { session: tx.session }))?.n).toBe(2);
      await tx.commit();
      expect(tx.state).toBe('committed');
      expect((await a.findOne({ _id: 'x' }))?.n).toBe(2);
      expect(await b.findOne({ _id: 'y' })).toEqual({ _id: 'y' });
      await expect(a.findOne({}, { session: tx.session })).rejects.toThrow(/already committed/);
      tx.abort();
      expect(tx.state).toBe('committed');
    });
  });

  it('beginTransaction: abort discards the writes and ends the session', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const c = store.collection('c');
      const tx = store.beginTransaction();
      await c.insertOne({ _id: 'x' }, { session: tx.session });
      tx.abort();
      expect(tx.state).toBe('aborted');
      expect(await c.countDocuments({})).toBe(0);
      await expect(c.insertOne({ _id: 'y' }, { session: tx.session })).rejects.toThrow(/ended/);
      await expect(tx.commit()).rejects.toThrow(/ended/);
    });
  });

  it('beginTransaction: the second of two overlapping transactions fails its commit with a conflict and ends aborted', async () => {
    const store = createEmbeddedStore();
    await withStore(store, async () => {
      const c = store.collection('c');
      await c.insertOne({ _id: 'doc', n: 0 });
      const first = store.beginTransaction();
      const second = store.beginTransaction();
      await c.updateOne({ _id: 'doc' }, { $inc: { n: 1 } }, { session: first.session });
      await c.updateOne({ _id: 'doc' }, { $inc: { n: 10 } }, { session: second.session });
      await first.commit();
      await expect(second.commit()).rejects.toBeInstanceOf(TransactionConflictError);
      expect(second.state).toBe('aborted');
      expect((await c.findOne({ _id: 'doc' }))?.n).toBe(1);
    });
  });

  it('beginTransaction: refused once the store is closed', async () => {
    const store = createEmbeddedStore();
    await store.close();
    expect(() => store.beginTransaction()).toThrow(/closed/);
  });
});

describe('embedded store: argument checks', () => {
  const store = createEmbeddedStore();
  afterAll(() => store.close());
  const c = store.collection('checks');

  it('filters: operators the engine does not evaluate like MongoDB are rejected', async () => {
    await expect(c.find({ $where: 'true' })).rejects.toThrow(/unsupported top-level query operator \$where/);
    await expect(c.find({ $expr: { $eq: ['$a', 1] } })).rejects.toThrow(/\$expr/);
    await expect(c.find({ a: { $near: [0, 0] } })).rejects.toThrow(/unsupported query operator \$near/);
    await expect(c.find({ a: { $gt: 1, b: 2 } })).rejects.toThrow(/cannot mix operators/);
    await expect(c.find({ a: { $in: 'x' } })).rejects.toThrow(/needs an array/);
    await expect(c.find({ a: { $regex: '(' } })).rejects.toThrow(/invalid regular expression/);
  });

  it('documents: values MongoDB documents cannot hold here are rejected', async () => {
    class Money {
      constructor(readonly cents: number) {}
    }
    await expect(c.insertOne({ _id: 'a', m: new Money(1) })).rejects.toThrow(/Money instance/);
    await expect(c.insertOne({ _id: 'a', f: () => 1 })).rejects.toThrow(/function/);
    await expect(c.insertOne({ _id: 'a', b: 1n })).rejects.toThrow(/bigint/);
    await expect(c.insertOne({ _id: 'a', d: new Date('nope') })).rejects.toThrow(/invalid Date/);
    await expect(c.insertOne({ _id: 'a', nested: { $set: 1 } })).rejects.toThrow(/must not start with '\$'/);
    await expect(c.insertOne({ _id: 'a', 'dotted.name': 1 })).rejects.toThrow(/must not contain '\.'/);
    await expect(c.insertOne({ _id: 5 } as unknown as StoredDocument)).rejects.toThrow(/_id must be a string/);
    expect(await c.countDocuments({})).toBe(0);
  });

  it('updates: an upsert that cannot determine a string _id is rejected', async () => {
    await expect(c.updateOne({ key: 'k' }, { $set: { v: 1 } }, { upsert: true })).rejects.toThrow(/upsert needs a string _id/);
    expect(await c.countDocuments({})).toBe(0);
  });

  it('updates: unsupported modifiers and non-object operator arguments are rejected', async () => {
    await c.insertOne({ _id: 'u', list: [1] });
    await expect(c.updateOne({ _id: 'u' }, { $push: { list: { $each: [2], $bogus: 1 } } })).rejects.toThrow(/unsupported modifier/);
    await expect(c.updateOne({ _id: 'u' }, { $set: 'x' })).rejects.toThrow(/plain object/);
    await expect(c.updateOne({ _id: 'u' }, { $rename: { list: 'l' } })).rejects.toThrow(/unsupported update operator \$rename/);
    await expect(c.updateOne({ _id: 'u' }, { $set: { 'list.x': 1 } })).rejects.toThrow(/Cannot create field/);
    expect(await c.findOne({ _id: 'u' })).toEqual({ _id: 'u', list: [1] });
  });

  it('options: unknown options and bad sort, skip, limit or projection values are rejected', async () => {
    await expect(c.find({}, { limt: 1 } as never)).rejects.toThrow(/unknown option 'limt'/);
    await expect(c.find({}, { limit: -1 })).rejects.toThrow(/limit/);
    await expect(c.find({}, { skip: 1.5 })).rejects.toThrow(/skip/);
    await expect(c.find({}, { sort: { a: 2 } as never })).rejects.toThrow(/sort direction/);
    await expect(c.find({}, { projection: { a: { $slice: 1 } } as never })).rejects.toThrow(/projection value/);
    await expect(c.findOneAndUpdate({}, { $set: { a: 1 } }, { returnDocument: 'later' as never })).rejects.toThrow(/returnDocument/);
  });

  it('indexes: invalid specs are rejected', async () => {
    await expect(c.createIndexes([{ name: '', keys: { a: 1 } }])).rejects.toThrow(/name/);
    await expect(c.createIndexes([{ name: 'x', keys: {} }])).rejects.toThrow(/at least one field/);
    await expect(c.createIndexes([{ name: 'x', keys: { a: 2 as never } }])).rejects.toThrow(/direction/);
    await expect(c.createIndexes([{ name: 'x', keys: { a: 1, b: 1 }, expireAfterSeconds: 5 }])).rejects.toThrow(/exactly one key/);
    await expect(c.createIndexes([{ name: '_id_', keys: { _id: 1 } }])).rejects.toThrow(/reserved/);
    await expect(c.createIndexes([{ name: 'x', keys: { a: 1 }, sparse: true } as never])).rejects.toThrow(/unknown option 'sparse'/);
  });

  it('store: close stops the expiry timer and releases the journal file', async () => {
    const dir = tempDir();
    const openFiles = (): string[] =>
      fs.readdirSync('/proc/self/fd').flatMap((fd) => {
        try {
          return [fs.readlinkSync(`/proc/self/fd/${fd}`)];
        } catch {
          return [];
        }
      });
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const s = createEmbeddedStore({ dataDir: dir });
      expect(vi.getTimerCount()).toBe(1);
      expect(openFiles()).toContain(path.join(dir, 'store.journal'));
      await s.close();
      expect(vi.getTimerCount()).toBe(0);
      expect(openFiles()).not.toContain(path.join(dir, 'store.journal'));
    } finally {
      vi.useRealTimers();
    }
  });

  it('store: after close every operation and ping reject', async () => {
    const s = createEmbeddedStore();
    const col = s.collection('x');
    await s.close();
    await s.close();
    await expect(s.ping()).rejects.toThrow(/closed/);
    await expect(col.insertOne({ _id: 'a' })).rejects.toThrow(/closed/);
    await expect(s.withTransaction(async () => 1)).rejects.toThrow(/closed/);
  });
});
