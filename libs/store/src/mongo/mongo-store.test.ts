import { randomBytes } from 'node:crypto';
import { MongoClient, MongoServerError } from 'mongodb';
import { afterAll, describe, expect, it } from 'vitest';
import { describeStoreContract } from '../contract/store-contract.js';
import { DuplicateKeyError, TransactionConflictError } from '../port.js';
import { createMongoStore, mapMongoError } from './mongo-store.js';

const uri = process.env.MONGODB_URI;

// MongoDB is not installable on the build machines: the contract runs against it only where
// MONGODB_URI points at a replica set (transactions need one; a single-node replica set is fine).
describe.runIf(!!uri)('mongodb adapter against a live server', () => {
  const database = `planning_store_test_${randomBytes(6).toString('hex')}`;

  describeStoreContract('mongodb', async () => createMongoStore({ uri: uri as string, database, appName: 'planning-store-tests' }));

  afterAll(async () => {
    const client = new MongoClient(uri as string);
    try {
      await client.db(database).dropDatabase();
    } finally {
      await client.close();
    }
  });
});

describe('mongodb adapter: options', () => {
  // The client does not connect until the first operation: these need no server.
  it('refuses a warn that is not a function, a missing uri or database, when the store is made', () => {
    expect(() => createMongoStore({ uri: 'mongodb://127.0.0.1:1', database: 'x', warn: 'log' as never })).toThrow(/warn must be a function/);
    expect(() => createMongoStore({ uri: '', database: 'x' })).toThrow(/uri is required/);
    expect(() => createMongoStore({ uri: 'mongodb://127.0.0.1:1', database: '' })).toThrow(/database is required/);
  });
});

describe('mongodb adapter: error mapping', () => {
  it('errors: duplicate key errors become DuplicateKeyError with the index name', () => {
    const err = new MongoServerError({
      message: 'E11000 duplicate key error collection: db.claims index: one_active_claim dup key: { taskId: "t1" }',
      code: 11000,
    });
    const mapped = mapMongoError(err);
    expect(mapped).toBeInstanceOf(DuplicateKeyError);
    expect((mapped as DuplicateKeyError).index).toBe('one_active_claim');
    expect((mapped as Error).cause).toBe(err);
  });

  it('errors: write conflicts and transient transaction errors become TransactionConflictError', () => {
    const conflict = new MongoServerError({ message: 'WriteConflict error', code: 112 });
    expect(mapMongoError(conflict)).toBeInstanceOf(TransactionConflictError);
    const transient = new MongoServerError({ message: 'no such transaction', code: 251, errorLabels: ['TransientTransactionError'] });
    expect(mapMongoError(transient)).toBeInstanceOf(TransactionConflictError);
  });

  it('errors: anything else passes through unchanged', () => {
    const other = new MongoServerError({ message: 'unknown operator: $bogus', code: 2 });
    expect(mapMongoError(other)).toBe(other);
    const plain = new Error('x');
    expect(mapMongoError(plain)).toBe(plain);
  });

  it('store: creating the adapter does not connect; bad options are refused', async () => {
    const store = createMongoStore({ uri: 'mongodb://127.0.0.1:1', database: 'unused' });
    expect(store.kind).toBe('mongodb');
    await store.close();
    expect(() => createMongoStore({ uri: '', database: 'x' })).toThrow(/uri/);
    expect(() => createMongoStore({ uri: 'mongodb://127.0.0.1:1', database: '' })).toThrow(/database/);
  });
});
