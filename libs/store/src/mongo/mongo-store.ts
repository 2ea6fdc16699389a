/**
 * The MongoDB adapter: the official driver with filters and updates passed through unchanged.
 * It only maps errors (duplicate keys, write conflicts) to the port's types and runs transactions
 * on driver sessions. Transactions need a replica set (a single-node one is fine).
 */
import { randomUUID } from 'node:crypto';
import {
  MongoClient,
  MongoError,
  MongoServerError,
  type ClientSession,
  type Collection as MongoCollectionHandle,
  type Db,
  type Document,
  type IndexDescription,
} from 'mongodb';
import { deepFreeze } from '../document/values.js';
import { assertFilterShape, assertStringId, assertUpdateShape } from '../guards.js';
import { notifyCommitted, warnOf, type StoreWarn } from '../on-committed.js';
import { conflictBackoffMs, MAX_TRANSACTION_ATTEMPTS, sleep } from '../retry-policy.js';
import {
  DuplicateKeyError,
  TransactionConflictError,
  type Collection,
  type DeleteResult,
  type DocumentStore,
  type Filter,
  type FindOneAndUpdateOptions,
  type FindOneOptions,
  type FindOptions,
  type IndexSpec,
  type SessionOption,
  type StoreSession,
  type StoredDocument,
  type TransactionOptions,
  type Update,
  type UpdateOptions,
  type UpdateResult,
} from '../port.js';

export interface MongoStoreOptions {
  uri: string;
  database: string;
  appName?: string;
  /** Told what failed in housekeeping (an `onCommitted` callback that threw). Default: `process.emitWarning`. */
  warn?: StoreWarn;
}

const MAX_COMMIT_RETRIES = 5;
const DUPLICATE_KEY = 11000;
const WRITE_CONFLICT = 112;

function withCause<E extends Error>(err: E, cause: unknown): E {
  Object.defineProperty(err, 'cause', { value: cause, enumerable: false, configurable: true, writable: true });
  return err;
}

function duplicateIndexName(err: MongoServerError): string {
  const texts: string[] = [String(err.message)];
  const writeErrors = (err as { writeErrors?: unknown }).writeErrors;
  for (const we of Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : []) {
    const msg = (we as { errmsg?: unknown }).errmsg;
    if (typeof msg === 'string') texts.unshift(msg);
  }
  for (const text of texts) {
    const m = /index: (\S+) dup key/.exec(text);
    if (m?.[1]) return m[1];
  }
  const keyPattern = (err as { keyPattern?: unknown }).keyPattern;
  if (keyPattern && typeof keyPattern === 'object' && Object.keys(keyPattern).join() === '_id') return '_id_';
  return 'unknown';
}

