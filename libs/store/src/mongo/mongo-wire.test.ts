/**
 * The MongoDB adapter and the official driver, end to end, against mongo-wire (the embedded
 * engine behind MongoDB's wire protocol, from @planning/testing). This proves the adapter and
 * the driver's use of sessions, transactions, cursors and error replies work together; it does
 * NOT prove MongoDB itself behaves like the embedded engine (mongo-store.test.ts against a real
 * MongoDB does that, when MONGODB_URI is set).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MongoClient, MongoServerError, type CommandStartedEvent } from 'mongodb';
import { startMongoWireServer } from '@planning/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { describeStoreContract } from '../contract/store-contract.js';
import { DuplicateKeyError, isDuplicateKeyError, type DocumentStore } from '../port.js';
import { createMongoStore } from './mongo-store.js';

const server = await startMongoWireServer();
const clients: MongoClient[] = [];
const stores: DocumentStore[] = [];

afterAll(async () => {
  await Promise.all([...clients.map((c) => c.close()), ...stores.map((s) => s.close())]);
  await server.stop();
});

const dbName = (label: string): string => `${label}_${randomBytes(5).toString('hex')}`;

function client(options: { monitorCommands?: boolean } = {}): MongoClient {
  const c = new MongoClient(server.uri, { serverSelectionTimeoutMS: 5_000, ...options });
  clients.push(c);
  return c;
}

function store(database: string): DocumentStore {
  const s = createMongoStore({ uri: server.uri, database, appName: 'mongo-wire-tests' });
  stores.push(s);
  return s;
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (err: unknown) => err,
  );
}

describeStoreContract('mongodb adapter over mongo-wire', async () => createMongoStore({ uri: server.uri, database: dbName('contract'), appName: 'mongo-wire-contract' }));

describe('mongo-wire: two clients sharing one store, as two processes would', () => {
  it('claims: two clients racing conditional inserts on a partial unique index, exactly one wins', async () => {
    const database = dbName('race');
    const a = store(database);
    const b = store(database);
    const claimsA = a.collection('claims');
    const claimsB = b.collection('claims');
    await claimsA.createIndexes([{ name: 'one_active_claim', keys: { taskId: 1 }, unique: true, partialFilterExpression: { status: 'active' } }]);
    // Released claims for the same task do not count against the index.
    await claimsB.insertMany([
      { _id: 'old-1', taskId: 't1', status: 'released' },
      { _id: 'old-2', taskId: 't1', status: 'released' },
    ]);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? claimsA : claimsB).insertOne({ _id: `claim-${i}`, taskId: 't1', status: 'active', agent: `agent-${i}` })),
    );
    const won = outcomes.filter((o) => o.status === 'fulfilled');
    const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(39);
    for (const o of lost) expect(isDuplicateKeyError(o.reason, 'one_active_claim')).toBe(true);
    expect(await claimsA.countDocuments({ taskId: 't1', status: 'active' })).toBe(1);
    expect(await claimsB.countDocuments({ taskId: 't1' })).toBe(3);
  });

  it('claims: two clients racing findOneAndUpdate on one task, exactly one gets it', async () => {
    const database = dbName('race');
    const a = store(database).collection('tasks');
    const b = store(database).collection('tasks');
    await a.insertOne({ _id: 'task', status: 'ready' });
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).findOneAndUpdate({ _id: 'task', status: 'ready' }, { $set: { status: 'claimed', by: i } })),
    );
    const winners = results.filter((r) => r !== null);
    expect(winners).toHaveLength(1);
    expect((await b.findOne({ _id: 'task' }))?.by).toBe(winners[0]?.by);
  });

  it('transaction: writes of one client stay invisible to the other until commit', async () => {
    const database = dbName('txn');
    const a = store(database);
    const b = store(database);
    await a.collection('tasks').insertOne({ _id: 't1', status: 'ready' });
    let seenInside: unknown[] = [];
    await a.withTransaction(async (session) => {
      await a.collection('tasks').updateOne({ _id: 't1' }, { $set: { status: 'done' } }, { session });
      await a.collection('events').insertOne({ _id: 'e1', type: 'task.done' }, { session });
      // The other client (another connection pool, as another process) sees the old state.
      seenInside = [await b.collection('tasks').findOne({ _id: 't1' }), await b.collection('events').findOne({ _id: 'e1' })];
      // The transaction itself sees its own writes.
      expect((await a.collection('tasks').findOne({ _id: 't1' }, { session }))?.status).toBe('done');
    });
    expect(seenInside).toEqual([{ _id: 't1', status: 'ready' }, null]);
    expect(await b.collection('tasks').findOne({ _id: 't1' })).toEqual({ _id: 't1', status: 'done' });
    expect(await b.collection('events').findOne({ _id: 'e1' })).toEqual({ _id: 'e1', type: 'task.done' });
  });

  it('transaction: an aborted transaction leaves nothing behind for the other client', async () => {
    const database = dbName('txn');
    const raw = client();
    const other = store(database).collection('c');
    const coll = raw.db(database).collection<{ _id: string; n?: number }>('c');
    await coll.insertOne({ _id: 'a', n: 1 });
    const session = raw.startSession();
    try {
      session.startTransaction();
      await coll.updateOne({ _id: 'a' }, { $set: { n: 2 } }, { session });
      await coll.insertOne({ _id: 'b' }, { session });
      expect(await other.find({}, { sort: { _id: 1 } })).toEqual([{ _id: 'a', n: 1 }]);
      await session.abortTransaction();
    } finally {
      await session.endSession();
    }
    expect(await other.find({}, { sort: { _id: 1 } })).toEqual([{ _id: 'a', n: 1 }]);
  });

  it('transaction: the second of two clients committing the same document gets a transient WriteConflict', async () => {
    const database = dbName('txn');
    const one = client();
    const two = client();
    await one.db(database).collection('c').insertOne({ _id: 'doc' as never, n: 0 });
    const s1 = one.startSession();
    const s2 = two.startSession();
    try {
      s1.startTransaction();
      s2.startTransaction();
      await one.db(database).collection('c').updateOne({ _id: 'doc' as never }, { $inc: { n: 1 } }, { session: s1 });
      await two.db(database).collection('c').updateOne({ _id: 'doc' as never }, { $inc: { n: 10 } }, { session: s2 });
      await s1.commitTransaction();
      const err = await errorOf(s2.commitTransaction());
      expect(err).toBeInstanceOf(MongoServerError);
      expect((err as MongoServerError).code).toBe(112);
      expect((err as MongoServerError).hasErrorLabel('TransientTransactionError')).toBe(true);
    } finally {
      await s1.endSession();
      await s2.endSession();
    }
    expect(await one.db(database).collection('c').findOne({ _id: 'doc' as never })).toEqual({ _id: 'doc', n: 1 });
  });

  it('transaction: read-modify-write transactions from two clients lose no update (the driver retries conflicts)', async () => {
    const database = dbName('txn');
    const a = store(database);
    const b = store(database);
    await a.collection('counters').insertOne({ _id: 'c', n: 0 });
    await Promise.all(
      Array.from({ length: 12 }, (_, i) => {
        const s = i % 2 ? a : b;
        return s.withTransaction(async (session) => {
          const doc = await s.collection('counters').findOne({ _id: 'c' }, { session });
          await s.collection('counters').updateOne({ _id: 'c' }, { $set: { n: (doc?.n as number) + 1 } }, { session });
        });
      }),
    );
    expect((await a.collection('counters').findOne({ _id: 'c' }))?.n).toBe(12);
  });
});

describe('mongo-wire: MongoDB replies the driver relies on', () => {
  it('hello: a one-member replica set primary of wire version 21, without topologyVersion', async () => {
    const hello = await client().db('admin').command({ hello: 1 });
    expect(hello).toMatchObject({ isWritablePrimary: true, secondary: false, setName: 'rs0', maxWireVersion: 21, logicalSessionTimeoutMinutes: 30, ok: 1 });
    const me = new URL(server.uri.replace('mongodb://', 'http://')).host;
    expect(hello.hosts).toEqual([me]);
    expect(hello.primary).toBe(me);
    expect(hello.topologyVersion).toBeUndefined();
    expect(hello.maxBsonObjectSize).toBe(16 * 1024 * 1024);
  });

  it('errors: an unknown command is CommandNotFound (59)', async () => {
    const err = await errorOf(client().db('x').command({ frobnicate: 1 }));
    expect(err).toBeInstanceOf(MongoServerError);
    expect((err as MongoServerError).code).toBe(59);
    expect((err as MongoServerError).codeName).toBe('CommandNotFound');
  });

  it('errors: a duplicate key is writeErrors code 11000 with keyPattern, keyValue and the index in errmsg', async () => {
    const coll = client().db(dbName('dup')).collection('users');
    await coll.createIndex({ email: 1 }, { name: 'email_unique', unique: true });
    await coll.insertOne({ _id: 'u1' as never, email: 'x@example.com' });
    const err = await errorOf(coll.insertOne({ _id: 'u2' as never, email: 'x@example.com' }));
    expect(err).toBeInstanceOf(MongoServerError);
    const e = err as MongoServerError;
    expect(e.code).toBe(11000);
    expect(e.keyPattern).toEqual({ email: 1 });
    expect(e.keyValue).toEqual({ email: 'x@example.com' });
    expect(e.message).toMatch(/E11000 duplicate key error collection: \S+\.users index: email_unique dup key/);
    const upd = await errorOf(coll.updateOne({ _id: 'u3' as never }, { $set: { email: 'x@example.com' } }, { upsert: true }));
    expect((upd as MongoServerError).keyValue).toEqual({ email: 'x@example.com' });
    const ids = await errorOf(coll.insertMany([{ _id: 'u9' as never }, { _id: 'u1' as never }]));
    expect((ids as MongoServerError).code).toBe(11000);
    expect((ids as MongoServerError).message).toMatch(/index: _id_ dup key: \{ _id: "u1" \}/);
  });

  it('errors: the adapter maps duplicate keys from a transaction commit path too', async () => {
    const s = store(dbName('dup'));
    const c = s.collection('c');
    await c.insertOne({ _id: 'a' });
    const err = await errorOf(s.withTransaction(async (session) => c.insertOne({ _id: 'a' }, { session })));
    expect(err).toBeInstanceOf(DuplicateKeyError);
    expect((err as DuplicateKeyError).index).toBe('_id_');
  });

  it('cursors: a large result arrives over getMore batches and nothing is lost', async () => {
    const c = client({ monitorCommands: true });
    const started: string[] = [];
    c.on('commandStarted', (e: CommandStartedEvent) => started.push(e.commandName));
    const coll = c.db(dbName('cursor')).collection<{ _id: string; i: number; pad: string }>('big');
    await coll.insertMany(Array.from({ length: 450 }, (_, i) => ({ _id: `d${String(i).padStart(4, '0')}`, i, pad: 'x'.repeat(200) })));
    const docs = await coll.find({ i: { $gte: 10 } }, { sort: { i: -1 } }).toArray();
    expect(docs).toHaveLength(440);
    expect(docs[0]?.i).toBe(449);
    expect(docs.at(-1)?.i).toBe(10);
    expect(started.filter((n) => n === 'getMore').length).toBeGreaterThan(0);
    const small = await coll.find({}, { batchSize: 100, limit: 250 }).toArray();
    expect(small).toHaveLength(250);
    // A cursor closed early is killed on the server.
    const cursor = coll.find({}, { batchSize: 10 });
    await cursor.next();
    await cursor.close();
    expect(started).toContain('killCursors');
  });

  it('findAndModify: lastErrorObject tells an update from an upsert', async () => {
    const coll = client().db(dbName('fam')).collection<{ _id: string; n?: number; k?: string }>('c');
    const inserted = await coll.findOneAndUpdate({ _id: 'a', k: 'x' }, { $inc: { n: 1 } }, { upsert: true, returnDocument: 'after', includeResultMetadata: true });
    expect(inserted.value).toEqual({ _id: 'a', k: 'x', n: 1 });
    expect(inserted.lastErrorObject).toEqual({ n: 1, updatedExisting: false, upserted: 'a' });
    const updated = await coll.findOneAndUpdate({ _id: 'a' }, { $inc: { n: 1 } }, { upsert: true, returnDocument: 'before', projection: { n: 1, _id: 0 }, includeResultMetadata: true });
    expect(updated.value).toEqual({ n: 1 });
    expect(updated.lastErrorObject).toEqual({ n: 1, updatedExisting: true });
    const none = await coll.findOneAndUpdate({ _id: 'zzz' }, { $set: { n: 1 } }, { includeResultMetadata: true });
    expect(none.value).toBeNull();
    expect(none.lastErrorObject).toEqual({ n: 0, updatedExisting: false });
  });

  it('aggregate: countDocuments with skip and limit; other pipelines are refused with a clear error', async () => {
    const coll = client().db(dbName('agg')).collection<{ _id: string; g: number }>('c');
    await coll.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `d${i}`, g: i % 4 })));
    expect(await coll.countDocuments({ g: { $lt: 2 } })).toBe(10);
    expect(await coll.countDocuments({ g: 1 }, { skip: 2, limit: 2 })).toBe(2);
    expect(await coll.countDocuments({ g: 9 })).toBe(0);
    expect(await coll.aggregate([{ $match: { g: 3 } }, { $count: 'total' }]).toArray()).toEqual([{ total: 5 }]);
    expect(await coll.estimatedDocumentCount()).toBe(20);
    const err = await errorOf(coll.aggregate([{ $group: { _id: '$g', n: { $sum: 1 } } }]).toArray());
    expect((err as MongoServerError).message).toMatch(/not supported by mongo-wire/);
    const lookup = await errorOf(coll.aggregate([{ $lookup: { from: 'x', as: 'y', localField: 'a', foreignField: 'b' } }]).toArray());
    expect((lookup as MongoServerError).message).toMatch(/\$lookup is not supported/);
  });

  it('options: what the server cannot honour is refused, never ignored', async () => {
    const coll = client().db(dbName('opts')).collection('c');
    await coll.insertOne({ _id: 'a' as never, s: 'x' });
    const err = await errorOf(coll.find({}, { collation: { locale: 'en', strength: 2 } }).toArray());
    expect((err as MongoServerError).message).toMatch(/collation/);
    const filters = await errorOf(coll.updateOne({ _id: 'a' as never }, { $set: { 'l.$[e]': 1 } }, { arrayFilters: [{ e: 1 }] }));
    expect((filters as MongoServerError).message).toMatch(/arrayFilters/);
    const oid = await errorOf(coll.insertOne({ s: 'no id' }));
    expect((oid as MongoServerError).message).toMatch(/_id must be a string/);
  });

  it('indexes: listIndexes reports what was created; drop forgets data and indexes', async () => {
    const db = client().db(dbName('idx'));
    const coll = db.collection('c');
    await coll.createIndexes([
      { key: { taskId: 1 }, name: 'one_active', unique: true, partialFilterExpression: { status: 'active' } },
      { key: { expiresAt: 1 }, name: 'ttl', expireAfterSeconds: 60 },
    ]);
    await coll.insertOne({ _id: 'a' as never, taskId: 't', status: 'active' });
    const indexes = await coll.listIndexes().toArray();
    expect(indexes).toEqual([
      { v: 2, key: { _id: 1 }, name: '_id_' },
      { v: 2, key: { taskId: 1 }, name: 'one_active', unique: true, partialFilterExpression: { status: 'active' } },
      { v: 2, key: { expiresAt: 1 }, name: 'ttl', expireAfterSeconds: 60 },
    ]);
    const conflict = await errorOf(coll.createIndex({ other: 1 }, { name: 'one_active' }));
    expect((conflict as MongoServerError).code).toBe(86);
    expect((await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name)).toEqual(['c']);
    expect(await coll.drop()).toBe(true);
    expect(await coll.countDocuments({})).toBe(0);
    expect(await db.listCollections().toArray()).toEqual([]);
    // The name is free again, for other keys.
    await coll.createIndex({ other: 1 }, { name: 'one_active' });
    expect((await coll.listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_', 'one_active']);
    await db.dropDatabase();
    const gone = await errorOf(coll.listIndexes().toArray());
    expect((gone as MongoServerError).code).toBe(26);
  });
});

describe('mongo-wire: persistence', () => {
  it('dataDir: documents and indexes survive a restart of the server', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mongo-wire-'));
    try {
      const first = await startMongoWireServer({ dataDir });
      const a = createMongoStore({ uri: first.uri, database: 'app' });
      await a.collection('claims').createIndexes([{ name: 'one_active', keys: { taskId: 1 }, unique: true, partialFilterExpression: { status: 'active' } }]);
      await a.collection('claims').insertOne({ _id: 'c1', taskId: 't1', status: 'active', at: new Date(5) });
      await a.close();
      await first.stop();

      const second = await startMongoWireServer({ dataDir });
      const b = createMongoStore({ uri: second.uri, database: 'app' });
      try {
        expect(await b.collection('claims').findOne({ _id: 'c1' })).toEqual({ _id: 'c1', taskId: 't1', status: 'active', at: new Date(5) });
        expect(isDuplicateKeyError(await errorOf(b.collection('claims').insertOne({ _id: 'c2', taskId: 't1', status: 'active' })), 'one_active')).toBe(true);
      } finally {
        await b.close();
        await second.stop();
      }
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
