/**
 * The document store port. Repositories are written once against this interface; the embedded
 * engine and the MongoDB driver adapter implement it. Filters and update documents are MongoDB's
 * own (the embedded engine evaluates them, the MongoDB adapter passes them through), so the
 * contract suite can prove both behave alike for every operation the repositories use.
 */

/** Every stored document has a string `_id` chosen by the application. */
export interface StoredDocument {
  _id: string;
  [field: string]: unknown;
}

/** A MongoDB query filter document (`{ status: { $in: [...] } }`). */
export type Filter = Record<string, unknown>;

/** A MongoDB update document (`{ $set: {...}, $inc: {...} }`). Replacement documents are not supported. */
export type Update = Record<string, unknown>;

export type SortSpec = Record<string, 1 | -1>;

export type Projection = Record<string, 0 | 1>;

export interface IndexSpec {
  /** Stable index name; creating the same name twice is a no-op. */
  name: string;
  keys: Record<string, 1 | -1>;
  unique?: boolean;
  /** Only documents matching this filter are indexed (and checked for uniqueness). */
  partialFilterExpression?: Filter;
  /**
   * Documents are removed some time after the Date in the (single) indexed field plus this many
   * seconds. Housekeeping only: correctness never depends on when expiry runs.
   */
  expireAfterSeconds?: number;
  /**
   * A substring index: it serves literal text conditions on the **last** key, a string field
   * (`{ field: { $regex: escapeRegExp(text) } }`, case-sensitive, no `i` flag). The earlier keys
   * are equality prefixes the condition usually comes with (`{ workspaceId: 1, searchText: 1 }`).
   * The embedded adapter keeps a trigram full-text index (SQLite FTS5) of the field, updated in the
   * same transaction as the document, and uses it for text of three or more characters; MongoDB
   * gets a regular index on the keys, whose keys the server scans for the regular expression.
   * Not combinable with `unique`, `partialFilterExpression` or `expireAfterSeconds`.
   */
  substring?: boolean;
}

/**
 * A transaction handle. Operations that pass it in their options run inside the transaction:
 * they see the transaction's own writes, and their writes become visible to others only when the
 * transaction commits.
 */
export interface StoreSession {
  readonly id: string;
}

export interface SessionOption {
  session?: StoreSession;
}

/**
 * `readonly: true` asks for documents the caller will only read. They come back deep-frozen
 * (changing one throws in strict mode), and an adapter may hand every reader of the same stored
 * content the same objects: the embedded store returns one frozen copy per stored version of a
 * row (and projection), so a caller can memoise what it derives from a document by the
 * document's identity (a WeakMap), and a repeated read copies nothing. Inside a transaction, and
 * with MongoDB, each read still makes its own (frozen) copy. Dates inside are shared as well:
 * never call their setters.
 */
export interface ReadonlyOption {
  readonly?: boolean;
}

export interface FindOptions extends SessionOption, ReadonlyOption {
  sort?: SortSpec;
  limit?: number;
  skip?: number;
  projection?: Projection;
}

export interface FindOneOptions extends SessionOption, ReadonlyOption {
  sort?: SortSpec;
  projection?: Projection;
}

export interface UpdateOptions extends SessionOption {
  upsert?: boolean;
}

export interface FindOneAndUpdateOptions extends SessionOption {
  sort?: SortSpec;
  upsert?: boolean;
  /** Which version of the document to return. Default `after`. */
  returnDocument?: 'before' | 'after';
  projection?: Projection;
}

export interface UpdateResult {
  matchedCount: number;
  modifiedCount: number;
  upsertedId?: string;
}

export interface DeleteResult {
  deletedCount: number;
}

export interface Collection<T extends StoredDocument = StoredDocument> {
  readonly name: string;
  /** Creates the indexes that do not exist yet. Idempotent. */
  createIndexes(specs: readonly IndexSpec[]): Promise<void>;
  /**
   * Removes the named indexes (a repository that replaces an index with another: its old rules
   * and its cost on every write go). Names that do not exist are ignored. Idempotent.
   */
  dropIndexes(names: readonly string[]): Promise<void>;
  /** Throws DuplicateKeyError when `_id` or a unique index is violated. */
  insertOne(doc: T, options?: SessionOption): Promise<void>;
  /** Ordered insert: stops at the first failure (documents before it stay inserted). */
  insertMany(docs: readonly T[], options?: SessionOption): Promise<void>;
  findOne(filter: Filter, options?: FindOneOptions): Promise<T | null>;
  find(filter: Filter, options?: FindOptions): Promise<T[]>;
  countDocuments(filter: Filter, options?: SessionOption): Promise<number>;
  updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult>;
  updateMany(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult>;
  /** Atomic conditional update: the filter and the update are applied as one step. */
  findOneAndUpdate(filter: Filter, update: Update, options?: FindOneAndUpdateOptions): Promise<T | null>;
  findOneAndDelete(filter: Filter, options?: FindOneOptions): Promise<T | null>;
  deleteOne(filter: Filter, options?: SessionOption): Promise<DeleteResult>;
  deleteMany(filter: Filter, options?: SessionOption): Promise<DeleteResult>;
}

export interface DocumentStore {
  /** The adapter's technology, for diagnostics and readiness (`embedded`, `mongodb`). */
  readonly kind: string;
  /**
   * True when every writer of this store is in this process: the embedded SQLite store holds its
   * file with an exclusive lock (a second process is refused) or lives in memory. Coordination
   * meant for other processes (the outbox relay's leases) can then be left out. Absent or false:
   * other processes may share the data (MongoDB).
   */
  readonly exclusive?: boolean;
  collection<T extends StoredDocument = StoredDocument>(name: string): Collection<T>;
  /**
   * Runs `fn` in a transaction and commits it; retries `fn` when the transaction hits a write
   * conflict (TransactionConflictError) up to a bounded number of attempts. Anything else thrown
   * by `fn` aborts the transaction and is rethrown. `fn` must be safe to run more than once.
   */
  withTransaction<R>(fn: (session: StoreSession) => Promise<R>, options?: TransactionOptions): Promise<R>;
  /** Resolves when the backend answers; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface TransactionOptions {
  /**
   * Called once, when the transaction has committed: every later read and transaction of this
   * store sees its writes. The returned promise may resolve later (the embedded store resolves once
   * the commit is on disk; a commit that is visible but not yet flushed is lost with everything
   * after it, never alone). A caller that runs transactions one at a time (on one counter, say)
   * can start the next here instead of waiting for the disk. Not called when the transaction fails.
   */
  onCommitted?: () => void;
}

/** A unique index (or `_id`) was violated. */
export class DuplicateKeyError extends Error {
  readonly index: string;
  constructor(index: string, message = `duplicate key for index ${index}`) {
    super(message);
    this.name = 'DuplicateKeyError';
    this.index = index;
  }
}

/** A transaction lost a write conflict; `withTransaction` retries it. */
export class TransactionConflictError extends Error {
  constructor(message = 'transaction write conflict') {
    super(message);
    this.name = 'TransactionConflictError';
  }
}

export function isDuplicateKeyError(err: unknown, index?: string): err is DuplicateKeyError {
  return err instanceof DuplicateKeyError && (index === undefined || err.index === index);
}
