/**
 * The SQLite adapter: the store contract in memory and on a file, then what only this adapter
 * has: durability across a kill -9 in the middle of concurrent writes, reopening, single-process
 * ownership of a file, TTL expiry, and the filter's SQL form checked against mingo on random
 * documents and filters.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Query } from 'mingo';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { describeStoreContract } from '../contract/store-contract.js';
import { compareStrings } from '../document/values.js';
import type { Filter, StoredDocument } from '../port.js';
import { createSqliteStore, type SqliteDocumentStore } from './sqlite-store.js';
import { seededRandom as random } from '../testing/seeded-random.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const dirs: string[] = [];
const tempDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqlite-store-'));
  dirs.push(dir);
  return dir;
};

afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

async function withStore<R>(store: SqliteDocumentStore, fn: (store: SqliteDocumentStore) => Promise<R>): Promise<R> {
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

describeStoreContract('sqlite in memory', async () => createSqliteStore({ path: ':memory:' }));
describeStoreContract('sqlite file', async () => createSqliteStore({ path: path.join(tempDir(), 'store.sqlite') }));

/** Holds every write-ahead-log flush until the test runs it (`held`); `spy.mockRestore()` lets flushes through again. */
function holdFlushes(): { held: (() => void)[]; spy: { mockRestore(): void } } {
  const held: (() => void)[] = [];
  const real = fs.fdatasync;
  const spy = vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, callback: (err: NodeJS.ErrnoException | null) => void) => {
    held.push(() => real(fd, callback));
  }) as typeof fs.fdatasync);
  return { held, spy };
}