function serverCode(err: MongoServerError): number | undefined {
  if (typeof err.code === 'number') return err.code;
  const writeErrors = (err as { writeErrors?: unknown }).writeErrors;
  const first: unknown = Array.isArray(writeErrors) ? writeErrors[0] : writeErrors;
  const code = (first as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** Translates driver errors into the port's error types; everything else passes unchanged. */
export function mapMongoError(err: unknown): unknown {
  if (err instanceof MongoServerError) {
    const code = serverCode(err);
    if (code === DUPLICATE_KEY) return withCause(new DuplicateKeyError(duplicateIndexName(err), err.message), err);
    if (code === WRITE_CONFLICT || err.hasErrorLabel('TransientTransactionError')) {
      return withCause(new TransactionConflictError(err.message), err);
    }
  } else if (err instanceof MongoError && err.hasErrorLabel('TransientTransactionError')) {
    return withCause(new TransactionConflictError(err.message), err);
  }
  return err;
}

async function mapped<R>(op: () => Promise<R>): Promise<R> {
  try {
    return await op();
  } catch (err) {
    throw mapMongoError(err);
  }
}

function isRetryable(err: unknown): boolean {
  if (err instanceof TransactionConflictError) return true;
  return err instanceof MongoError && err.hasErrorLabel('TransientTransactionError');
}

/** Drops undefined options so the driver applies its own defaults rather than an explicit `undefined`. */
function defined<T extends Record<string, unknown>>(options: T): T {
  for (const key of Object.keys(options)) if (options[key] === undefined) delete options[key];
  return options;
}

/**
 * A `substring` index becomes a regular index on its keys: the server tests a literal regular
 * expression on the index keys of the equality prefix's range without fetching documents.
 */
function toIndexDescription(spec: IndexSpec): IndexDescription {
  const out: IndexDescription = { key: spec.keys, name: spec.name };
  if (spec.unique !== undefined) out.unique = spec.unique;
  if (spec.partialFilterExpression !== undefined) out.partialFilterExpression = spec.partialFilterExpression;
  if (spec.expireAfterSeconds !== undefined) out.expireAfterSeconds = spec.expireAfterSeconds;
  return out;
}

class MongoStore implements DocumentStore {
  readonly kind = 'mongodb';
  readonly client: MongoClient;
  readonly db: Db;
  private readonly warn: StoreWarn;
  private readonly sessions = new WeakMap<StoreSession, ClientSession>();
  private readonly handles = new Map<string, MongoCollection<StoredDocument>>();

  constructor(options: MongoStoreOptions) {
    if (typeof options.uri !== 'string' || options.uri === '') throw new TypeError('createMongoStore: uri is required');
    if (typeof options.database !== 'string' || options.database === '') throw new TypeError('createMongoStore: database is required');
    this.warn = warnOf(options.warn);
    // ignoreUndefined: an optional field left undefined is absent, as in the embedded engine.
    this.client = new MongoClient(options.uri, { appName: options.appName ?? 'planning-service', ignoreUndefined: true });
    this.db = this.client.db(options.database);
  }

  collection<T extends StoredDocument = StoredDocument>(name: string): Collection<T> {
    let handle = this.handles.get(name);
    if (!handle) {
      handle = new MongoCollection(this, name);
      this.handles.set(name, handle);
    }
    return handle as unknown as Collection<T>;
  }

  sessionOf(options: SessionOption | undefined): ClientSession | undefined {
    const session = options?.session;
    if (session === undefined) return undefined;
    const clientSession = this.sessions.get(session);
    if (!clientSession) throw new Error('unknown or finished session: pass the session object given to withTransaction by this store');
    return clientSession;
  }

  async withTransaction<R>(fn: (session: StoreSession) => Promise<R>, options?: TransactionOptions): Promise<R> {
    const clientSession = this.client.startSession();
    try {
      for (let attempt = 1; ; attempt++) {
        const session: StoreSession = Object.freeze({ id: randomUUID() });
        this.sessions.set(session, clientSession);
        clientSession.startTransaction({
          readConcern: { level: 'snapshot' },
          writeConcern: { w: 'majority' },
          readPreference: 'primary',
        });
        try {
          let result: R;
          try {
            result = await fn(session);
          } catch (err) {
            await abortQuietly(clientSession);
            throw err;
          }
          await commitWithRetry(clientSession);
          notifyCommitted(options?.onCommitted, this.warn);
          return result;
        } catch (err) {
          if (clientSession.inTransaction()) await abortQuietly(clientSession);
          if (isRetryable(err) && attempt < MAX_TRANSACTION_ATTEMPTS) {
            await sleep(conflictBackoffMs(attempt));
            continue;
          }
          throw mapMongoError(err);
        } finally {
          this.sessions.delete(session);
        }
      }
    } finally {
      await clientSession.endSession();
    }
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 });
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

async function abortQuietly(session: ClientSession): Promise<void> {
  try {
    if (session.inTransaction()) await session.abortTransaction();
  } catch {
    // The server already dropped the transaction (that is often why we are aborting).
  }
}

async function commitWithRetry(session: ClientSession): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await session.commitTransaction();
      return;
    } catch (err) {
      if (err instanceof MongoError && err.hasErrorLabel('UnknownTransactionCommitResult') && i < MAX_COMMIT_RETRIES) continue;
      throw err;
    }
  }
}

class MongoCollection<T extends StoredDocument> implements Collection<T> {
  private readonly coll: MongoCollectionHandle<Document>;

  constructor(
    private readonly store: MongoStore,
    readonly name: string,
  ) {
    this.coll = store.db.collection(name);
  }

  async createIndexes(specs: readonly IndexSpec[]): Promise<void> {
    if (specs.length === 0) return;
    await mapped(() => this.coll.createIndexes(specs.map(toIndexDescription)));
  }

  async dropIndexes(names: readonly string[]): Promise<void> {
    if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) throw new TypeError('dropIndexes needs an array of index names');
    for (const name of names) {
      try {
        await this.coll.dropIndex(name);
      } catch (err) {
        // 27 IndexNotFound, 26 NamespaceNotFound (no collection yet): nothing to drop.
        const code = (err as { code?: unknown }).code;
        if (code === 27 || code === 26) continue;
        throw mapMongoError(err);
      }
    }
  }

  async insertOne(doc: T, options?: SessionOption): Promise<void> {
    assertStringId(doc);
    const session = this.store.sessionOf(options);
    await mapped(() => this.coll.insertOne({ ...(doc as Document) }, { session }));
  }

  async insertMany(docs: readonly T[], options?: SessionOption): Promise<void> {
    docs.forEach(assertStringId);
    if (docs.length === 0) return;
    const session = this.store.sessionOf(options);
    await mapped(() => this.coll.insertMany(docs.map((d) => ({ ...(d as Document) })), { ordered: true, session }));
  }

  async findOne(filter: Filter, options?: FindOneOptions): Promise<T | null> {
    assertFilterShape(filter);
    const session = this.store.sessionOf(options);
    const doc = await mapped(() => this.coll.findOne(filter, defined({ session, sort: options?.sort, projection: options?.projection })));
    // `readonly`: the driver's documents are this read's own; frozen, as the port promises.
    return (options?.readonly === true ? deepFreeze(doc) : doc) as T | null;
  }

  async find(filter: Filter, options?: FindOptions): Promise<T[]> {
    assertFilterShape(filter);
    const session = this.store.sessionOf(options);
    const docs = await mapped(() =>
      this.coll
        .find(filter, defined({ session, sort: options?.sort, projection: options?.projection, skip: options?.skip, limit: options?.limit }))
        .toArray(),
    );
    return (options?.readonly === true ? deepFreeze(docs) : docs) as unknown as T[];
  }

  async countDocuments(filter: Filter, options?: SessionOption): Promise<number> {
    assertFilterShape(filter);
    const session = this.store.sessionOf(options);
    return mapped(() => this.coll.countDocuments(filter, { session }));
  }

  async updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    assertFilterShape(filter);
    assertUpdateShape(update);
    const session = this.store.sessionOf(options);
    const res = await mapped(() => this.coll.updateOne(filter, update, defined({ session, upsert: options?.upsert })));
    return toUpdateResult(res);
  }

  async updateMany(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    assertFilterShape(filter);
    assertUpdateShape(update);
    const session = this.store.sessionOf(options);
    const res = await mapped(() => this.coll.updateMany(filter, update, defined({ session, upsert: options?.upsert })));
    return toUpdateResult(res);
  }

  async findOneAndUpdate(filter: Filter, update: Update, options?: FindOneAndUpdateOptions): Promise<T | null> {
    assertFilterShape(filter);
    assertUpdateShape(update);
    const session = this.store.sessionOf(options);
    const doc = await mapped(() =>
      this.coll.findOneAndUpdate(
        filter,
        update,
        defined({
          session,
          sort: options?.sort,
          upsert: options?.upsert,
          projection: options?.projection,
          // The driver defaults to 'before'; the port defaults to 'after'.
          returnDocument: options?.returnDocument ?? 'after',
          includeResultMetadata: false as const,
        }),
      ),
    );
    return doc as T | null;
  }

  async findOneAndDelete(filter: Filter, options?: FindOneOptions): Promise<T | null> {
    assertFilterShape(filter);
    const session = this.store.sessionOf(options);
    const doc = await mapped(() =>
      this.coll.findOneAndDelete(
        filter,
        defined({ session, sort: options?.sort, projection: options?.projection, includeResultMetadata: false as const }),
      ),
    );
    return doc as T | null;
  }

  async deleteOne(filter: Filter, options?: SessionOption): Promise<DeleteResult> {
    assertFilterShape(filter);
    const session = this.store.sessionOf(options);
    const res = await mapped(() => this.coll.deleteOne(filter, { session }));
    return { deletedCount: res.deletedCount };
  }

  async deleteMany(filter: Filter, options?: SessionOption): Promise<DeleteResult> {
    assertFilterShape(filter);
    const session = this.store.sessionOf(options);
    const res = await mapped(() => this.coll.deleteMany(filter, { session }));
    return { deletedCount: res.deletedCount };
  }
}

function toUpdateResult(res: { matchedCount: number; modifiedCount: number; upsertedId: unknown }): UpdateResult {
  const out: UpdateResult = { matchedCount: res.matchedCount, modifiedCount: res.modifiedCount };
  if (res.upsertedId !== null && res.upsertedId !== undefined) out.upsertedId = String(res.upsertedId);
  return out;
}

/** Creates the MongoDB store. The driver connects on first use; `ping()` checks the connection. */
export function createMongoStore(options: MongoStoreOptions): DocumentStore {
  return new MongoStore(options);
}