describe('sqlite store: files', () => {
  it('persistence: documents, indexes and their rules survive closing and reopening', async () => {
    const file = path.join(tempDir(), 'data', 'store.sqlite');
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const c = store.collection('c');
      await c.createIndexes([{ name: 'k_unique', keys: { k: 1 }, unique: true }]);
      await c.insertMany([
        { _id: 'a', k: 1, at: new Date(5), n: Number.NaN, inf: -Infinity, tags: ['x', 'y'] },
        { _id: 'b', k: 2 },
      ]);
      await store.withTransaction(async (session) => {
        await c.deleteOne({ _id: 'b' }, { session });
        await c.insertOne({ _id: 'c', k: 2 }, { session });
      });
    });
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const c = store.collection('c');
      expect(await c.find({}, { sort: { _id: 1 } })).toEqual([
        { _id: 'a', k: 1, at: new Date(5), n: Number.NaN, inf: -Infinity, tags: ['x', 'y'] },
        { _id: 'c', k: 2 },
      ]);
      await expect(c.insertOne({ _id: 'd', k: 1 })).rejects.toMatchObject({ index: 'k_unique' });
      expect(await c.countDocuments({ tags: 'y' })).toBe(1);
    });
  });

  it('persistence: a dropped index (a key index, a substring index) stays dropped after reopening; its tables are gone and its name is free', async () => {
    const file = path.join(tempDir(), 'data', 'store.sqlite');
    const tables = (store: SqliteDocumentStore) =>
      (store as unknown as { db: { prepare(sql: string): { all(): { name: string }[] } } }).db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r) => r.name);
    // Index tables: i_ (a key index), f_ (FTS5, with its shadow tables), v_ (its vocabulary), q_ (rows pending for it).
    const indexTables = (store: SqliteDocumentStore) => tables(store).filter((n) => /^[ifvq]_/.test(n));
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const c = store.collection('c');
      await c.createIndexes([
        { name: 'k_unique', keys: { k: 1 }, unique: true },
        { name: 'text', keys: { t: 1 }, substring: true },
      ]);
      await c.insertMany([
        { _id: 'a', k: 1, t: 'needle in a haystack' },
        { _id: 'b', k: 2, t: 'hay' },
      ]);
      expect((await c.find({ k: 1 }))[0]?._id).toBe('a');
      expect(indexTables(store).length).toBeGreaterThan(3);
      await c.dropIndexes(['k_unique', 'text']);
      expect(indexTables(store)).toEqual([]);
      // Queries planned with the indexes before are planned again without them.
      expect((await c.find({ k: 1 }))[0]?._id).toBe('a');
      expect((await c.find({ t: { $regex: 'needle' } })).map((d) => d._id)).toEqual(['a']);
    });
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const c = store.collection('c');
      expect(indexTables(store)).toEqual([]);
      await c.insertOne({ _id: 'c', k: 1, t: 'another needle' });
      expect((await c.find({ t: { $regex: 'needle' } }, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['a', 'c']);
      await c.createIndexes([{ name: 'k_unique', keys: { t: 1 } }]);
      expect(await c.countDocuments({ k: 1 })).toBe(2);
    });
  });

  it('files: a second store on the same file is refused while the first is open', async () => {
    const file = path.join(tempDir(), 'store.sqlite');
    await withStore(createSqliteStore({ path: file }), async (store) => {
      await store.collection('c').insertOne({ _id: 'a' });
      expect(() => createSqliteStore({ path: file })).toThrow(/locked/);
    });
  });

  it('durability: a write resolves, and a read sees it, only once the write-ahead log is flushed to disk', async () => {
    const file = path.join(tempDir(), 'store.sqlite');
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const c = store.collection('c');
      await c.insertOne({ _id: 'before' });
      // Hold every flush until the test lets it run.
      const held: { fd: number; run: () => void }[] = [];
      const real = fs.fdatasync;
      const spy = vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, callback: (err: NodeJS.ErrnoException | null) => void) => {
        held.push({ fd, run: () => real(fd, callback) });
      }) as typeof fs.fdatasync);
      const settled: string[] = [];
      try {
        const first = c.insertOne({ _id: 'a' }).then(() => settled.push('write a'));
        const read = c.findOne({ _id: 'a' }).then((doc) => settled.push(`read ${String(doc?._id)}`));
        for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10));
        // Committed in SQLite, but neither the write nor a read of it resolved before the flush.
        expect(held).toHaveLength(1);
        expect(settled).toEqual([]);
        // The flush is of the database's write-ahead log.
        expect(fs.fstatSync((held[0] as { fd: number }).fd).ino).toBe(fs.statSync(`${file}-wal`).ino);
        // A write committed while that flush runs waits for the next one.
        const second = c.insertOne({ _id: 'b' }).then(() => settled.push('write b'));
        (held.shift() as { run: () => void }).run();
        await Promise.all([first, read]);
        expect(settled).toEqual(['write a', 'read a']);
        for (let i = 0; i < 5 && held.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
        expect(held).toHaveLength(1);
        expect(settled).not.toContain('write b');
        (held.shift() as { run: () => void }).run();
        await second;
        expect(settled).toContain('write b');
      } finally {
        spy.mockRestore();
        for (const h of held.splice(0)) h.run();
      }
    });
  });

  it('durability: onFlush is told each flush of the log, its duration and the commits it made durable; an in-memory store never flushes', async () => {
    const flushes: { seconds: number; commits: number }[] = [];
    const onFlush = (seconds: number, commits: number) => flushes.push({ seconds, commits });
    await withStore(createSqliteStore({ path: path.join(tempDir(), 'store.sqlite'), onFlush }), async (store) => {
      const c = store.collection('c');
      await c.insertOne({ _id: 'a' });
      expect(flushes).toHaveLength(1);
      expect(flushes[0]?.commits).toBe(1);
      expect(flushes[0]?.seconds).toBeGreaterThanOrEqual(0);
      // Writes made while a flush is held share the next one: one flush for both commits.
      const { held, spy } = holdFlushes();
      try {
        const pending = c.insertOne({ _id: 'b' });
        for (let i = 0; i < 5 && held.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
        // Two more commits (writes of different turns commit apart) while the first flush is held.
        const more = c.insertOne({ _id: 'c' });
        await new Promise((resolve) => setTimeout(resolve, 5));
        const again = c.insertOne({ _id: 'd' });
        await new Promise((resolve) => setTimeout(resolve, 5));
        spy.mockRestore();
        (held.shift() as () => void)();
        await Promise.all([pending, more, again]);
      } finally {
        spy.mockRestore();
        for (const run of held.splice(0)) run();
      }
      expect(flushes.slice(1).map((f) => f.commits)).toEqual([1, 2]);
      // A read with nothing new to flush makes no flush.
      await c.findOne({ _id: 'a' });
      expect(flushes).toHaveLength(3);
    });
    const memory: number[] = [];
    await withStore(createSqliteStore({ path: ':memory:', onFlush: (s) => memory.push(s) }), async (store) => {
      await store.collection('c').insertOne({ _id: 'a' });
    });
    expect(memory).toEqual([]);
  });

  it('housekeeping that fails (an expiry sweep, an onCommitted callback) is told to `warn`, never thrown out of a timer; without `warn` it is a process warning', async () => {
    const warnings: { details: Record<string, unknown>; message: string }[] = [];
    const warn = (details: Record<string, unknown>, message: string) => warnings.push({ details, message });
    let clockFails = false;
    const clock = () => {
      if (clockFails) throw new Error('clock unavailable');
      return new Date();
    };
    const file = path.join(tempDir(), 'store.sqlite');
    await withStore(createSqliteStore({ path: file, clock, expirySweepMs: 5, warn }), async (store) => {
      const c = store.collection('c');
      await store.withTransaction(async (session) => c.insertOne({ _id: 'a' }, { session }), {
        onCommitted: () => {
          throw new Error('callback failed');
        },
      });
      expect(warnings).toEqual([{ details: { error: 'callback failed' }, message: 'an onCommitted callback threw' }]);
      // A sweep whose first step throws (here the clock) is reported, not an uncaught exception.
      clockFails = true;
      for (let i = 0; i < 100 && warnings.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 5));
      clockFails = false;
      expect(warnings[1]).toEqual({ details: { path: file, error: 'clock unavailable' }, message: 'store expiry sweep failed; it runs again on the next tick' });
      expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a' });
    });
    const emitted = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      await withStore(createSqliteStore({ path: ':memory:' }), async (store) => {
        await store.withTransaction(async (session) => store.collection('c').insertOne({ _id: 'a' }, { session }), {
          onCommitted: () => {
            throw new Error('callback failed');
          },
        });
      });
      expect(emitted).toHaveBeenCalledWith('store: an onCommitted callback threw: callback failed');
    } finally {
      emitted.mockRestore();
    }
  });

  it('durability: a transaction\'s onCommitted runs before its flush; a transaction it starts reads the commit, and both resolve with one flush', async () => {
    const file = path.join(tempDir(), 'store.sqlite');
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const c = store.collection('counter');
      await c.insertOne({ _id: 'n', n: 0 });
      const { held, spy } = holdFlushes();
      const settled: string[] = [];
      try {
        const bump = (label: string, next?: () => void): Promise<void> =>
          store
            .withTransaction(
              async (session) => {
                const doc = await c.findOne({ _id: 'n' }, { session });
                await c.updateOne({ _id: 'n' }, { $set: { n: (doc?.n as number) + 1 } }, { session });
              },
              { onCommitted: () => (settled.push(`${label} committed`), next?.()) },
            )
            .then(() => void settled.push(`${label} resolved`));
        let second: Promise<void> | undefined;
        const first = bump('first', () => {
          second = bump('second');
        });
        for (let i = 0; i < 10 && !settled.includes('second committed'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
        // Both committed (the second read the first's counter) while the first flush is held.
        expect(settled).toEqual(['first committed', 'second committed']);
        expect(held.length).toBeGreaterThanOrEqual(1);
        while (held.length > 0) (held.shift() as () => void)();
        await first;
        for (let i = 0; i < 10 && held.length === 0 && !settled.includes('second resolved'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
        while (held.length > 0) (held.shift() as () => void)();
        await second;
        expect(settled.slice(2).sort()).toEqual(['first resolved', 'second resolved']);
        expect((await c.findOne({ _id: 'n' }))?.n).toBe(2);
      } finally {
        spy.mockRestore();
        for (const h of held.splice(0)) h();
      }
    });
  });

  it('durability: a read waits only for unflushed commits that changed the collection it reads', async () => {
    const file = path.join(tempDir(), 'store.sqlite');
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const tasks = store.collection('tasks');
      const audit = store.collection('audit');
      const outbox = store.collection('outbox');
      await tasks.insertOne({ _id: 't1', n: 1 });
      await audit.insertOne({ _id: 'a0' });
      await outbox.insertOne({ _id: 'o0' });
      const { held, spy } = holdFlushes();
      const settled: string[] = [];
      const tick = () => new Promise((resolve) => setTimeout(resolve, 10));
      try {
        // An audit record committed, its flush held.
        const written = audit.insertOne({ _id: 'a1' }).then(() => settled.push('audit write'));
        for (let i = 0; i < 5 && held.length === 0; i++) await tick();
        expect(held).toHaveLength(1);
        // Reads of tasks are not held up by it; reads of audit are (they would see a1).
        expect(await tasks.findOne({ _id: 't1' })).toMatchObject({ n: 1 });
        expect(await tasks.countDocuments({})).toBe(1);
        expect(await tasks.find({})).toHaveLength(1);
        const auditRead = audit.find({}).then((docs) => settled.push(`audit read ${docs.length}`));
        const auditCount = audit.countDocuments({}).then((n) => settled.push(`audit count ${n}`));
        await tick();
        expect(settled).toEqual([]);
        // A transaction that changes tasks and outbox: reads of both now wait for its flush too,
        // reads of a collection it did not change do not.
        const session = store.withTransaction(async (s) => {
          await tasks.updateOne({ _id: 't1' }, { $set: { n: 2 } }, { session: s });
          await outbox.insertOne({ _id: 'o1' }, { session: s });
        });
        await tick();
        const taskRead = tasks.findOne({ _id: 't1' }).then((doc) => settled.push(`task read ${String(doc?.n)}`));
        const outboxRead = outbox.countDocuments({}).then((n) => settled.push(`outbox count ${n}`));
        await tick();
        expect(settled).toEqual([]);
        // Let every flush run: everything resolves, reads seeing what was committed.
        for (let i = 0; i < 20 && settled.length < 5; i++) {
          for (const run of held.splice(0)) run();
          await tick();
        }
        await Promise.all([written, auditRead, auditCount, session, taskRead, outboxRead]);
        expect([...settled].sort()).toEqual(['audit count 2', 'audit read 2', 'audit write', 'outbox count 2', 'task read 2']);
      } finally {
        spy.mockRestore();
        for (const run of held.splice(0)) run();
      }
    });
  });

  it('durability: kill -9 during 5,000 concurrent writes loses no acknowledged write and tears no transaction', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'store.sqlite');
    const script = path.join(dir, 'child.mts');
    // Each write is a transaction over two collections (the same id in both): after the crash
    // a document in one without the other would be a torn transaction.
    fs.writeFileSync(
      script,
      `import { createSqliteStore } from ${JSON.stringify(path.join(here, 'sqlite-store.ts'))};
const store = createSqliteStore({ path: process.argv[2] });
const a = store.collection('a');
const b = store.collection('b');
await a.createIndexes([{ name: 'n_unique', keys: { n: 1 }, unique: true }]);
const write = async (i) => {
  await store.withTransaction(async (session) => {
    await a.insertOne({ _id: 'w' + i, n: i, payload: 'x'.repeat(200) }, { session });
    await b.updateOne({ _id: 'w' + i }, { $set: { n: i } }, { upsert: true, session });
  });
  process.stdout.write('ack w' + i + '\\n');
};
// Started over about ten seconds (one every 2 ms, so hundreds are in flight at once while the log
// is flushed), so acknowledgements flow while most writes are still to come, even on a busy machine.
await Promise.all(Array.from({ length: 5000 }, (_, i) => new Promise((resolve) => setTimeout(resolve, 2 * i)).then(() => write(i))));
process.stdout.write('all done\\n');
setInterval(() => {}, 1000);
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script, file], {
      cwd: path.resolve(here, '../../../..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const acked = new Set<string>();
    let buffered = '';
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop() as string;
        for (const line of lines) if (line.startsWith('ack ')) acked.add(line.slice(4));
        // Kill early in the run: thousands of writes are still to come or in flight.
        if (acked.size >= 300) {
          child.kill('SIGKILL');
          resolve();
        }
      });
      child.on('exit', (code) => reject(new Error(`child exited before the kill (${code}): ${stderr}`)));
    });
    expect(await exited).toBe('SIGKILL');
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const inA = new Set((await store.collection('a').find({}, { projection: { _id: 1 } })).map((d) => d._id));
      const inB = new Set((await store.collection('b').find({}, { projection: { _id: 1 } })).map((d) => d._id));
      for (const id of acked) expect(inA.has(id) && inB.has(id), `acknowledged ${id}`).toBe(true);
      expect([...inA].sort()).toEqual([...inB].sort());
      expect(inA.size).toBeLessThan(5_000);
      expect(inA.size).toBeGreaterThanOrEqual(acked.size);
    });
  }, 120_000);
});

describe('sqlite store: writes made together commit together', () => {
  const walFrames = (file: string): number => Math.max(0, (fs.statSync(`${file}-wal`).size - 32) / (4096 + 24));

  it('batched writes: writes made in one turn share one transaction: a fraction of the log pages of the same writes made one at a time', async () => {
    const file = path.join(tempDir(), 'batch.sqlite');
    await withStore(createSqliteStore({ path: file }), async (store) => {
      const c = store.collection<{ _id: string; n: number; group: string }>('things');
      await c.createIndexes([{ name: 'group_n', keys: { group: 1, n: 1 } }]);
      const one = (g: string, i: number) => ({ _id: `${g}-${i}`, n: i, group: g });
      const before = walFrames(file);
      for (let i = 0; i < 100; i++) await c.insertOne(one('a', i));
      const alone = walFrames(file) - before;
      await Promise.all(Array.from({ length: 100 }, (_, i) => c.insertOne(one('b', i))));
      const together = walFrames(file) - before - alone;
      // One at a time: each commit writes the table's and the index's pages again.
      expect(alone).toBeGreaterThanOrEqual(200);
      expect(together).toBeLessThan(alone / 10);
      expect(await c.countDocuments({ group: 'b' })).toBe(100);
    });
  });

  it('batched writes: one write that fails in a batch is undone alone; the writes around it commit', async () => {
    await withStore(createSqliteStore({ path: path.join(tempDir(), 'fail.sqlite') }), async (store) => {
      const c = store.collection<{ _id: string; email: string }>('users');
      await c.createIndexes([{ name: 'email_unique', keys: { email: 1 }, unique: true }]);
      await c.insertOne({ _id: 'u0', email: 'taken@example.com' });
      const outcomes = await Promise.allSettled([
        c.insertOne({ _id: 'u1', email: 'one@example.com' }),
        c.insertMany([{ _id: 'u2', email: 'two@example.com' }, { _id: 'u3', email: 'taken@example.com' }]),
        c.updateOne({ _id: 'u0' }, { $set: { email: 'renamed@example.com' } }),
        c.insertOne({ _id: 'u4', email: 'taken@example.com' }),
      ]);
      expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      // The ordered insertMany keeps what it inserted before its duplicate, as alone.
      expect((await c.find({}, { sort: { _id: 1 } })).map((d) => `${d._id}:${d.email}`)).toEqual([
        'u0:renamed@example.com',
        'u1:one@example.com',
        'u2:two@example.com',
        'u4:taken@example.com',
      ]);
    });
  });

  it('batched writes: an ordered insert that fails part-way through a document (an SQLite error after its row) keeps none of that write; an id taken keeps those before', async () => {
    await withStore(createSqliteStore({ path: ':memory:' }), async (store) => {
      const c = store.collection<{ _id: string; group: string }>('things');
      await c.createIndexes([{ name: 'group', keys: { group: 1 } }]);
      await c.insertOne({ _id: 'first', group: 'g' });
      // The index's table fails the entry of document `bad` with a runtime error (no constraint):
      // its row is written by then, so the whole write must go, not just that document.
      const db = (store as unknown as { db: { prepare(sql: string): { all(): { name: string }[] }; exec(sql: string): void } }).db;
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'i\\_%' ESCAPE '\\'").all();
      expect(tables).toHaveLength(1);
      db.exec(`CREATE TRIGGER fail_bad BEFORE INSERT ON ${tables[0]!.name} WHEN NEW.id = 'bad' BEGIN SELECT json('{not json'); END`);
      await expect(c.insertMany([{ _id: 'a', group: 'g' }, { _id: 'bad', group: 'g' }, { _id: 'c', group: 'g' }])).rejects.toThrow(/JSON/i);
      expect((await c.find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['first']);
      expect(await c.countDocuments({ group: 'g' })).toBe(1);
      // A refusal before a document's first statement (its id taken) keeps the documents before it.
      await expect(c.insertMany([{ _id: 'a', group: 'g' }, { _id: 'first', group: 'h' }, { _id: 'c', group: 'g' }])).rejects.toThrow(/duplicate/i);
      expect((await c.find({ group: 'g' }, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['a', 'first']);
      expect(await c.countDocuments({ group: 'h' })).toBe(0);
    });
  });

  it('batched writes: a read made after a write sees it, though the write was not awaited; a transaction conflicts with a batched write it read before', async () => {
    await withStore(createSqliteStore({ path: ':memory:' }), async (store) => {
      const c = store.collection<{ _id: string; v: number }>('counters');
      const written = c.insertOne({ _id: 'x', v: 1 });
      expect(await c.findOne({ _id: 'x' })).toEqual({ _id: 'x', v: 1 });
      await written;
      const tx = store.beginTransaction();
      expect(await c.findOne({ _id: 'x' }, { session: tx.session })).toEqual({ _id: 'x', v: 1 });
      // Not awaited: the transaction's next step comes after it all the same.
      const outside = c.updateOne({ _id: 'x' }, { $set: { v: 2 } });
      const late = (async () => {
        await c.updateOne({ _id: 'x' }, { $set: { v: 3 } }, { session: tx.session });
        await tx.commit();
      })();
      await expect(late).rejects.toThrow(/conflict/);
      await outside;
      expect(await c.findOne({ _id: 'x' })).toEqual({ _id: 'x', v: 2 });
    });
  });
});

describe('sqlite store: kept query results', () => {
  it('kept results: the same query again, with no write to its collection in between, answers from the rows it found; a write makes it run again', async () => {
    await withStore(createSqliteStore({ path: ':memory:' }), async (store) => {
      const c = store.collection<{ _id: string; status: string; n: number }>('tasks');
      const other = store.collection('other');
      await c.createIndexes([{ name: 'status_n', keys: { status: 1, n: -1 } }]);
      await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: `t${i}`, status: i % 2 ? 'ready' : 'done', n: i })));
      const query = { status: 'ready' };
      const page = { sort: { n: -1 as const }, limit: 5 };
      expect((await c.explain(query, page)).kept).toBeUndefined();
      expect(await c.explain(query, page)).toMatchObject({ kept: true, plan: 'IXSCAN', index: 'status_n' });
      expect((await c.find(query, page)).map((d) => d._id)).toEqual(['t49', 't47', 't45', 't43', 't41']);
      // Another value is another query; another collection's write changes nothing here.
      expect((await c.explain({ status: 'done' }, page)).kept).toBeUndefined();
      await other.insertOne({ _id: 'x' });
      expect((await c.explain(query, page)).kept).toBe(true);
      // Any write to the collection (even to a document the query does not match) runs it again.
      await c.updateOne({ _id: 't0' }, { $set: { n: 100 } });
      expect((await c.explain(query, page)).kept).toBeUndefined();
      await c.updateOne({ _id: 't1' }, { $set: { n: 200 } });
      expect((await c.find(query, page)).map((d) => d._id)).toEqual(['t1', 't49', 't47', 't45', 't43']);
      expect((await c.find(query, page)).map((d) => d.n)).toEqual([200, 49, 47, 45, 43]);
      expect(store.memoryUse()).toMatchObject({ keptResults: expect.any(Number), keptRows: expect.any(Number) });
      expect(store.memoryUse().keptResults).toBeGreaterThan(0);
    });
    await withStore(createSqliteStore({ path: ':memory:', keptResults: 0 }), async (store) => {
      const c = store.collection('tasks');
      await c.insertOne({ _id: 'a', status: 'ready' });
      await c.find({ status: 'ready' });
      expect((await c.explain({ status: 'ready' })).kept).toBeUndefined();
      expect(store.memoryUse().keptResults).toBe(0);
    });
    expect(() => createSqliteStore({ path: ':memory:', keptResults: -1 })).toThrow(/keptResults/);
    expect(() => createSqliteStore({ path: ':memory:', keptResults: 1.5 })).toThrow(/keptResults/);
    expect(() => createSqliteStore({ path: ':memory:', warn: 'log' as never })).toThrow(/warn must be a function/);
  });

  it('kept results: 3,000 random writes (plain, in transactions, failing) between repeated queries: every answer equals the same store without kept results', async () => {
    const rnd = random(11);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)] as T;
    const kept = createSqliteStore({ path: ':memory:' });
    const fresh = createSqliteStore({ path: ':memory:', keptResults: 0 });
    try {
      const both = [kept, fresh].map((store) => store.collection<{ _id: string; s: string; n: number; tags?: string[] }>('docs'));
      for (const c of both) {
        await c.createIndexes([
          { name: 's_n', keys: { s: 1, n: 1 } },
          { name: 'tags', keys: { tags: 1 } },
          { name: 'n_unique', keys: { n: 1 }, unique: true, partialFilterExpression: { s: 'u' } },
        ]);
      }
      const states = ['a', 'b', 'c', 'u'];
      const queries: [Filter, { sort?: Record<string, 1 | -1>; limit?: number }][] = [
        [{ s: 'a' }, { sort: { n: 1 }, limit: 5 }],
        [{ s: { $in: ['b', 'c'] } }, { sort: { n: -1 }, limit: 10 }],
        [{ tags: 'x' }, {}],
        [{ n: { $gte: 10, $lt: 30 } }, { sort: { _id: 1 } }],
        [{}, { sort: { n: -1 }, limit: 3 }],
        [{ s: 'u', n: { $gt: 5 } }, { limit: 4 }],
      ];
      const apply = async (op: number, arg: { id: string; s: string; n: number; tag: string; fail: boolean }) => {
        return Promise.all(
          [kept, fresh].map(async (store, k) => {
            const c = both[k] as (typeof both)[number];
            try {
              switch (op) {
                case 0:
                  await c.insertOne({ _id: arg.id, s: arg.s, n: arg.n, tags: [arg.tag] });
                  break;
                case 1:
                  await c.updateOne({ _id: arg.id }, { $set: { s: arg.s, n: arg.n } });
                  break;
                case 2:
                  await c.deleteOne({ _id: arg.id });
                  break;
                case 3:
                  await c.updateMany({ s: arg.s }, { $inc: { n: 1 } });
                  break;
                case 4:
                  await c.updateOne({ _id: arg.id }, { $set: { n: arg.n }, $addToSet: { tags: arg.tag } }, { upsert: true });
                  break;
                default:
                  await store.withTransaction(async (session) => {
                    await c.updateOne({ _id: arg.id }, { $set: { s: arg.s } }, { session });
                    await c.insertOne({ _id: `${arg.id}-t`, s: arg.s, n: arg.n + 1000 }, { session });
                    if (arg.fail) throw new Error('rolled back');
                  });
              }
              return 'ok';
            } catch (err) {
              return (err as Error).name;
            }
          }),
        );
      };
      for (let step = 0; step < 3_000; step++) {
        const arg = { id: `d${Math.floor(rnd() * 60)}`, s: pick(states), n: Math.floor(rnd() * 60), tag: pick(['x', 'y', 'z']), fail: rnd() < 0.3 };
        const [a, b] = await apply(Math.floor(rnd() * 6), arg);
        expect(a, `step ${step}`).toBe(b);
        // Queries between writes, some twice in a row (answered from kept rows the second time).
        for (let q = 0; q < 2; q++) {
          const [filter, opts] = pick(queries);
          const [x, y] = await Promise.all(both.map((c) => c.find(filter, opts)));
          expect(x, `step ${step}: ${JSON.stringify([filter, opts])}`).toEqual(y);
        }
      }
      expect(kept.memoryUse().keptResults).toBeGreaterThan(0);
    } finally {
      await kept.close();
      await fresh.close();
    }
  }, 120_000);
});

describe('sqlite store: readonly reads', () => {
  it('readonly: every readonly read of a row version gets the same frozen objects (per projection); a new version, new ones', async () => {
    await withStore(await createSqliteStore({ path: ':memory:' }), async (store) => {
      const c = store.collection('shared');
      await c.insertMany([
        { _id: 'a', n: 1, text: 'x' },
        { _id: 'b', n: 2, text: 'y' },
      ]);
      const projection = { text: 0 } as const;
      const first = await c.find({}, { sort: { n: 1 }, projection, readonly: true });
      const again = await c.find({ n: { $gte: 1 } }, { sort: { n: -1 }, projection, readonly: true });
      expect(again[1]).toBe(first[0]);
      expect(again[0]).toBe(first[1]);
      expect(await c.findOne({ _id: 'a' }, { projection, readonly: true })).toBe(first[0]);
      // Another projection (or none) is another copy; a plain read is never one of them.
      const whole = await c.findOne({ _id: 'a' }, { readonly: true });
      expect(whole).not.toBe(first[0]);
      expect(whole).toEqual({ _id: 'a', n: 1, text: 'x' });
      expect(await c.findOne({ _id: 'a' })).not.toBe(whole);

      await c.updateOne({ _id: 'a' }, { $set: { n: 5 } });
      const updated = await c.findOne({ _id: 'a' }, { projection, readonly: true });
      expect(updated).not.toBe(first[0]);
      expect(updated).toEqual({ _id: 'a', n: 5 });
      expect(first[0]).toEqual({ _id: 'a', n: 1 });
      expect(await c.findOne({ _id: 'b' }, { projection, readonly: true })).toBe(first[1]);
    });
  });
});

describe('sqlite store: TTL expiry', () => {
  it('ttl: the sweep removes documents whose date plus the TTL has passed, by the injected clock', async () => {
    let now = new Date('2025-01-01T00:00:00Z');
    await withStore(createSqliteStore({ path: ':memory:', clock: () => now }), async (store) => {
      const c = store.collection('previews');
      await c.createIndexes([{ name: 'expires', keys: { expiresAt: 1 }, expireAfterSeconds: 60 }]);
      await c.insertMany([
        { _id: 'old', expiresAt: new Date('2024-12-31T23:58:00Z') },
        { _id: 'edge', expiresAt: new Date('2024-12-31T23:59:00Z') },
        { _id: 'new', expiresAt: new Date('2025-01-01T00:00:00Z') },
        { _id: 'none' },
        { _id: 'text', expiresAt: '2000-01-01' },
        { _id: 'many', expiresAt: [new Date('2030-01-01'), new Date('2020-01-01')] },
      ]);
      expect(await store.sweepExpired()).toBe(3);
      expect((await c.find({}, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(['new', 'none', 'text']);
      now = new Date('2025-01-01T00:01:00Z');
      expect(await store.sweepExpired()).toBe(1);
      expect(await c.countDocuments({})).toBe(2);
    });
  });
});

// ---- the filter's SQL form against mingo ------------------------------------------------------

describe('sqlite store: filters in SQL agree with mingo', () => {
  const rnd = random(7);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)] as T;
  const scalars: unknown[] = [null, 0, 1, 2.5, -3, 'a', 'b', 'ab', 'B', '', true, false, new Date(0), new Date(86_400_000), 'Ünï', '10', Number.NaN, Infinity];
  // Arrays hold scalars and sub-documents, not arrays: mingo reads a dotted path through nested
  // arrays its own way, which neither MongoDB nor the index keys follow.
  const value = (depth = 0, inArray = false): unknown => {
    const r = rnd();
    if (r < 0.55 || depth > 1) return pick(scalars);
    if (r < 0.8 && !inArray) return Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1, true));
    return { c: value(depth + 1), ...(rnd() < 0.5 ? { d: pick(scalars) } : {}) };
  };
  const docs: StoredDocument[] = Array.from({ length: 400 }, (_, i) => {
    const doc: StoredDocument = { _id: `d${String(i).padStart(3, '0')}` };
    for (const f of ['a', 'b', 'e']) if (rnd() < 0.85) doc[f] = value();
    if (rnd() < 0.7) doc.s = `${pick(['fix ', 'the ', 'Bug ', ''])}${pick(['a.b', 'x(y)', 'ünï', 'zz'])}${pick([' now', '', '?'])}`;
    return doc;
  });
  const fields = ['a', 'b', 'e', 'b.c', 'b.d', 'a.c', 's', '_id', 'missing'];
  const condition = (depth = 0): Filter => {
    const field = pick(fields);
    const v = field === '_id' ? pick(['d001', 'd002', 'x', 5]) : pick(scalars);
    switch (Math.floor(rnd() * (depth > 1 ? 11 : 14))) {
      case 0:
        return { [field]: v };
      case 1:
        return { [field]: { $ne: v } };
      case 2:
        return { [field]: { $in: [v, pick(scalars)] } };
      case 3:
        return { [field]: { $nin: [v, pick(scalars)] } };
      case 4:
        return { [field]: { [pick(['$gt', '$gte', '$lt', '$lte'])]: v } };
      case 5:
        return { [field]: { $exists: rnd() < 0.5 } };
      case 6:
        return { [field]: { $regex: pick(['a', 'b\\.', 'ün', 'x\\(y', '^fix', 'NOW']), ...(rnd() < 0.3 ? { $options: 'i' } : {}) } };
      case 7:
        return { [field]: { $size: Math.floor(rnd() * 3) } };
      case 8:
        return { [field]: { $all: [pick(scalars)] } };
      case 9:
        return { [field]: { $not: { [pick(['$gt', '$lt', '$eq'])]: v } } };
      case 10:
        return { [field]: { $gte: pick([0, 'a', new Date(0)]), $lt: pick([2, 'b', new Date(1e9)]) } };
      case 11:
        return { $or: [condition(depth + 1), condition(depth + 1)] };
      case 12:
        return { $and: [condition(depth + 1), condition(depth + 1)] };
      default:
        return { $nor: [condition(depth + 1)] };
    }
  };
  const expected = (filter: Filter): string[] => {
    const q = new Query(filter, { scriptEnabled: false });
    return docs.filter((d) => q.test(d)).map((d) => d._id);
  };

  it('filters: 400 random filters give mingo\'s answer, with and without indexes', async () => {
    await withStore(createSqliteStore({ path: ':memory:' }), async (store) => {
      const plain = store.collection('plain');
      const indexed = store.collection('indexed');
      await indexed.createIndexes([
        { name: 'a', keys: { a: 1 } },
        { name: 'b_c', keys: { 'b.c': -1, e: 1 } },
        { name: 's_text', keys: { s: 1 }, substring: true },
      ]);
      await plain.insertMany(docs);
      // Arrays in both `a` and `b.c` of one document cannot be indexed (parallel arrays): leave those out there.
      for (const d of docs) await indexed.insertOne(d).catch(() => undefined);
      const indexedIds = new Set((await indexed.find({}, { projection: { _id: 1 } })).map((d) => d._id));
      for (let i = 0; i < 400; i++) {
        const filter = rnd() < 0.5 ? condition() : { ...condition(), ...condition() };
        const want = expected(filter);
        const label = JSON.stringify(filter);
        expect((await plain.find(filter, { projection: { _id: 1 } })).map((d) => d._id).sort(), label).toEqual(want);
        expect(await plain.countDocuments(filter), label).toBe(want.length);
        expect((await indexed.find(filter, { projection: { _id: 1 } })).map((d) => d._id).sort(), label).toEqual(want.filter((id) => indexedIds.has(id)));
      }
    });
  }, 180_000);

  it('sorts: pages in any sort order equal a full sort of the matches', async () => {
    await withStore(createSqliteStore({ path: ':memory:' }), async (store) => {
      const plain = store.collection('plain');
      const indexed = store.collection('indexed');
      await indexed.createIndexes([{ name: 'e_b', keys: { e: 1, b: -1 } }]);
      await plain.insertMany(docs);
      // Arrays in both `e` and `b` of one document cannot be indexed (parallel arrays): leave those out there.
      for (const d of docs) await indexed.insertOne(d).catch(() => undefined);
      const indexedIds = new Set((await indexed.find({}, { projection: { _id: 1 } })).map((d) => d._id));
      for (let i = 0; i < 100; i++) {
        const sort = rnd() < 0.5 ? { [pick(['a', 'b', 'e', 's', 'b.c'])]: pick([1, -1] as const) } : { e: pick([1, -1] as const), b: pick([1, -1] as const) };
        const filter = rnd() < 0.5 ? {} : condition(2);
        const all = (await plain.find(filter, { sort })).map((d) => d._id);
        const limit = 1 + Math.floor(rnd() * 10);
        const skip = Math.floor(rnd() * 5);
        const label = JSON.stringify({ filter, sort, skip, limit });
        expect((await plain.find(filter, { sort, skip, limit })).map((d) => d._id), label).toEqual(all.slice(skip, skip + limit));
        const allIndexed = all.filter((id) => indexedIds.has(id));
        expect((await indexed.find(filter, { sort, skip, limit })).map((d) => d._id), label).toEqual(allIndexed.slice(skip, skip + limit));
      }
    });
  }, 180_000);
});

describe('sqlite store: plans', () => {
  it('plans: an index ending in `_id` walks a page in either direction without counting or sorting', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    try {
      const c = store.collection('activity');
      await c.createIndexes([{ name: 'issue_id', keys: { issueId: 1, _id: 1 } }]);
      await c.insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: `a${String(i).padStart(4, '0')}`, issueId: `t${i % 3}` })));
      for (const dir of [1, -1] as const) {
        const plan = await c.explain({ issueId: 't1' }, { sort: { _id: dir }, limit: 5 });
        expect(plan).toMatchObject({ plan: 'IXSCAN', index: 'issue_id', inMemorySort: false, nReturned: 5, docsExamined: 5 });
        const page = await c.find({ issueId: 't1' }, { sort: { _id: dir }, limit: 5 });
        const all = Array.from({ length: 100 }, (_, i) => `a${String(i * 3 + 1).padStart(4, '0')}`);
        expect(page.map((d) => d._id)).toEqual((dir === 1 ? all : all.reverse()).slice(0, 5));
      }
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: pages by `_id`', () => {
  it('plans: sorted by `_id` alone, a scan walks the `_id` index (a page reads its own rows; a string range on `_id` starts the walk) in the store\'s order of strings', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    try {
      const c = store.collection('events');
      const rnd = random(7);
      // Code point order, where UTF-16 order differs: a surrogate pair (😀) sorts after U+E000 and U+FFFF.
      const alphabet = ['0', 'a', 'b', 'Z', 'é', '\uE000', '\uFFFF', '😀'];
      const ids = new Set<string>();
      while (ids.size < 400) ids.add(Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => alphabet[Math.floor(rnd() * alphabet.length)]).join(''));
      const docs = [...ids].map((id, i) => ({ _id: id, k: i % 3 }));
      await c.insertMany(docs);
      const empty = await c.explain({}, { sort: { _id: -1 }, limit: 5 });
      expect(empty).toMatchObject({ plan: 'COLLSCAN', inMemorySort: false, nReturned: 5, docsExamined: 5 });
      const sorted = [...ids].sort(compareStrings);
      for (let i = 0; i < 60; i++) {
        const dir = rnd() < 0.5 ? 1 : -1;
        const pivot = sorted[Math.floor(rnd() * sorted.length)] as string;
        const filters: [Filter, (d: { _id: string; k: number }) => boolean][] = [
          [{}, () => true],
          [{ k: 1 }, (d) => d.k === 1],
          [{ _id: { $lt: pivot } }, (d) => compareStrings(d._id, pivot) < 0],
          [{ _id: { $gte: pivot }, k: { $ne: 2 } }, (d) => compareStrings(d._id, pivot) >= 0 && d.k !== 2],
        ];
        const [filter, test] = filters[i % filters.length] as (typeof filters)[number];
        const limit = 1 + Math.floor(rnd() * 20);
        const skip = Math.floor(rnd() * 5);
        const expected = docs.filter(test).map((d) => d._id).sort(compareStrings);
        if (dir === -1) expected.reverse();
        const label = JSON.stringify({ filter, dir, skip, limit });
        expect((await c.find(filter, { sort: { _id: dir }, skip, limit })).map((d) => d._id), label).toEqual(expected.slice(skip, skip + limit));
        expect((await c.find(filter, { sort: { _id: dir } })).map((d) => d._id), label).toEqual(expected);
        expect(await c.explain(filter, { sort: { _id: dir }, skip, limit }), label).toMatchObject({ plan: 'COLLSCAN', inMemorySort: false });
      }
      // A cursor's range starts the walk: the page after `pivot` examines the page, not what lies before it.
      const pivot = sorted[300] as string;
      expect(await c.explain({ _id: { $lt: pivot } }, { sort: { _id: -1 }, limit: 10 })).toMatchObject({ nReturned: 10, docsExamined: 10 });
      // Unsorted, a range reads only its rows (as an export's chunks are found: `<id>:` up to `<id>;`), counted and deleted alike.
      const [lo, hi] = [sorted[100] as string, sorted[140] as string];
      const inRange = sorted.filter((id) => compareStrings(id, lo) >= 0 && compareStrings(id, hi) < 0);
      const ranged = await c.explain({ _id: { $gte: lo, $lt: hi } });
      expect(ranged).toMatchObject({ plan: 'COLLSCAN', nReturned: inRange.length });
      // The range is plain SQL on the id column (what SQLite answers from its index), not only the residual's test.
      expect(ranged.sql).toMatch(/WHERE c\.id >= @p\d+ AND c\.id < @p\d+ AND/);
      expect(await c.countDocuments({ _id: { $gte: lo, $lt: hi }, k: { $ne: 2 } })).toBe(docs.filter((d) => inRange.includes(d._id) && d.k !== 2).length);
      expect((await c.deleteMany({ _id: { $gte: lo, $lt: hi } })).deletedCount).toBe(inRange.length);
      expect(await c.countDocuments({})).toBe(docs.length - inRange.length);
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: conditional writes by id', () => {
  it('plans: `_id` with more conditions (a write conditional on the version read) reads the one row by id and tests it, matched or not', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    try {
      const c = store.collection('tasks');
      await c.createIndexes([{ name: 'version', keys: { version: 1 } }]);
      await c.insertMany([{ _id: 't1', version: 3, status: 'ready' }, { _id: 't2', version: 3 }]);
      expect(await c.explain({ _id: 't1', version: 3 })).toMatchObject({ plan: 'IDHACK', docsExamined: 1, docsEvaluated: 1, nReturned: 1 });
      expect(await c.explain({ _id: 't1', version: 2 })).toMatchObject({ plan: 'IDHACK', docsExamined: 1, nReturned: 0 });
      expect(await c.findOneAndUpdate({ _id: 't1', version: 2 }, { $set: { version: 3 } })).toBeNull();
      expect(await c.findOneAndUpdate({ _id: 't1', version: 3, status: { $in: ['ready'] } }, { $set: { version: 4 } })).toMatchObject({ _id: 't1', version: 4 });
      expect(await c.updateOne({ _id: 't1', version: 3 }, { $set: { version: 5 } })).toMatchObject({ matchedCount: 0 });
      // Inside a transaction the id's own buffered version is tested, not the committed row.
      await store.withTransaction(async (session) => {
        await c.updateOne({ _id: 't2' }, { $set: { version: 4 } }, { session });
        expect(await c.findOne({ _id: 't2', version: 3 }, { session })).toBeNull();
        expect(await c.findOne({ _id: 't2', version: 4 }, { session })).toMatchObject({ version: 4 });
      });
      expect(await c.find({ version: 4 }, { sort: { _id: 1 } })).toEqual([{ _id: 't1', version: 4, status: 'ready' }, { _id: 't2', version: 4 }]);
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: memory', () => {
  it('memory: prepared statements stay within the statement cache (plus a set per collection and index) over thousands of distinct queries in many collections', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    try {
      const collections = 6;
      const shapes = 300;
      for (let k = 0; k < collections; k++) {
        const c = store.collection(`memory${k}`);
        await c.createIndexes([{ name: 'group_rank', keys: { group: 1, rank: 1 } }]);
        await c.insertMany(Array.from({ length: 40 }, (_, i) => ({ _id: `d${i}`, group: `g${i % 2}`, rank: i, f0: i })));
        for (let i = 0; i < shapes; i++) {
          // Each query its own statement text (another field): a page walked in index order,
          // kept as a plan with its LIMIT form, and a count.
          const filter = { group: 'g1', [`f${i}`]: { $ne: -1 } };
          const page = await c.find(filter, { sort: { rank: 1 }, limit: 1 + (i % 5) });
          expect(page).toHaveLength(1 + (i % 5));
          expect(await c.countDocuments(filter)).toBe(20);
        }
      }
      const use = store.memoryUse();
      expect(use.cachedStatements).toBeLessThanOrEqual(use.statementCacheLimit);
      // Outside the cache only each collection's and index's own statements (reads and writes by
      // row, index entries): no statement of a kept plan.
      expect(use.statements - use.cachedStatements).toBeLessThanOrEqual(collections * (8 + 3));
      expect(use.statements).toBeLessThanOrEqual(use.statementCacheLimit + collections * (8 + 3));
      expect(use.plans).toBeGreaterThan(0);
      expect(use.plans).toBeLessThanOrEqual(collections * 256);
      expect(use.shapes).toBeLessThanOrEqual(collections * 512);
      expect(use.documentCacheBytes).toBeLessThanOrEqual(use.documentCacheLimitBytes);
      expect(use.pageCacheLimitKiB).toBe(16_384);
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: filtered walks', () => {
  it('plans: a page walked in order is filtered by a selective index or the text index before documents are read, with the same answers as no index', async () => {
    const indexed = createSqliteStore({ path: ':memory:' });
    const plain = createSqliteStore({ path: ':memory:' });
    try {
      const c = indexed.collection('items');
      const p = plain.collection('items');
      await c.createIndexes([
        { name: 'ws_rank', keys: { ws: 1, rank: 1 } },
        { name: 'ws_tags', keys: { ws: 1, tags: 1 } },
        { name: 'ws_n', keys: { ws: 1, n: 1 } },
        { name: 'ws_text', keys: { ws: 1, text: 1 }, substring: true },
      ]);
      let seed = 7;
      const rnd = (): number => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      // Rare tags (one nested in an array, which equality to the tag must not match), numbers
      // that are mostly 0 with a few NaN, strings and missing values, a rare word in the text.
      const docs = Array.from({ length: 4000 }, (_, i) => {
        const r = rnd();
        const n = r < 0.03 ? 1 + (i % 3) : r < 0.04 ? Number.NaN : r < 0.05 ? '5' : r < 0.06 ? undefined : 0;
        const tags = rnd() < 0.02 ? ['rare', 'common'] : rnd() < 0.01 ? [['rare']] : rnd() < 0.01 ? 'rare' : ['common'];
        return {
          _id: `d${String(i).padStart(5, '0')}`,
          ws: i % 5 === 0 ? 'other' : 'main',
          rank: Math.floor(rnd() * 1000),
          tags,
          ...(n === undefined ? {} : { n }),
          text: `alpha beta ${rnd() < 0.02 ? 'kestrel ' : ''}gamma ${i}`,
        };
      });
      await c.insertMany(docs);
      await p.insertMany(docs);
      const cases: [Filter, string | undefined][] = [
        [{ ws: 'main', tags: 'rare' }, 'ws_tags'],
        [{ ws: 'main', tags: { $in: ['rare', 'none'] } }, 'ws_tags'],
        [{ ws: 'main', n: { $gt: 0 } }, 'ws_n'],
        [{ ws: 'main', n: { $gte: 2, $lt: 3 } }, undefined],
        [{ ws: 'main', text: { $regex: 'kestrel' } }, 'ws_text'],
        [{ ws: 'main', tags: 'rare', text: { $regex: 'kestrel' } }, undefined],
        [{ ws: 'main', n: { $lt: 1 } }, undefined],
        [{ ws: 'main', tags: ['rare'] }, undefined],
      ];
      for (const [filter, via] of cases) {
        for (const dir of [1, -1] as const) {
          const sort = { rank: dir, _id: dir };
          const label = JSON.stringify({ filter, dir });
          const want = (await p.find(filter, { sort })).map((d) => d._id);
          expect((await c.find(filter, { sort, limit: 10 })).map((d) => d._id), label).toEqual(want.slice(0, 10));
          expect((await c.find(filter, { sort, skip: 10, limit: 10 })).map((d) => d._id), label).toEqual(want.slice(10, 20));
          expect(await c.countDocuments(filter), label).toBe(want.length);
          if (via !== undefined) expect(await c.explain(filter, { sort, limit: 10 }), label).toMatchObject({ plan: 'IXSCAN', index: 'ws_rank', filter: via, inMemorySort: false });
        }
      }
      // A walk over a range of `n` tests the documents no further, except where the range could
      // hold what it does not match (NaN below every number).
      for (const n of [{ $lt: 1 }, { $lte: 0 }, { $gt: 0 }, { $gte: 0, $lt: 2 }, { $gt: '4' }]) {
        for (const dir of [1, -1] as const) {
          const filter = { ws: 'main', n };
          const sort = { n: dir, _id: dir };
          const label = JSON.stringify({ filter, dir });
          const want = (await p.find(filter, { sort })).map((d) => d._id);
          expect((await c.find(filter, { sort, limit: 10 })).map((d) => d._id), label).toEqual(want.slice(0, 10));
          expect(await c.explain(filter, { sort, limit: 10 }), label).toMatchObject({ plan: 'IXSCAN', index: 'ws_n', inMemorySort: false });
        }
      }
    } finally {
      await indexed.close();
      await plain.close();
    }
  });
});
