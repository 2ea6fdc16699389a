/**
 * The embedded document store on SQLite (better-sqlite3): one table per collection holding each
 * document as JSON (SQLite's binary JSONB), one index table per port index (keys encoded so that
 * byte order is MongoDB's order; unique indexes are primary keys over those bytes), a trigram
 * FTS5 table per substring index, all kept in step inside the same SQLite transaction.
 *
 * better-sqlite3 is synchronous: every operation runs from its first read to its last write
 * without yielding, so on the one JavaScript thread it is atomic towards every other operation
 * (what the repositories' find-and-modify races rely on). Transactions are optimistic, as in
 * MongoDB: writes are buffered per transaction and applied at commit in one SQLite transaction,
 * after checking that no document the transaction read or wrote changed meanwhile (first
 * committer wins). Operations resolve only once their commit is on disk (`durability.ts`).
 *
 * Writes made in the same turn of the event loop (single-document writes and transaction
 * commits alike) are applied together, in the order they were made, in one SQLite transaction
 * with a savepoint per write (`write`, `drain`): each is still all or nothing, and a read runs
 * only after every write made before it. Together they write the pages they share (an index
 * page, the tail of an append-only collection) to the write-ahead log once: 50 concurrent task
 * updates wrote 22 KB of log each instead of 56 KB.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import Database from './driver.js';
import { encodeJson, decodeJson } from '../document/codec.js';
import { compileFilter, type Matcher } from '../document/filter.js';
import { ID_INDEX, normalizeIndexSpec, sameIndexSpec, toIndexSpec, type NormalizedIndexSpec } from '../document/index-spec.js';
import { encodeKey } from '../document/keys.js';
import { compileProjection, pathValues, splitPath, type CompiledProjection } from '../document/paths.js';
import { applyUpdate, compileUpdate, upsertSeed } from '../document/update.js';
import { cloneValue, deepFreeze, isPlainObject, normalizeValue } from '../document/values.js';
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
  type Projection,
  type SessionOption,
  type SortSpec,
  type StoreSession,
  type StoredDocument,
  type TransactionOptions,
  type Update,
  type UpdateOptions,
  type UpdateResult,
} from '../port.js';
import { notifyCommitted, warnOf, type StoreWarn } from '../on-committed.js';
import { conflictBackoffMs, MAX_TRANSACTION_ATTEMPTS, sleep } from '../retry-policy.js';
import { DocCache } from './doc-cache.js';
import { Durability, syncDirectory } from './durability.js';
import { chunkEdits, chunkRowid, chunkSlots } from './text-chunks.js';
import { plan, type Plan, type PlanChoice, type PlanRequest, type PlannerCollection, type PlannerIndex, type PlannerText } from './planner.js';
import { compileSort, keyed, topK, type Keyed, type SortKey } from './sort.js';
import { addressable, jsonPathSql } from './sql-filter.js';

type Doc = Record<string, unknown>;
type Statement = BetterSqlite3.Statement;

export const MEMORY = ':memory:';

export interface SqliteStoreOptions {
  /** The database file, or `:memory:` (tests: the data lives as long as the store). */
  path: string;
  /** Time source for TTL expiry (default: the system clock). */
  clock?: () => Date;
  /** How often expired documents are removed (default 60 000 ms, like MongoDB's TTL monitor). */
  expirySweepMs?: number;
  /** SQLite page cache per store in KiB (default 16 384: 16 MiB). */
  cacheKiB?: number;
  /**
   * Decoded documents kept for reads, in KiB of their JSON (default 8 192: 8 MiB; 0: none).
   * Callers always get copies; see `doc-cache.ts`.
   */
  documentCacheKiB?: number;
  /**
   * How long after the last write that changed indexed text the substring indexes catch up with
   * the rows still pending (default 20 ms; they also catch up every 128 rows, and at close).
   */
  textIndexDelayMs?: number;
  /**
   * Query results kept per collection (default 64; 0: none): a query run again while its
   * collection has had no write since answers from the rows it found, without running again.
   */
  keptResults?: number;
  /** Told what opening the file changed in it (a format upgrade), for the process's log. */
  log?: (details: Record<string, unknown>, message: string) => void;
  /**
   * Told what failed in the store's housekeeping (an expiry sweep, a catch-up of the substring
   * indexes, an `onCommitted` callback that threw), for the process's log. Default:
   * `process.emitWarning`.
   */
  warn?: StoreWarn;
  /**
   * Told each flush of the write-ahead log to the disk (a file store only): how long the
   * `fdatasync` took, in seconds, and how many commits it made durable (for the process's metrics).
   */
  onFlush?: (seconds: number, commits: number) => void;
}

export interface QueryExplain {
  /** `IDHACK`: `_id` lookups; `IXSCAN`: an index table; `FTS`: a substring index; `COLLSCAN`: every document. */
  plan: 'IDHACK' | 'IXSCAN' | 'FTS' | 'COLLSCAN';
  index?: string;
  /** An `IXSCAN` whose entries must also be in this index's range (or the substring index's candidates): gathered once, checked before a document is read. */
  filter?: string;
  /** The statement that ran (its first phase, when the result was sorted here). */
  sql: string;
  /** Rows SQLite handed over (documents that passed the filter's SQL form, or could not be decided there). */
  docsExamined: number;
  /** Of those, how many SQL could not decide (evaluated by mingo). */
  docsEvaluated: number;
  nReturned: number;
  /** Sorted after reading the matches rather than read in order. */
  inMemorySort: boolean;
  /** Answered from the rows the same query found before (no write to the collection since); the rest describes that run. */
  kept?: boolean;
}

export interface SqliteCollection<T extends StoredDocument = StoredDocument> extends Collection<T> {
  /** Runs the query like `find` and reports how it ran (tests and diagnostics). */
  explain(filter: Filter, options?: FindOptions): Promise<QueryExplain>;
}

/**
 * A transaction begun without a function (`withTransaction` is built on it), for callers that
 * map a client's start/commit/abort onto the store.
 */
export interface StoreTransaction {
  readonly session: StoreSession;
  readonly state: 'active' | 'committed' | 'aborted';
  /**
   * Validates and applies every buffered write at once; throws TransactionConflictError or
   * DuplicateKeyError (the transaction has ended either way). `onCommitted`: see TransactionOptions.
   */
  commit(onCommitted?: () => void): Promise<void>;
  abort(): void;
}

export interface SqliteDocumentStore extends DocumentStore {
  readonly kind: 'sqlite';
  /** The database file, or `:memory:`. */
  readonly path: string;
  collection<T extends StoredDocument = StoredDocument>(name: string): SqliteCollection<T>;
  /** Starts a transaction without running it. No retries: on TransactionConflictError, begin again. */
  beginTransaction(): StoreTransaction;
  /** Removes documents whose TTL has passed, now; returns how many. The sweep timer calls this. */
  sweepExpired(): Promise<number>;
  /** What the store keeps in memory and the bounds it keeps it within (diagnostics and tests; README "Memory"). */
  memoryUse(): StoreMemoryUse;
}

export interface StoreMemoryUse {
  /** Prepared statements the store holds (each is SQLite memory: its compiled program). */
  statements: number;
  /** Of those, in the statement cache: at most `statementCacheLimit`; the rest are one set per collection, index and substring index. */
  cachedStatements: number;
  statementCacheLimit: number;
  /** Plans of queries kept to run again (at most 256 per collection), and access paths kept by shape of query (at most 512 per collection). */
  plans: number;
  shapes: number;
  /** Query results kept (at most `keptResults` per collection), and the row ids they hold (at most 1,000 each). */
  keptResults: number;
  keptRows: number;
  /** The document cache: JSON length of the documents it holds, and its budget (`documentCacheKiB`). */
  documentCacheBytes: number;
  documentCacheLimitBytes: number;
  /** SQLite's page cache limit (`cacheKiB`, `PRAGMA cache_size`). */
  pageCacheLimitKiB: number;
}

const DEFAULT_SWEEP_MS = 60_000;
/** Versions reserved per write of the reservation (one catalog write per this many document writes). */
const VERSION_BLOCK = 10_000;
/** Prepared statements kept per store (per shape of filter and sort). */
const STATEMENT_CACHE = 1_000;
/** Expired documents removed per sweep (one transaction; a larger backlog continues right after). */
const SWEEP_LIMIT = 5_000;
const DEFAULT_DOCUMENT_CACHE_KIB = 8_192;

interface Row {
  rid: number;
  v: number;
  doc: Doc;
}

/** A row's document before it is read (replaced before the row leaves `select`). */
const NOT_READ: Doc = Object.freeze({}) as Doc;

interface IndexState extends PlannerIndex {
  readonly no: number;
  readonly spec: NormalizedIndexSpec;
  readonly segs: readonly string[][];
  readonly partial: Matcher | undefined;
  multikey: boolean;
  insert?: Statement;
  remove?: Statement;
  find?: Statement;
}

interface TextState extends PlannerText {
  readonly no: number;
  readonly spec: NormalizedIndexSpec;
  readonly segs: readonly string[];
  readonly vocab: string;
  insert?: Statement;
  remove?: Statement;
  docs?: Statement;
  /** Rows written to or removed from the FTS table so far (dates the cached trigram counts). */
  changes: number;
  /** Rows in the pending table (about: a rolled-back write may leave it high until the next flush). */
  pendingRows: number;
  markPending?: Statement;
  /** The pending rows with their text (pendingTextsSql). */
  pendingDocs?: Statement;
  /** One row's document as JSON text (a pending row whose text came back with U+FFFD). */
  docJson?: Statement;
  /** Documents per trigram as last counted, with `changes` then (estimates for the planner). */
  counts: Map<string, { n: number; at: number }>;
}

/**
 * Rows whose text changed, gathered before the FTS5 table is brought up to date in one go: FTS5
 * writes a new segment (and merges) at every commit that changed it, so one row per commit costs
 * several times what a batch costs per row.
 */
const TEXT_BATCH = 128;
/** Pending text rows are indexed this long after the last write that left some (ms). */
const TEXT_DELAY_MS = 20;

/**
 * The file's layout. 2: a substring index holds a document's text in chunks (text-chunks.ts);
 * a file in format 1 (the whole text in one FTS5 row) is brought to 2 when it is opened.
 */
const FORMAT = 2;

/**
 * FTS5's `deletemerge` for the substring indexes: a segment is merged (its deleted rows dropped)
 * once this share of its rows (%) is deleted. FTS5's default, 10, rewrote large segments over
 * and over under a stream of updates (a title edit cost about twice what it costs at 50); at 50
 * a segment holds at most about as many deleted rows as live ones.
 */
const DELETE_MERGE = 50;
const deleteMergeSql = (fts: string): string => `INSERT INTO ${fts} (${fts}, rank) VALUES ('deletemerge', ${DELETE_MERGE})`;

/** Trigram counts kept per substring index (cleared when full). */
const TRIGRAM_COUNTS = 20_000;

/**
 * A query's plan and the text of its statements, kept for the same query again (see
 * `SqliteStore.select`). The statements themselves are taken from the store's statement cache by
 * that text, never held here: a plan kept must not keep a statement the cache let go (each is
 * SQLite memory, its compiled program), or the statements held would grow with the collections
 * and shapes of query seen rather than stay within STATEMENT_CACHE.
 */
interface PlanMemo {
  plan: Plan;
  /** The statement that runs it (also reported by explain). */
  sql: string;
  /** An ordered walk's statement with the page's LIMIT, rows as arrays (see `select`). */
  limitedSql?: string;
  /** `CollState.epoch` when planned. */
  epoch: number;
}

/** Plans kept per collection (the least recently used go first). */
const PLAN_MEMOS = 256;
/** Query results kept per collection, and the most rows one may hold (`CollState.results`). */
const RESULT_MEMOS = 64;
const RESULT_ROWS = 1_000;
/** Access paths kept per collection, by the shape of their query (the oldest go first). */
const PLAN_SHAPES = 512;
/** A collection's writes after which its plans are made again (they chose by counts then). */
const PLAN_WRITES = 2_000;

class CollState implements PlannerCollection {
  readonly indexes: IndexState[] = [];
  readonly texts: TextState[] = [];
  /** Plans of recent queries, by the query's exact text (filter values included). */
  readonly plans = new Map<string, PlanMemo>();
  /**
   * The rows recent queries found (by the query's exact text), each with the collection's write
   * count then (`writes`): while it is unchanged, the same query finds the same rows. Kept with
   * the plans' epoch too, so a new index (or one turned multikey) shows in `explain` at once.
   */
  readonly results = new Map<string, { writes: number; epoch: number; rids: number[]; versions: number[]; explain: QueryExplain }>();
  /**
   * The access path each shape of query took when last planned by counting (`shapeOf`): a query
   * of the same shape with other values takes it without counting again (until `epoch` moves).
   */
  readonly shapes = new Map<string, { choice: PlanChoice; epoch: number }>();
  /**
   * Advanced when kept plans may no longer be right (an index turned multikey or was added) or
   * may have become slow (PLAN_WRITES writes since they were chosen by counting).
   */
  epoch = 0;
  writes = 0;
  /** Documents held (kept up to date by writes; an estimate after a rolled-back write). */
  docs: number | undefined;
  byId?: Statement;
  metaById?: Statement;
  /** A document's JSON by row id, and several (a JSON array of row ids). */
  jsonByRid?: Statement;
  jsonByRids?: Statement;
  insertDoc?: Statement;
  updateDoc?: Statement;
  deleteDoc?: Statement;

  constructor(
    private readonly store: SqliteStore,
    readonly no: number,
    readonly name: string,
  ) {}

  get table(): string {
    return `c_${this.no}`;
  }

  docCount(): number {
    this.docs ??= (this.store.prepare(`SELECT count(*) AS n FROM ${this.table}`).get() as { n: number }).n;
    return this.docs;
  }

  trigramDocs(text: PlannerText, trigram: string): number {
    const t = text as TextState;
    // Counting reads the trigram's whole doclist: a count is reused until the index has changed
    // by an eighth of it (at least 64 rows). It only steers the choice of plan, never a result.
    const known = t.counts.get(trigram);
    if (known !== undefined && t.changes - known.at <= Math.max(64, known.n >> 3)) return known.n;
    t.docs ??= this.store.prepare(`SELECT doc FROM ${t.vocab} WHERE term = ?`);
    const n = (t.docs.get(trigram) as { doc: number } | undefined)?.doc ?? 0;
    if (t.counts.size >= TRIGRAM_COUNTS) t.counts.clear();
    t.counts.set(trigram, { n, at: t.changes });
    return n;
  }

  countRows(sql: string, params: Record<string, unknown>): number {
    return (this.store.prepare(sql).get(params) as { n: number }).n;
  }
}

interface TxnCollection {
  /** The transaction's version of each document it wrote (`null`: deleted). */
  readonly writes: Map<string, Doc | null>;
  /** Committed version of each document when the transaction first read or wrote it (0: absent). */
  readonly base: Map<string, number>;
  /** Unique keys of the buffered documents, per index: key → `_id`. */
  readonly uniq: Map<string, Map<string, string>>;
}

class Txn {
  readonly session: StoreSession = Object.freeze({ id: randomUUID() });
  state: 'active' | 'committed' | 'aborted' = 'active';
  /** A conflict was already seen: the commit must fail even if `fn` swallowed the error. */
  conflict = false;
  readonly colls = new Map<string, TxnCollection>();

  coll(name: string): TxnCollection {
    let tc = this.colls.get(name);
    if (!tc) {
      tc = { writes: new Map(), base: new Map(), uniq: new Map() };
      this.colls.set(name, tc);
    }
    return tc;
  }
}

interface QueryOptions {
  sort?: SortSpec;
  skip?: number;
  limit?: number;
}

interface WriteOutcome {
  matched: number;
  modified: number;
  upsertedId?: string;
  before?: Doc;
  after?: Doc;
}

function assertOptions(options: unknown, allowed: readonly string[], method: string): void {
  if (options === undefined) return;
  if (!isPlainObject(options)) throw new TypeError(`${method}: options must be a plain object`);
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) throw new TypeError(`${method}: unknown option '${key}' (allowed: ${allowed.join(', ')})`);
  }
}

function countOption(value: unknown, name: string): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw new TypeError(`${name} must be a non-negative integer`);
  return value;
}

function assertCollectionName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name === '' || name.length > 200 || name.includes('$') || name.includes('\0') || name.startsWith('system.')) {
    throw new TypeError(`invalid collection name '${String(name)}'`);
  }
}

function normalizeDocument(doc: unknown): Doc {
  if (!isPlainObject(doc)) throw new TypeError('document must be a plain object');
  if (typeof doc._id !== 'string') throw new TypeError('document _id must be a string chosen by the application');
  return normalizeValue(doc, '') as Doc;
}

/** An SQLite error after some of a document's statements ran: `writePartial` keeps nothing. */
class HalfWritten extends Error {
  constructor(override readonly cause: unknown) {
    super('a document failed part-way through its write');
  }
}

function isConstraintError(err: unknown): boolean {
  return err instanceof Database.SqliteError && err.code.startsWith('SQLITE_CONSTRAINT');
}

/** What one write changes in one index. */
interface IndexChange {
  idx: IndexState;
  remove: Buffer[][];
  add: Buffer[][];
  multikey: boolean;
}

/** A document's entries in one index: their encoded keys, and whether an array supplied them. */
interface IndexEntries {
  keys: Buffer[][];
  multikey: boolean;
}

const keyString = (key: readonly Buffer[]): string => (key.length === 1 ? (key[0] as Buffer).toString('latin1') : key.map((b) => b.toString('latin1')).join('\u0100'));

/** Whether two encoded keys are the same, field by field. */
function sameKey(a: readonly Buffer[], b: readonly Buffer[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!(a[i] as Buffer).equals(b[i] as Buffer)) return false;
  return true;
}

function dedupe(values: unknown[]): Buffer[] {
  const seen = new Map<string, Buffer>();
  for (const v of values) {
    const k = encodeKey(v);
    seen.set(k.toString('latin1'), k);
  }
  return [...seen.values()];
}

/** No entries (a missing document, or one a partial index leaves out); never changed by callers. */
const NO_ENTRIES: IndexEntries = { keys: [], multikey: false };

/** What `scalarAt` answers when the path meets an array: `pathValues` must walk it. */
const VIA_ARRAY = Symbol('via array');

/**
 * The one value `pathValues` finds at a path that meets no array (missing: null), without its
 * arrays and state; VIA_ARRAY when an array is on the way or at the end.
 */
function scalarAt(doc: Doc, segs: readonly string[]): unknown {
  let cur: unknown = doc;
  for (const seg of segs) {
    if (Array.isArray(cur)) return VIA_ARRAY;
    if (!isPlainObject(cur)) return null;
    cur = cur[seg];
  }
  if (Array.isArray(cur)) return VIA_ARRAY;
  return cur === undefined ? null : cur;
}

function entriesOf(idx: IndexState, doc: Doc | null): IndexEntries {
  if (!doc || (idx.partial && !idx.partial(doc))) return NO_ENTRIES;
  // Most documents reach every indexed field through objects only: one entry, no arrays built.
  const key: Buffer[] = [];
  for (const segs of idx.segs) {
    const value = scalarAt(doc, segs);
    if (value === VIA_ARRAY) return entriesThroughArrays(idx, doc);
    key.push(encodeKey(value));
  }
  return { keys: [key], multikey: false };
}

/** `entriesOf` for a document with an array on an indexed path: an entry per element. */
function entriesThroughArrays(idx: IndexState, doc: Doc): IndexEntries {
  let multiField = -1;
  const perField: Buffer[][] = [];
  for (let i = 0; i < idx.segs.length; i++) {
    const { values, viaArray } = pathValues(doc, idx.segs[i] as string[]);
    if (viaArray) {
      if (multiField !== -1) throw new TypeError(`cannot index parallel arrays [${idx.fields[multiField]}] [${idx.fields[i]}] (index ${idx.name})`);
      multiField = i;
    }
    perField.push(values.length === 1 ? [encodeKey(values[0])] : dedupe(values));
  }
  if (multiField === -1) return { keys: [perField.map((v) => v[0] as Buffer)], multikey: false };
  const keys = (perField[multiField] as Buffer[]).map((v) => perField.map((vals, i) => (i === multiField ? v : (vals[0] as Buffer))));
  return { keys, multikey: true };
}

/**
 * Whether both documents hold the same scalar (or date), or arrays of the same scalars, at every
 * field of the index, reached through objects only: then their entries in it are the same.
 * Anything else (objects, nested arrays, a missing field against null) answers false and the
 * entries are compared encoded.
 */
function sameIndexedValues(idx: IndexState, a: Doc, b: Doc): boolean {
  for (const segs of idx.segs) {
    let x: unknown = a;
    let y: unknown = b;
    for (const seg of segs) {
      if (x === null || typeof x !== 'object' || Array.isArray(x) || x instanceof Date) return false;
      if (y === null || typeof y !== 'object' || Array.isArray(y) || y instanceof Date) return false;
      x = (x as Doc)[seg];
      y = (y as Doc)[seg];
    }
    if (Array.isArray(x) && Array.isArray(y)) {
      // An array of scalars gives one entry per element: the same elements, the same entries.
      if (x.length !== y.length) return false;
      for (let i = 0; i < x.length; i++) if (!sameScalar(x[i], y[i])) return false;
      continue;
    }
    if (!sameScalar(x, y)) return false;
  }
  return true;
}

/** The same string, number, boolean, null, missing value or date (arrays and objects: false). */
function sameScalar(x: unknown, y: unknown): boolean {
  if (x === y) return x === null || typeof x !== 'object';
  return x instanceof Date && y instanceof Date && x.getTime() === y.getTime();
}

/**
 * The pending rows of a substring index with what `indexTexts` needs of each: for a top-level
 * field SQLite can address, the field's string itself (`text`; no string there: no text, as
 * `textOf` finds none in a number, a boolean, null or a missing field), and the whole document
 * (`doc`) only when the field holds an array or an object (`textOf` reads those), the path is
 * nested (it may pass through arrays, which a JSON path does not); `indexTexts` reads the
 * document too when the string came back with U+FFFD (a lone surrogate in the stored JSON, which
 * SQLite returns as bytes that are not UTF-8): each indexed exactly as `textOf` reads the
 * decoded document, without decoding the rest.
 */
function pendingTextsSql(t: TextState, table: string): string {
  const head = `SELECT q.rid AS rid, q.old AS old`;
  const from = `FROM ${t.pending} AS q LEFT JOIN ${table} AS c ON c.rid = q.rid`;
  if (t.segs.length !== 1 || !addressable(t.segs)) return `${head}, NULL AS text, json(c.doc) AS doc ${from}`;
  const path = jsonPathSql(t.segs);
  return (
    `${head}, json_extract(c.doc, ${path}) AS text, ` +
    `CASE WHEN json_type(c.doc, ${path}) IN ('array', 'object') THEN json(c.doc) END AS doc ${from}`
  );
}

/**
 * A substring index's pending rows. `old`: the text the FTS5 table held for `rid` when it became
 * pending (JSON; NULL: none), whose chunks come out where the current text's differ.
 */
function pendingTableSql(table: string, ifNotExists = ''): string {
  return `CREATE TABLE ${ifNotExists}${table} (rid INTEGER PRIMARY KEY, old TEXT)`;
}

function textOf(t: TextState, doc: Doc | null): string | undefined {
  if (!doc) return undefined;
  const strings = pathValues(doc, t.segs).values.filter((v): v is string => typeof v === 'string');
  // Joined: a trigram across two values only widens the candidates; the exact test decides.
  return strings.length === 0 ? undefined : strings.join('\n');
}

class SqliteStore implements SqliteDocumentStore {
  readonly kind = 'sqlite' as const;
  /** The file is opened with `locking_mode = EXCLUSIVE` (or is `:memory:`): no other process writes it. */
  readonly exclusive = true;
  readonly db: BetterSqlite3.Database;
  private readonly statements = new Map<string, Statement>();
  private readonly collections = new Map<string, CollState>();
  private readonly handles = new Map<string, SqliteCollectionImpl<StoredDocument>>();
  private readonly txns = new WeakMap<StoreSession, Txn>();
  private readonly durability: Durability;
  private readonly clock: () => Date;
  private readonly warn: StoreWarn;
  private readonly docs: DocCache;
  /**
   * The frozen copies `readonly` reads hand out, by the store's document they copy (one object
   * per row version: the document cache's, or a row decoded for one read) and by the caller's
   * projection object. A copy lives as long as the document it copies.
   */
  private readonly sharedWhole = new WeakMap<Doc, Doc>();
  private readonly sharedProjected = new WeakMap<object, WeakMap<Doc, Doc>>();
  private readonly documentCacheBytes: number;
  private readonly sweepTimer: ReturnType<typeof setInterval>;
  private version = 0;
  private versionReserved = 0;
  private closed = false;
  /** Writes waiting to be applied together (see `write`). */
  private queued: { fn: () => unknown; resolve: (value: unknown) => void; reject: (err: unknown) => void; applied?: (() => void) | undefined }[] = [];
  private drainScheduled = false;
  /**
   * Runs its argument as one SQLite transaction, or as a savepoint inside the running one
   * (`.immediate` begins with the write lock taken). Made once: better-sqlite3 builds a
   * transaction function's four variants each time `db.transaction` is called.
   */
  readonly atomic: BetterSqlite3.Transaction<(fn: () => unknown) => unknown>;
  /** A collection was created by the running write: undo it in memory if the write rolls back. */
  private catalogChanged = false;
  /** The collections (by number) whose rows the current write transaction changed. */
  private readonly touched = new Set<number>();
  /** Substring indexes with pending rows (see TEXT_BATCH). */
  private readonly textsPending = new Set<TextState>();
  private textTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly textDelayMs: number;
  /** Query results kept per collection (`SqliteStoreOptions.keptResults`). */
  private readonly keptResults: number;

  /** The frozen copies of documents read with `projection` (see `sharedWhole`). */
  sharedCopies(projection: Projection | undefined): WeakMap<Doc, Doc> {
    if (projection === undefined) return this.sharedWhole;
    let memo = this.sharedProjected.get(projection);
    if (memo === undefined) this.sharedProjected.set(projection, (memo = new WeakMap()));
    return memo;
  }

  constructor(readonly path: string, options: SqliteStoreOptions) {
    this.warn = warnOf(options.warn);
    this.clock = options.clock ?? (() => new Date());
    const sweepMs = options.expirySweepMs ?? DEFAULT_SWEEP_MS;
    if (!Number.isFinite(sweepMs) || sweepMs <= 0) throw new TypeError('expirySweepMs must be a positive number');
    this.textDelayMs = options.textIndexDelayMs ?? TEXT_DELAY_MS;
    if (!Number.isFinite(this.textDelayMs) || this.textDelayMs < 0) throw new TypeError('textIndexDelayMs must be a non-negative number');
    this.keptResults = options.keptResults ?? RESULT_MEMOS;
    if (!Number.isInteger(this.keptResults) || this.keptResults < 0) throw new TypeError('keptResults must be a non-negative integer');
    const cacheKiB = options.documentCacheKiB ?? DEFAULT_DOCUMENT_CACHE_KIB;
    if (!Number.isInteger(cacheKiB) || cacheKiB < 0) throw new TypeError('documentCacheKiB must be a non-negative integer');
    this.documentCacheBytes = cacheKiB * 1024;
    this.docs = new DocCache(this.documentCacheBytes);
    const memory = path === MEMORY;
    if (!memory) fs.mkdirSync(pathDir(path), { recursive: true });
    const existed = !memory && fs.existsSync(path);
    this.db = new Database(path, { timeout: 0 });
    this.atomic = this.db.transaction((fn: () => unknown) => fn());
    try {
      if (!memory) {
        // One process owns the file: a second one is refused at once rather than waiting on locks.
        this.db.pragma('locking_mode = EXCLUSIVE');
        const mode = this.db.pragma('journal_mode = WAL', { simple: true });
        if (mode !== 'wal') throw new Error(`could not switch ${path} to WAL mode (got ${String(mode)})`);
        this.db.pragma('synchronous = NORMAL');
        this.db.pragma('wal_autocheckpoint = 4000');
        this.db.pragma('journal_size_limit = 67108864');
      }
      this.db.pragma(`cache_size = -${options.cacheKiB ?? 16_384}`);
      this.db.pragma('temp_store = MEMORY');
      this.db.pragma('foreign_keys = OFF');
      // Whether the document cache holds a row at a version: SQL then leaves its JSON out.
      const docs = this.docs;
      this.db.function('store_cached', { deterministic: false, directOnly: true }, (coll, rid, v) => (docs.has(coll as number, rid as number, v as number) ? 1 : 0));
      this.db.exec(`
        CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS store_collections (no INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS store_indexes (
          coll INTEGER NOT NULL, no INTEGER NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL,
          multikey INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (coll, name)) WITHOUT ROWID;
      `);
      const format = this.db.prepare("SELECT value FROM store_meta WHERE key = 'format'").get() as { value: number } | undefined;
      if (format === undefined) this.db.prepare(`INSERT INTO store_meta (key, value) VALUES ('format', ${FORMAT})`).run();
      else if (format.value !== 1 && format.value !== FORMAT) throw new Error(`${path} is in store format ${format.value}; this version reads formats 1 and ${FORMAT}`);
      const reserved = this.db.prepare("SELECT value FROM store_meta WHERE key = 'version'").get() as { value: number } | undefined;
      this.version = reserved?.value ?? 0;
      this.versionReserved = this.version;
      this.loadCatalog();
      if (format?.value === 1) {
        const started = performance.now();
        const indexes = this.atomic.immediate(() => this.fromFormat1());
        options.log?.(
          { path, from: 1, to: FORMAT, substringIndexes: indexes, ms: Math.round(performance.now() - started) },
          'store file upgraded: its substring indexes were rebuilt in chunks',
        );
      }
    } catch (err) {
      this.db.close();
      throw err;
    }
    if (!memory && !existed) syncDirectory(pathDir(path));
    this.durability = new Durability(memory ? undefined : `${path}-wal`, options.onFlush);
    this.sweepTimer = setInterval(() => this.sweepInBackground(), sweepMs);
    this.sweepTimer.unref();
    // Text rows left pending by the last run.
    this.scheduleTexts();
  }

  // ---- catalog -----------------------------------------------------------------------------

  /**
   * Format 1 held each document's text in one FTS5 row (row id = `rid`) and marked pending rows
   * with whether that row existed: the substring indexes are indexed again in chunks
   * (text-chunks.ts), once, in one transaction with the format's change.
   */
  private fromFormat1(): number {
    let indexes = 0;
    for (const c of this.collections.values()) {
      for (const t of c.texts) {
        indexes++;
        this.db.exec(
          `DROP TABLE ${t.pending}; ${pendingTableSql(t.pending)}; ` +
            `INSERT INTO ${t.table} (${t.table}) VALUES ('delete-all'); ${deleteMergeSql(t.table)}`,
        );
        t.pendingRows = 0;
        this.textsPending.delete(t);
        this.fillText(c, t);
      }
    }
    this.prepare(`UPDATE store_meta SET value = ${FORMAT} WHERE key = 'format'`).run();
    return indexes;
  }

  private loadCatalog(): void {
    const colls = this.db.prepare('SELECT no, name FROM store_collections').all() as { no: number; name: string }[];
    for (const { no, name } of colls) this.collections.set(name, new CollState(this, no, name));
    const indexes = this.db.prepare('SELECT coll, no, spec, multikey FROM store_indexes ORDER BY coll, no').all() as {
      coll: number;
      no: number;
      spec: string;
      multikey: number;
    }[];
    const byNo = new Map([...this.collections.values()].map((c) => [c.no, c]));
    for (const row of indexes) {
      const c = byNo.get(row.coll);
      if (!c) continue;
      this.attachIndex(c, row.no, normalizeIndexSpec(decodeJson(row.spec) as IndexSpec), row.multikey === 1);
    }
  }

  private attachIndex(c: CollState, no: number, spec: NormalizedIndexSpec, multikey: boolean): void {
    c.epoch++;
    if (spec.substring) {
      const field = (spec.keys[spec.keys.length - 1] as [string, 1 | -1])[0];
      const pending = `q_${c.no}_${no}`;
      this.db.exec(pendingTableSql(pending, 'IF NOT EXISTS '));
      const pendingRows = (this.db.prepare(`SELECT count(*) AS n FROM ${pending}`).get() as { n: number }).n;
      c.texts.push({ no, spec, name: spec.name, field, segs: splitPath(field), table: `f_${c.no}_${no}`, vocab: `v_${c.no}_${no}`, pending, pendingRows, changes: 0, counts: new Map() });
      if (pendingRows > 0) this.textsPending.add(c.texts[c.texts.length - 1] as TextState);
      return;
    }
    c.indexes.push({
      no,
      spec,
      name: spec.name,
      fields: spec.keys.map(([f]) => f),
      dirs: spec.keys.map(([, d]) => d),
      segs: spec.keys.map(([f]) => splitPath(f)),
      unique: spec.unique,
      partialFilterExpression: spec.partialFilterExpression,
      partial: spec.partialFilterExpression ? compileFilter(spec.partialFilterExpression) : undefined,
      table: `i_${c.no}_${no}`,
      multikey,
    });
  }

  prepare(sql: string): Statement {
    let stmt = this.statements.get(sql);
    if (stmt) {
      // Most recently used last: the oldest entry goes first when the cache is full.
      this.statements.delete(sql);
      this.statements.set(sql, stmt);
      return stmt;
    }
    stmt = this.db.prepare(sql);
    this.statements.set(sql, stmt);
    if (this.statements.size > STATEMENT_CACHE) this.statements.delete(this.statements.keys().next().value as string);
    return stmt;
  }

  memoryUse(): StoreMemoryUse {
    // Every statement reachable from the store's state is counted, wherever it is kept: a
    // statement held outside the cache is memory the cache's bound does not cover.
    const held = new Set<Statement>(this.statements.values());
    const gather = (holder: object): void => {
      for (const value of Object.values(holder)) if (isStatement(value)) held.add(value);
    };
    let plans = 0;
    let shapes = 0;
    let keptResults = 0;
    let keptRows = 0;
    for (const c of this.collections.values()) {
      gather(c);
      for (const idx of c.indexes) gather(idx);
      for (const t of c.texts) gather(t);
      for (const memo of c.plans.values()) gather(memo);
      plans += c.plans.size;
      shapes += c.shapes.size;
      keptResults += c.results.size;
      for (const kept of c.results.values()) keptRows += kept.rids.length;
    }
    const pageCache = this.db.pragma('cache_size', { simple: true }) as number;
    return {
      statements: held.size,
      cachedStatements: this.statements.size,
      statementCacheLimit: STATEMENT_CACHE,
      plans,
      shapes,
      keptResults,
      keptRows,
      documentCacheBytes: this.docs.heldBytes,
      documentCacheLimitBytes: this.documentCacheBytes,
      // Negative: KiB; positive: pages.
      pageCacheLimitKiB: pageCache < 0 ? -pageCache : (pageCache * (this.db.pragma('page_size', { simple: true }) as number)) / 1024,
    };
  }

  state(name: string): CollState | undefined {
    return this.collections.get(name);
  }

  /** The collection's state, creating its table first if needed (inside the caller's SQLite transaction). */
  ensure(name: string): CollState {
    const existing = this.collections.get(name);
    if (existing) return existing;
    const { no } = this.db.prepare('INSERT INTO store_collections (name) VALUES (?) RETURNING no').get(name) as { no: number };
    const c = new CollState(this, no, name);
    this.db.exec(`CREATE TABLE ${c.table} (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, v INTEGER NOT NULL, doc BLOB NOT NULL)`);
    c.docs = 0;
    this.collections.set(name, c);
    this.catalogChanged = true;
    return c;
  }

  private nextVersion(): number {
    if (this.version >= this.versionReserved) {
      // Versions only ever grow: reserve a block in the catalog (same transaction as the write).
      this.versionReserved = this.version + VERSION_BLOCK;
      this.prepare("INSERT INTO store_meta (key, value) VALUES ('version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(this.versionReserved);
    }
    return ++this.version;
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  private assertUsable(): void {
    if (this.closed) throw new Error('store is closed');
    const failed = this.durability.failed;
    if (failed) throw new Error(`store stopped: ${failed.message}`);
  }

  /**
   * Runs `fn` as one write, atomically; resolves once its commit is on disk. Writes are queued
   * and applied together, in the order they were made, in one SQLite transaction (each in a
   * savepoint of its own, so one that throws is undone alone): once the code that made them has
   * run (a microtask), or at once when a read comes first (a read sees every write made before
   * it). Writes made together share the transaction's pages in the write-ahead log: an index
   * page, the tail of the outbox or of the activity log is written once for all of them. (Waiting
   * for the end of the event loop's turn instead, to gather more, held every write's answer and
   * its events back behind all the turn's I/O: under a stream of writes the event consumers fell
   * seconds behind and more memory was held. The disk flush still gathers a whole turn's commits.)
   */
  write<R>(fn: () => R, applied?: () => void): Promise<R> {
    try {
      this.assertUsable();
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return new Promise<R>((resolve, reject) => {
      this.queued.push({ fn, resolve: resolve as (value: unknown) => void, reject, applied });
      if (!this.drainScheduled) {
        this.drainScheduled = true;
        queueMicrotask(() => this.drain());
      }
    });
  }

  /** Applies the queued writes (see `write`). */
  private drain(): void {
    this.drainScheduled = false;
    const batch = this.queued;
    if (batch.length === 0) return;
    this.queued = [];
    try {
      this.assertUsable();
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
    const touched = new Set<number>();
    let catalogChanged = false;
    const single = batch.length === 1;
    try {
      this.atomic.immediate(() => {
          for (const w of batch) {
            this.catalogChanged = false;
            this.touched.clear();
            try {
              // Alone, the write is the transaction; together, each has a savepoint.
              const value = single ? w.fn() : this.atomic(w.fn);
              outcomes.push({ ok: true, value });
              for (const no of this.touched) touched.add(no);
              catalogChanged ||= this.catalogChanged;
            } catch (err) {
              if (this.catalogChanged) this.reloadCatalog();
              outcomes.push({ ok: false, err });
              if (single) throw err;
            }
          }
          this.indexTexts(TEXT_BATCH);
      });
    } catch (err) {
      // The transaction as a whole rolled back (the one write threw, or the commit failed):
      // nothing of the batch is in the database.
      if (catalogChanged || this.catalogChanged) this.reloadCatalog();
      batch.forEach((w, i) => {
        const outcome = outcomes[i];
        w.reject(outcome !== undefined && !outcome.ok ? outcome.err : err);
      });
      return;
    }
    this.scheduleTexts();
    const flushed = this.durability.wait(this.durability.commit(touched));
    batch.forEach((w, i) => {
      const outcome = outcomes[i] as (typeof outcomes)[number];
      if (!outcome.ok) w.reject(outcome.err);
      else {
        // Committed and visible to every later statement; on disk once `flushed` resolves.
        notifyCommitted(w.applied, this.warn);
        flushed.then(() => w.resolve(outcome.value), w.reject);
      }
    });
  }

  /**
   * Runs `fn` and commits what it did even when it throws part-way (an ordered insert keeps the
   * documents before a failure); rethrows after the commit is on disk.
   */
  async writePartial<R>(fn: () => R): Promise<R> {
    let failure: { err: unknown } | undefined;
    const result = await this.write(() => {
      try {
        return fn();
      } catch (err) {
        // Failed part-way through one document: nothing of this write is kept.
        if (err instanceof HalfWritten) throw err.cause;
        failure = { err };
        return undefined;
      }
    });
    if (failure) throw failure.err;
    return result as R;
  }

  /**
   * Runs a read; resolves once every commit it could have seen is on disk: every commit that
   * changed `collection` when the read is of one collection, else every commit so far. Inside a
   * transaction (`inTransaction`) nothing waits: what it read reaches no caller before its
   * commit, and the log is flushed in order, so the commit's own flush covers every commit before it.
   */
  async read<R>(fn: () => R, inTransaction = false, collection?: string): Promise<R> {
    this.assertUsable();
    if (this.queued.length > 0) this.drain();
    const result = fn();
    if (inTransaction) return result;
    const c = collection === undefined ? undefined : this.state(collection);
    if (collection !== undefined && !c) return result;
    await (c ? this.durability.waitFor(c.no) : this.durability.wait());
    return result;
  }

  async ping(): Promise<void> {
    this.assertUsable();
    this.prepare('SELECT 1').get();
  }

  /**
   * Brings substring indexes with at least `min` pending rows up to date (inside the caller's
   * SQLite transaction): each pending row's old entry out, its current text in.
   */
  private indexTexts(min: number): void {
    if (this.textsPending.size === 0) return;
    for (const t of [...this.textsPending]) {
      if (t.pendingRows < min) continue;
      const c = [...this.collections.values()].find((x) => x.texts.includes(t));
      this.textsPending.delete(t);
      t.pendingRows = 0;
      if (!c) continue;
      t.pendingDocs ??= this.prepare(pendingTextsSql(t, c.table));
      const rows = t.pendingDocs.all() as { rid: number; old: string | null; text: unknown; doc: string | null }[];
      t.remove ??= this.prepare(`DELETE FROM ${t.table} WHERE rowid = ?`);
      const insert = this.textInsert(t);
      // Every row's old chunks out first, in row id order, then the new ones in, row by row (in
      // the pending table's order, by rid): FTS5 writes the rows it has gathered as a segment of
      // their own (a flush, and merges later) whenever a row id is not above the one before it,
      // and a removal after an insert is one too.
      const removals: number[] = [];
      const inserts: [number, string][] = [];
      for (const r of rows) {
        let doc = r.doc;
        // A lone surrogate in the stored JSON comes back from SQLite as bytes that are not UTF-8,
        // which the driver turns into U+FFFD: read such a row from its decoded document instead.
        if (doc === null && typeof r.text === 'string' && r.text.includes('\ufffd')) {
          t.docJson ??= this.prepare(`SELECT json(doc) AS doc FROM ${c.table} WHERE rid = ?`);
          doc = (t.docJson.get(r.rid) as { doc: string } | undefined)?.doc ?? null;
        }
        const text = doc !== null ? textOf(t, decodeJson(doc) as Doc) : typeof r.text === 'string' ? r.text : undefined;
        const edits = chunkEdits(r.old === null ? undefined : (JSON.parse(r.old) as string), text);
        for (const slot of edits.remove) removals.push(chunkRowid(r.rid, slot));
        // A new text's chunks by slot, so a batch of new documents comes in row id order (loading
        // 19,200 texts by writes: 2 s instead of 6); an edit's as the text has them.
        if (edits.remove.length === 0) edits.insert.sort((x, y) => x[0] - y[0]);
        for (const [slot, chunk] of edits.insert) inserts.push([chunkRowid(r.rid, slot), chunk]);
      }
      for (const rowid of removals.sort((a, b) => a - b)) t.remove.run(rowid);
      for (const [rowid, chunk] of inserts) insert.run(rowid, chunk);
      t.changes += rows.length;
      this.prepare(`DELETE FROM ${t.pending}`).run();
    }
  }

  private textInsert(t: TextState): Statement {
    t.insert ??= this.prepare(`INSERT INTO ${t.table} (rowid, t) VALUES (?, ?)`);
    return t.insert;
  }

  /** Indexes the text of every document of the collection (an empty FTS5 table, nothing pending). */
  private fillText(c: CollState, t: TextState): void {
    const insert = this.textInsert(t);
    const page = this.db.prepare(`SELECT rid, json(doc) AS doc FROM ${c.table} WHERE rid > ? ORDER BY rid LIMIT 1000`);
    for (let after = 0, rows = page.all(after) as { rid: number; doc: string }[]; rows.length > 0; rows = page.all(after) as { rid: number; doc: string }[]) {
      // In row id order (see indexTexts): documents by rid, a document's chunks by slot.
      for (const r of rows) {
        const text = textOf(t, decodeJson(r.doc) as Doc);
        if (text === undefined) continue;
        for (const [slot, chunk] of [...chunkSlots(text)].sort((a, b) => a[0] - b[0])) insert.run(chunkRowid(r.rid, slot), chunk);
      }
      after = (rows[rows.length - 1] as { rid: number }).rid;
    }
  }

  /** Pending text rows are indexed once writes pause (`textDelayMs` after the last one). */
  private scheduleTexts(): void {
    if (this.textsPending.size === 0 || this.closed) return;
    if (this.textTimer !== undefined) {
      this.textTimer.refresh();
      return;
    }
    this.textTimer = setTimeout(() => {
      this.textTimer = undefined;
      if (this.closed || this.durability.failed) return;
      this.write(() => this.indexTexts(1)).catch((err: unknown) => {
        this.warn({ path: this.path, error: (err as Error).message }, 'store text indexing failed; the rows stay pending and are tried again');
      });
    }, this.textDelayMs);
    this.textTimer.unref();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Writes made before the close are applied (and flushed below), not dropped.
    if (this.queued.length > 0) this.drain();
    this.closed = true;
    if (this.textTimer !== undefined) clearTimeout(this.textTimer);
    this.textTimer = undefined;
    if (this.textsPending.size > 0 && !this.durability.failed) {
      // Leave the file with its text indexes complete (if this fails, the pending rows stay in
      // the file and the next open continues them).
      try {
        this.atomic.immediate(() => this.indexTexts(1));
        await this.durability.wait(this.durability.commit());
      } catch (err) {
        this.warn({ path: this.path, error: (err as Error).message }, 'store text indexing at close failed; the next open continues it');
      }
    }
    clearInterval(this.sweepTimer);
    await this.durability.close();
    this.statements.clear();
    this.docs.clear();
    this.db.close();
  }

  // ---- collections -------------------------------------------------------------------------

  collection<T extends StoredDocument = StoredDocument>(name: string): SqliteCollection<T> {
    assertCollectionName(name);
    let handle = this.handles.get(name);
    if (!handle) {
      handle = new SqliteCollectionImpl(this, name);
      this.handles.set(name, handle);
    }
    return handle as unknown as SqliteCollection<T>;
  }

  txOf(options: SessionOption | undefined): Txn | undefined {
    const session = options?.session;
    if (session === undefined) return undefined;
    const tx = this.txns.get(session);
    if (!tx) throw new Error('unknown session: pass the session object given to withTransaction by this store');
    if (tx.state !== 'active') throw new Error(`transaction ${session.id} has already ${tx.state === 'committed' ? 'committed' : 'ended'}`);
    return tx;
  }

  // ---- reads -------------------------------------------------------------------------------

  /** The document's JSON, or NULL when the document cache holds the row at its version (`alias`: the documents table's name in the statement). */
  private docColumn(c: CollState, alias: string): string {
    return `CASE WHEN store_cached(${c.no}, ${alias}.rid, ${alias}.v) THEN NULL ELSE json(${alias}.doc) END`;
  }

  /**
   * The documents of rows read by one statement (`doc` NULL: held by the cache). Rows decoded
   * here join the cache only after all are resolved: the cache answered SQL for every row of the
   * statement, so nothing may leave it before they are looked up.
   */
  private resolve(c: CollState, rows: readonly { rid: number; v: number; doc: string | null }[]): Doc[] {
    const out = new Array<Doc>(rows.length);
    const fresh: number[] = [];
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i] as { rid: number; v: number; doc: string | null };
      if (r.doc === null) out[i] = this.cached(c, r.rid, r.v);
      else {
        out[i] = decodeJson(r.doc) as Doc;
        fresh.push(i);
      }
    }
    for (const i of fresh) {
      const r = rows[i] as { rid: number; v: number; doc: string };
      this.docs.set(c.no, r.rid, r.v, out[i] as Doc, r.doc.length);
    }
    return out;
  }

  private cached(c: CollState, rid: number, v: number): Doc {
    const doc = this.docs.get(c.no, rid, v);
    // SQL left the JSON out because the cache held this version, and nothing leaves the cache
    // while a statement's rows are being resolved.
    if (doc === undefined) throw new Error(`store: document cache lost row ${rid} of ${c.name} during a read`);
    return doc;
  }

  private rowById(c: CollState, id: string): Row | undefined {
    c.byId ??= this.prepare(`SELECT rid, v, ${this.docColumn(c, c.table)} AS doc FROM ${c.table} WHERE id = ?`);
    const row = c.byId.get(id) as { rid: number; v: number; doc: string | null } | undefined;
    return row ? { rid: row.rid, v: row.v, doc: this.resolve(c, [row])[0] as Doc } : undefined;
  }

  private rowsByRid(c: CollState, rids: number[]): Map<number, Row> {
    const out = new Map<number, Row>();
    if (rids.length === 0) return out;
    const stmt = this.prepare(`SELECT rid, v, ${this.docColumn(c, c.table)} AS doc FROM ${c.table} WHERE rid IN (SELECT value FROM json_each(?))`);
    const rows = stmt.all(JSON.stringify(rids)) as { rid: number; v: number; doc: string | null }[];
    const docs = this.resolve(c, rows);
    rows.forEach((row, i) => out.set(row.rid, { rid: row.rid, v: row.v, doc: docs[i] as Doc }));
    return out;
  }

  /**
   * Committed documents matching `filter`, in `sort` order, at most `want` of them; `exclude`:
   * ids left out (a transaction's overlay).
   */
  /**
   * The rows a query selects. The same query again (its exact text, values included) while the
   * collection has had no write since answers from the rows it found last time (`CollState.results`):
   * the same rows at the same versions, which running it again would find.
   */
  select(
    c: CollState,
    filter: Filter,
    matcher: Matcher,
    sort: SortKey[] | undefined,
    want: number,
    exclude?: ReadonlySet<string>,
    sortSpec?: SortSpec,
  ): { rows: Row[]; explain: QueryExplain } {
    if (this.keptResults === 0 || typeof filter._id === 'string' || (exclude !== undefined && exclude.size > 0)) return this.selectRows(c, filter, matcher, sort, want, exclude, sortSpec);
    const key = `${want}|0|${sortSpec === undefined ? '' : encodeJson(sortSpec)}|${encodeJson(filter)}`;
    const kept = c.results.get(key);
    if (kept !== undefined && kept.writes === c.writes && kept.epoch === c.epoch) {
      c.results.delete(key);
      c.results.set(key, kept);
      return { rows: this.rowsAt(c, kept.rids, kept.versions), explain: { ...kept.explain, kept: true } };
    }
    const selected = this.selectRows(c, filter, matcher, sort, want, exclude, sortSpec, key);
    if (selected.rows.length <= RESULT_ROWS && this.keptResults > 0) {
      c.results.delete(key);
      c.results.set(key, { writes: c.writes, epoch: c.epoch, rids: selected.rows.map((r) => r.rid), versions: selected.rows.map((r) => r.v), explain: { ...selected.explain } });
      if (c.results.size > this.keptResults) c.results.delete(c.results.keys().next().value as string);
    }
    return selected;
  }

  /** Rows at the versions given, their documents from the cache or else read in one statement. */
  private rowsAt(c: CollState, rids: readonly number[], versions: readonly number[]): Row[] {
    const rows: Row[] = [];
    const later: Row[] = [];
    for (let i = 0; i < rids.length; i++) {
      const rid = rids[i] as number;
      const v = versions[i] as number;
      const doc = this.docs.get(c.no, rid, v);
      const row: Row = { rid, v, doc: doc ?? NOT_READ };
      if (doc === undefined) later.push(row);
      rows.push(row);
    }
    for (const f of this.readDocs(c, later)) this.docs.set(c.no, f.rid, f.v, f.doc, f.size);
    return rows;
  }

  /** Reads the documents of `rows` (not in the cache) in one statement; returns them for caching. */
  private readDocs(c: CollState, rows: Row[]): { rid: number; v: number; doc: Doc; size: number }[] {
    if (rows.length === 0) return [];
    c.jsonByRids ??= this.prepare(`SELECT rid, json(doc) AS doc FROM ${c.table} WHERE rid IN (SELECT value FROM json_each(?))`);
    const found = new Map((c.jsonByRids.all(JSON.stringify(rows.map((r) => r.rid))) as { rid: number; doc: string }[]).map((r) => [r.rid, r.doc]));
    return rows.map((row) => {
      const json = found.get(row.rid) as string;
      row.doc = decodeJson(json) as Doc;
      return { rid: row.rid, v: row.v, doc: row.doc, size: json.length };
    });
  }

  private selectRows(
    c: CollState,
    filter: Filter,
    matcher: Matcher,
    sort: SortKey[] | undefined,
    want: number,
    exclude?: ReadonlySet<string>,
    sortSpec?: SortSpec,
    queryKey?: string,
  ): { rows: Row[]; explain: QueryExplain } {
    const id = filter._id;
    if (typeof id === 'string') {
      // `{_id: "..."}`: the one row by its id, nothing to plan or test (the commonest read). With
      // more conditions (a write conditional on the version read, say) the row is tested against
      // them here rather than planned: no other index can narrow one row.
      const found = exclude?.has(id) ? undefined : this.rowById(c, id);
      const alone = onlyId(filter) !== undefined;
      const row = found && (alone || matcher(found.doc)) ? found : undefined;
      const explain: QueryExplain = { plan: 'IDHACK', sql: c.byId?.source ?? '', docsExamined: found ? 1 : 0, docsEvaluated: found && !alone ? 1 : 0, nReturned: 0, inMemorySort: false };
      return { rows: row && want > 0 ? [row] : [], explain };
    }
    const excludeIds = exclude !== undefined && exclude.size > 0;
    // The same query again (a page polled, a repeated lookup) reuses its plan and statement: the
    // key is the query's exact text, values included, since the planner chose by counting them.
    const key = queryKey ?? `${want}|${excludeIds ? 1 : 0}|${sortSpec === undefined ? '' : encodeJson(sortSpec)}|${encodeJson(filter)}`;
    let memo = c.plans.get(key);
    // A path taken from another query of the same shape (nothing counted) serves a query once:
    // run again, the query is planned for its own values.
    let recount = false;
    if (memo !== undefined) {
      c.plans.delete(key);
      if (memo.epoch === c.epoch && memo.plan.hinted !== true) c.plans.set(key, memo);
      else {
        recount = memo.epoch === c.epoch;
        memo = undefined;
      }
    }
    const p = memo?.plan ?? this.planShaped(c, { filter, sort, want, countOnly: false, excludeIds }, `${want}|${excludeIds ? 1 : 0}|${sortSpec === undefined ? '' : encodeJson(sortSpec)}|`, !recount);
    const remember = (sql: string): Statement => {
      // `_id` lookups are not kept: planning them counts nothing, and their ids (mostly seen
      // once) would push the plans worth keeping out.
      if (memo === undefined && p.kind !== 'IDHACK') {
        c.plans.set(key, { plan: p, sql, epoch: c.epoch });
        if (c.plans.size > PLAN_MEMOS) c.plans.delete(c.plans.keys().next().value as string);
      }
      return this.prepare(sql);
    };
    const params = this.paramsOf(p, exclude);
    const where = [...p.where, `(${p.residual}) IS NOT 0`].join(' AND ');
    // Rows that passed `where` match for sure (1) or are undecided (NULL): told apart without
    // evaluating the residual again.
    const sure = p.unsure === '0' ? '1' : `(CASE WHEN ${p.unsure} THEN NULL ELSE 1 END)`;
    const explain: QueryExplain = { plan: p.kind, sql: '', docsExamined: 0, docsEvaluated: 0, nReturned: 0, inMemorySort: sort !== undefined && !p.ordered };
    if (p.index !== undefined) explain.index = p.index;
    if (p.filter !== undefined) explain.filter = p.filter;
    const seen = p.duplicates ? new Set<number>() : undefined;
    const rows: Row[] = [];
    if (p.ordered) {
      let sql = memo?.sql;
      if (sql === undefined) {
        // The documents are looked up in the cache here, not from SQL (no call back into
        // JavaScript per row); those it does not hold are read after the walk, in one statement
        // (or at once, when the filter needs a test here).
        const select = `SELECT c.rid AS rid, c.v AS v, ${sure} AS m`;
        // Merged runs: SQLite merges the ordered SELECTs of a compound one (no sort step).
        sql = p.runs
          ? `${p.runs.map((run) => `${select}, ${p.orderColumns} FROM ${p.source} WHERE ${[...run, where].join(' AND ')}`).join(' UNION ALL ')} ${p.orderBy}`
          : `${select} FROM ${p.source} WHERE ${where} ${p.orderBy}`;
      }
      explain.sql = sql;
      const stmt = memo !== undefined ? this.prepare(sql) : remember(sql);
      if (want > 0) {
        // Decoded here, cached once the statement is done (nothing leaves the cache meanwhile).
        let fresh: { rid: number; v: number; doc: Doc; size: number }[] = [];
        let later: Row[] = [];
        /** Takes a row of the walk; false when it is a duplicate or fails the test here. */
        const take = (rid: number, v: number, m: number | null): boolean => {
          if (seen) {
            if (seen.has(rid)) return false;
            seen.add(rid);
          }
          explain.docsExamined++;
          let doc = this.docs.get(c.no, rid, v);
          if (m !== 1) {
            if (doc === undefined) {
              c.jsonByRid ??= this.prepare(`SELECT json(doc) AS doc FROM ${c.table} WHERE rid = ?`);
              const json = (c.jsonByRid.get(rid) as { doc: string }).doc;
              doc = decodeJson(json) as Doc;
              fresh.push({ rid, v, doc, size: json.length });
            }
            explain.docsEvaluated++;
            if (!matcher(doc)) return false;
          }
          const row: Row = { rid, v, doc: doc ?? NOT_READ };
          if (doc === undefined) later.push(row);
          rows.push(row);
          return true;
        };
        let complete = false;
        if (Number.isFinite(want)) {
          // A page: SQLite stops at the page's size itself and hands the rows over at once
          // (arrays, one call). Enough unless a row was a duplicate or failed the test here:
          // then the walk runs again, row by row, until the page is full.
          let limitedSql = memo?.limitedSql;
          if (limitedSql === undefined) {
            limitedSql = `${sql} LIMIT ${want}`;
            const kept = c.plans.get(key);
            if (kept !== undefined && kept.sql === sql) kept.limitedSql = limitedSql;
          }
          // Only this walk runs `... LIMIT n` texts, always with rows as arrays.
          const got = this.prepare(limitedSql).raw(true).all(params) as [number, number, number | null][];
          complete = true;
          for (const [rid, v, m] of got) if (!take(rid, v, m)) complete = false;
          complete ||= got.length < want;
          if (!complete) {
            rows.length = 0;
            fresh = [];
            later = [];
            seen?.clear();
            explain.docsExamined = 0;
            explain.docsEvaluated = 0;
          }
        }
        if (!complete) {
          for (const r of stmt.iterate(params) as IterableIterator<{ rid: number; v: number; m: number | null }>) {
            if (take(r.rid, r.v, r.m) && rows.length >= want) break;
          }
        }
        // Read in the same synchronous step as the walk: the rows are as the walk saw them.
        for (const f of this.readDocs(c, later)) fresh.push(f);
        for (const f of fresh) this.docs.set(c.no, f.rid, f.v, f.doc, f.size);
      }
      return { rows, explain };
    }
    // Sorted here: read the sort values (not the documents) of every match, keep the first
    // `want`, then fetch only those documents. Values SQL cannot hand over exactly (arrays,
    // sub-documents, paths through arrays) and undecided matches need their documents.
    const sortKeys = sort as SortKey[];
    let sql = memo?.sql;
    if (sql === undefined) {
      const columns = sortKeys.map((k, i) => {
        if (k.path === '_id') return `'text' AS t${i}, c.id AS v${i}, NULL AS d${i}`;
        if (!addressable(k.segs)) return `NULL AS t${i}, NULL AS v${i}, NULL AS d${i}, 1 AS x${i}`;
        return `json_type(c.doc, ${jsonPathSql(k.segs)}) AS t${i}, json_extract(c.doc, ${jsonPathSql(k.segs)}) AS v${i}, json_extract(c.doc, ${jsonPathSql(k.segs, '$date')}) AS d${i}`;
      });
      sql = `SELECT c.rid AS rid, c.id AS id, ${sure} AS m, ${columns.join(', ')} FROM ${p.source} WHERE ${where}`;
    }
    explain.sql = sql;
    const stmt = memo !== undefined ? this.prepare(sql) : remember(sql);
    const items: Keyed<number>[] = [];
    const needDoc: number[] = [];
    const pendingById = new Map<number, { id: string; m: number | null }>();
    for (const r of stmt.all(params) as Record<string, unknown>[]) {
      const rid = r.rid as number;
      if (seen) {
        if (seen.has(rid)) continue;
        seen.add(rid);
      }
      explain.docsExamined++;
      const keys: unknown[] = [];
      let exact = r.m === 1;
      for (let i = 0; i < sortKeys.length && exact; i++) {
        const t = r[`t${i}`] as string | null;
        if (r[`x${i}`] === 1 || t === 'array' || (t === 'object' && r[`d${i}`] === null) || (t === null && (sortKeys[i] as SortKey).segs.length > 1)) {
          exact = false;
          break;
        }
        keys.push(t === null || t === 'null' ? null : t === 'true' ? true : t === 'false' ? false : t === 'object' ? new Date(r[`d${i}`] as number) : r[`v${i}`]);
      }
      if (exact) items.push({ item: rid, id: r.id as string, keys });
      else {
        needDoc.push(rid);
        pendingById.set(rid, { id: r.id as string, m: r.m as number | null });
      }
    }
    const fetched = this.rowsByRid(c, needDoc);
    for (const rid of needDoc) {
      const row = fetched.get(rid);
      if (!row) continue;
      if (pendingById.get(rid)?.m !== 1) {
        explain.docsEvaluated++;
        if (!matcher(row.doc)) continue;
      }
      items.push(keyed(rid, row.doc, sortKeys));
    }
    const top = topK(items, sortKeys, want);
    const missing = top.map((t) => t.item).filter((rid) => !fetched.has(rid));
    const more = this.rowsByRid(c, missing);
    for (const t of top) {
      const row = fetched.get(t.item) ?? more.get(t.item);
      if (row) rows.push(row);
    }
    return { rows, explain };
  }

  /**
   * Plans a query, taking the access path a query of the same shape took (`CollState.shapes`)
   * rather than counting index ranges again: the statement is still built from this query's
   * values, only the choice between indexes is reused (MongoDB's plan cache does the same).
   */
  private planShaped(c: CollState, req: PlanRequest, prefix: string, hint = true): Plan {
    const key = prefix + shapeOf(req.filter);
    const known = c.shapes.get(key);
    const p = plan(c, hint && known !== undefined && known.epoch === c.epoch ? { ...req, hint: known.choice } : req);
    if (p.choice !== undefined && known?.choice !== p.choice) {
      c.shapes.delete(key);
      c.shapes.set(key, { choice: p.choice, epoch: c.epoch });
      if (c.shapes.size > PLAN_SHAPES) c.shapes.delete(c.shapes.keys().next().value as string);
    }
    return p;
  }

  private paramsOf(p: Plan, exclude?: ReadonlySet<string>): Record<string, unknown> {
    const params = { ...p.params.values };
    if (exclude !== undefined && exclude.size > 0) params.exclude = JSON.stringify([...exclude]);
    return params;
  }

  countCommitted(c: CollState, filter: Filter, matcher: Matcher, exclude?: ReadonlySet<string>): number {
    const excludeIds = exclude !== undefined && exclude.size > 0;
    const p = this.planShaped(c, { filter, sort: undefined, want: Infinity, countOnly: true, excludeIds }, `count|${excludeIds ? 1 : 0}|`);
    const params = this.paramsOf(p, exclude);
    if (p.indexOnlyFrom !== undefined && !p.duplicates) {
      return (this.prepare(`SELECT count(*) AS n FROM ${p.indexOnlyFrom}`).get(params) as { n: number }).n;
    }
    const distinct = p.duplicates ? 'DISTINCT ' : '';
    const sure = this.prepare(`SELECT count(${distinct}c.rid) AS n FROM ${p.source} WHERE ${[...p.where, `(${p.residual}) IS 1`].join(' AND ')}`).get(params) as { n: number };
    let n = sure.n;
    const unsure = this.prepare(`SELECT ${distinct}c.rid AS rid, json(c.doc) AS doc FROM ${p.source} WHERE ${[...p.where, `(${p.residual}) IS NULL`].join(' AND ')}`);
    for (const r of unsure.iterate(params) as IterableIterator<{ doc: string }>) if (matcher(decodeJson(r.doc) as Doc)) n++;
    return n;
  }

  query(name: string, filter: Filter, opts: QueryOptions, tx: Txn | undefined): { docs: Doc[]; rows: (Row | undefined)[]; explain: QueryExplain } {
    const matcher = compileFilter(filter);
    const sort = compileSort(opts.sort);
    const skip = countOption(opts.skip, 'skip');
    const limit = countOption(opts.limit, 'limit');
    const want = limit > 0 ? skip + limit : Infinity;
    const overlay = this.overlayOf(name, tx);
    const c = this.state(name);
    const exclude = overlay ? new Set(overlay.keys()) : undefined;
    const selected = c ? this.select(c, filter, matcher, sort, want, exclude, opts.sort) : { rows: [], explain: emptyExplain(sort !== undefined) };
    let items: { doc: Doc; row?: Row }[] = selected.rows.map((r) => ({ doc: r.doc, row: r }));
    if (overlay) {
      for (const doc of overlay.values()) if (doc && matcher(doc)) items.push({ doc });
      if (sort) items = topK(items.map((i) => keyed(i, i.doc, sort)), sort, Infinity).map((k) => k.item);
    }
    items = items.slice(skip, Number.isFinite(want) ? want : undefined);
    if (tx) {
      // Remember the version each returned document had: writing it later is checked against
      // it, so a read-modify-write cannot overwrite a newer commit.
      const tc = tx.coll(name);
      for (const item of items) {
        const id = item.doc._id as string;
        if (item.row !== undefined && !tc.base.has(id)) tc.base.set(id, item.row.v);
      }
    }
    selected.explain.nReturned = items.length;
    return { docs: items.map((i) => i.doc), rows: items.map((i) => i.row), explain: selected.explain };
  }

  count(name: string, filter: Filter, tx: Txn | undefined): number {
    const matcher = compileFilter(filter);
    const overlay = this.overlayOf(name, tx);
    const c = this.state(name);
    let n = c ? this.countCommitted(c, filter, matcher, overlay ? new Set(overlay.keys()) : undefined) : 0;
    if (overlay) for (const doc of overlay.values()) if (doc && matcher(doc)) n++;
    return n;
  }

  private overlayOf(name: string, tx: Txn | undefined): Map<string, Doc | null> | undefined {
    const tc = tx?.colls.get(name);
    return tc && tc.writes.size > 0 ? tc.writes : undefined;
  }

  /** The committed row's place and version, without reading the document. */
  private rowMeta(name: string, id: string): Row | undefined {
    const c = this.state(name);
    if (!c) return undefined;
    c.metaById ??= this.prepare(`SELECT rid, v FROM ${c.table} WHERE id = ?`);
    const meta = c.metaById.get(id) as { rid: number; v: number } | undefined;
    // The document is not needed by the callers (an insert over nothing, a transaction's write).
    return meta ? { rid: meta.rid, v: meta.v, doc: {} } : undefined;
  }

  /** Whether a document with `id` exists as `tx` sees it, and its committed row (without the document). */
  private visible(name: string, id: string, tx: Txn | undefined): { exists: boolean; row: Row | undefined } {
    const row = this.rowMeta(name, id);
    const tc = tx?.colls.get(name);
    if (tc?.writes.has(id)) return { exists: tc.writes.get(id) != null, row };
    return { exists: row !== undefined, row };
  }

  // ---- writes ------------------------------------------------------------------------------

  /** What a write changes in each index (computed once per write). */
  private changesOf(c: CollState, before: Doc | null, after: Doc | null): IndexChange[] {
    const out: IndexChange[] = [];
    for (const idx of c.indexes) {
      // Most writes leave most indexed fields as they were: no keys to encode for those indexes.
      if (before && after && !idx.partial && sameIndexedValues(idx, before, after)) continue;
      const old = entriesOf(idx, before);
      const fresh = entriesOf(idx, after);
      if (old.keys.length === 0 && fresh.keys.length === 0) continue;
      if (old.keys.length <= 1 && fresh.keys.length <= 1) {
        // One entry (or none) on each side, the common case: compared as bytes, no key strings.
        if (old.keys.length === 1 && fresh.keys.length === 1 && sameKey(old.keys[0] as Buffer[], fresh.keys[0] as Buffer[])) continue;
        out.push({ idx, remove: old.keys, add: fresh.keys, multikey: fresh.multikey });
        continue;
      }
      const oldSet = new Set(old.keys.map(keyString));
      const freshSet = new Set(fresh.keys.map(keyString));
      out.push({
        idx,
        remove: old.keys.filter((k) => !freshSet.has(keyString(k))),
        add: fresh.keys.filter((k) => !oldSet.has(keyString(k))),
        multikey: fresh.multikey,
      });
    }
    return out;
  }

  /** Removes what the old version of a document contributes to indexes that change. */
  private unindex(c: CollState, id: string, rid: number, before: Doc | null, after: Doc | null, changes: IndexChange[]): void {
    for (const { idx, remove } of changes) {
      if (remove.length === 0) continue;
      idx.remove ??= this.prepare(`DELETE FROM ${idx.table} WHERE ${idx.fields.map((_, i) => `k${i} = ?`).join(' AND ')} AND id = ?`);
      for (const key of remove) idx.remove.run(...key, id);
    }
    this.markTexts(c, rid, before, after);
  }

  /**
   * Writes the document's new version (or deletes it) and adds its new index entries. A unique
   * index refuses a clash: DuplicateKeyError, and the caller's SQLite transaction undoes the rest.
   */
  private store(c: CollState, id: string, row: Row | undefined, before: Doc | null, after: Doc | null, changes: IndexChange[]): void {
    this.touched.add(c.no);
    let rid = row?.rid;
    if (++c.writes % PLAN_WRITES === 0) c.epoch++;
    if (after === null) {
      if (rid === undefined) return;
      c.deleteDoc ??= this.prepare(`DELETE FROM ${c.table} WHERE rid = ?`);
      c.deleteDoc.run(rid);
      this.docs.delete(c.no, rid);
      if (c.docs !== undefined) c.docs--;
      return;
    }
    const json = encodeJson(after);
    if (rid === undefined) {
      c.insertDoc ??= this.prepare(`INSERT INTO ${c.table} (id, v, doc) VALUES (?, ?, jsonb(?))`);
      try {
        rid = Number(c.insertDoc.run(id, this.nextVersion(), json).lastInsertRowid);
      } catch (err) {
        if (isConstraintError(err)) throw new DuplicateKeyError(ID_INDEX);
        throw err;
      }
      if (c.docs !== undefined) c.docs++;
    } else {
      c.updateDoc ??= this.prepare(`UPDATE ${c.table} SET v = ?, doc = jsonb(?) WHERE rid = ?`);
      const v = this.nextVersion();
      c.updateDoc.run(v, json, rid);
      // A document read before is likely read again: keep its new version (a copy: `after` may
      // share values with the caller's update). Rolled back, the row keeps its old version and
      // this entry is never found.
      if (this.docs.holds(c.no, rid)) this.docs.set(c.no, rid, v, cloneValue(after), json.length);
    }
    for (const { idx, add, multikey } of changes) {
      if (add.length > 0) {
        idx.insert ??= this.prepare(`INSERT INTO ${idx.table} (${idx.fields.map((_, i) => `k${i}`).join(', ')}, id, rid) VALUES (${idx.fields.map(() => '?').join(', ')}, ?, ?)`);
        for (const key of add) {
          try {
            idx.insert.run(...key, id, rid);
          } catch (err) {
            if (isConstraintError(err)) throw new DuplicateKeyError(idx.name);
            throw err;
          }
        }
      }
      if (multikey && !idx.multikey) {
        idx.multikey = true;
        c.epoch++;
        this.prepare('UPDATE store_indexes SET multikey = 1 WHERE coll = ? AND no = ?').run(c.no, idx.no);
      }
    }
    if (!row) this.markTexts(c, rid, null, after);
  }

  /**
   * Marks the row's text as changed: the FTS5 table catches up in a batch (`indexTexts`); until
   * then queries take pending rows as candidates. The first mark after a catch-up records
   * whether the FTS5 table holds the row (it then holds `before`'s text).
   */
  private markTexts(c: CollState, rid: number, before: Doc | null, after: Doc | null): void {
    for (const t of c.texts) {
      const old = textOf(t, before);
      if (old === textOf(t, after)) continue;
      t.markPending ??= this.prepare(`INSERT INTO ${t.pending} (rid, old) VALUES (?, ?) ON CONFLICT (rid) DO NOTHING`);
      // As JSON: a lone surrogate comes back as it went in.
      if (t.markPending.run(rid, old === undefined ? null : JSON.stringify(old)).changes > 0) t.pendingRows++;
      this.textsPending.add(t);
    }
  }

  /** One document's change, directly (inside the operation's SQLite transaction). */
  private put(c: CollState, id: string, row: Row | undefined, after: Doc | null): void {
    const before = row?.doc ?? null;
    const changes = this.changesOf(c, before, after);
    if (row) this.unindex(c, id, row.rid, before, after, changes);
    this.store(c, id, row, before, after, changes);
  }

  /** The one write primitive of operations: applies directly, or buffers into the transaction. */
  private write1(name: string, id: string, row: Row | undefined, after: Doc | null, tx: Txn | undefined): void {
    if (!tx) {
      this.put(this.ensure(name), id, row, after);
      return;
    }
    const tc = tx.coll(name);
    const current = row?.v ?? 0;
    const base = tc.base.get(id);
    if (base === undefined) tc.base.set(id, current);
    else if (base !== current) {
      tx.conflict = true;
      throw new TransactionConflictError(`transaction write conflict on ${name}/${id}: changed by another writer since this transaction read it`);
    }
    const c = this.state(name);
    const previous = tc.writes.get(id);
    if (c && after) {
      for (const idx of c.indexes) {
        if (!idx.unique) continue;
        const own = tc.uniq.get(idx.name);
        for (const key of entriesOf(idx, after).keys) {
          idx.find ??= this.prepare(`SELECT id FROM ${idx.table} WHERE ${idx.fields.map((_, i) => `k${i} = ?`).join(' AND ')}`);
          for (const { id: other } of idx.find.all(...key) as { id: string }[]) {
            if (other !== id && !tc.writes.has(other)) throw new DuplicateKeyError(idx.name);
          }
          const holder = own?.get(keyString(key));
          if (holder !== undefined && holder !== id) throw new DuplicateKeyError(idx.name);
        }
      }
    }
    if (c) {
      for (const idx of c.indexes) {
        if (!idx.unique) continue;
        let own = tc.uniq.get(idx.name);
        if (!own) {
          own = new Map();
          tc.uniq.set(idx.name, own);
        }
        if (previous) for (const key of entriesOf(idx, previous).keys) own.delete(keyString(key));
        if (after) for (const key of entriesOf(idx, after).keys) own.set(keyString(key), id);
      }
    }
    tc.writes.set(id, after);
  }

  private assertReadVersionCurrent(name: string, id: string, row: Row | undefined, tx: Txn): void {
    const tc = tx.coll(name);
    if (tc.writes.has(id)) return; // written before: checked at commit
    const base = tc.base.get(id);
    if (base !== undefined && base !== (row?.v ?? 0)) {
      tx.conflict = true;
      throw new TransactionConflictError(`transaction write conflict on ${name}/${id}: changed by another writer since this transaction read it`);
    }
  }

  insert(name: string, input: unknown, tx: Txn | undefined): void {
    const doc = normalizeDocument(input);
    const id = doc._id as string;
    if (!tx) {
      // No lookup first: the document's own INSERT, the first statement of the write, finds an
      // id already taken (its UNIQUE constraint: DuplicateKeyError, nothing written).
      this.put(this.ensure(name), id, undefined, doc);
      return;
    }
    const { exists, row } = this.visible(name, id, tx);
    if (exists) throw new DuplicateKeyError(ID_INDEX);
    this.write1(name, id, row, doc, tx);
  }

  /**
   * An ordered insert outside a transaction (`insertMany`): the documents before a failure stay in.
   * Each document has a savepoint of its own only where part of it can be refused after its row
   * is written, a unique index besides the id. Elsewhere every refusal (a document that is not
   * one, an id taken, parallel arrays) comes before the document's first statement, and an SQLite
   * error after it fails the whole write instead, so a half-written document is never committed.
   */
  insertOrdered(name: string, docs: readonly unknown[]): void {
    const guarded = this.ensure(name).indexes.some((idx) => idx.unique);
    for (const doc of docs) {
      if (guarded) {
        this.atomic(() => this.insert(name, doc, undefined));
        continue;
      }
      try {
        this.insert(name, doc, undefined);
      } catch (err) {
        if (err instanceof Database.SqliteError) throw new HalfWritten(err);
        throw err;
      }
    }
  }

  update(name: string, filter: Filter, update: Update, opts: { multi: boolean; upsert: boolean; sort?: SortSpec }, tx: Txn | undefined): WriteOutcome {
    const compiled = compileUpdate(update);
    const queryOpts: QueryOptions = { limit: opts.multi ? 0 : 1 };
    if (opts.sort !== undefined) queryOpts.sort = opts.sort;
    const { docs, rows } = this.query(name, filter, queryOpts, tx);
    if (docs.length === 0) {
      if (!opts.upsert) return { matched: 0, modified: 0 };
      const seed = upsertSeed(filter, compiled);
      const { doc } = applyUpdate(seed, compiled, { insert: true, filter });
      const id = doc._id as string;
      const { exists, row } = this.visible(name, id, tx);
      if (exists) throw new DuplicateKeyError(ID_INDEX);
      this.write1(name, id, row, doc, tx);
      return { matched: 0, modified: 0, upsertedId: id, after: doc };
    }
    // Every new version first: a bad update (`$inc` on a string) then changes nothing.
    const changes = docs.map((old, i) => ({ old, found: rows[i], ...applyUpdate(old, compiled, { insert: false, filter }) }));
    let modified = 0;
    for (const change of changes) {
      const id = change.old._id as string;
      // A committed document as just read (same synchronous step), or the committed row under a
      // transaction's own version.
      const row = change.found ?? this.rowMeta(name, id);
      if (!change.changed) {
        // Changing nothing still decided on a version the transaction may have read earlier.
        if (tx) this.assertReadVersionCurrent(name, id, row, tx);
        continue;
      }
      if (!tx && opts.multi) {
        // Each document on its own: a duplicate key stops updateMany, earlier documents keep their change.
        this.atomic(() => this.write1(name, id, row, change.doc, tx));
      } else {
        this.write1(name, id, row, change.doc, tx);
      }
      modified++;
    }
    const first = changes[0];
    return { matched: docs.length, modified, before: first?.old, after: first?.changed ? first.doc : first?.old };
  }

  delete(name: string, filter: Filter, opts: { multi: boolean; sort?: SortSpec }, tx: Txn | undefined): Doc[] {
    const queryOpts: QueryOptions = { limit: opts.multi ? 0 : 1 };
    if (opts.sort !== undefined) queryOpts.sort = opts.sort;
    const { docs, rows } = this.query(name, filter, queryOpts, tx);
    docs.forEach((doc, i) => {
      const id = doc._id as string;
      this.write1(name, id, rows[i] ?? this.rowMeta(name, id), null, tx);
    });
    return docs;
  }

  createIndexes(name: string, specs: readonly IndexSpec[]): void {
    if (!Array.isArray(specs)) throw new TypeError('createIndexes needs an array of index specs');
    const normalized = specs.map(normalizeIndexSpec);
    if (normalized.length === 0) return;
    const c = this.ensure(name);
    for (const spec of normalized) {
      const existing = [...c.indexes, ...c.texts].find((i) => i.name === spec.name);
      if (existing) {
        if (sameIndexSpec(existing.spec, spec)) continue;
        throw new Error(`index ${spec.name} already exists on ${name} with different keys or options`);
      }
      const { no } = this.db.prepare('SELECT coalesce(max(no), 0) + 1 AS no FROM store_indexes WHERE coll = ?').get(c.no) as { no: number };
      this.db.prepare('INSERT INTO store_indexes (coll, no, name, spec, multikey) VALUES (?, ?, ?, ?, 0)').run(c.no, no, spec.name, encodeJson(toIndexSpec(spec)));
      this.attachIndex(c, no, spec, false);
      this.catalogChanged = true;
      if (spec.substring) {
        const t = c.texts[c.texts.length - 1] as TextState;
        // Trigrams of the exact characters (no case folding): the substring test stays case-sensitive.
        this.db.exec(
          `CREATE VIRTUAL TABLE ${t.table} USING fts5(t, tokenize = 'trigram case_sensitive 1', detail = none, content = '', contentless_delete = 1); ` +
            deleteMergeSql(t.table),
        );
        this.db.exec(`CREATE VIRTUAL TABLE ${t.vocab} USING fts5vocab(${t.table}, 'row')`);
        this.fillText(c, t);
        continue;
      }
      const all = this.db.prepare(`SELECT rid, id, json(doc) AS doc FROM ${c.table}`).all() as { rid: number; id: string; doc: string }[];
      const idx = c.indexes[c.indexes.length - 1] as IndexState;
      const cols = idx.fields.map((_, i) => `k${i} BLOB NOT NULL`).join(', ');
      const keyCols = idx.fields.map((_, i) => `k${i} ${idx.dirs[i] === 1 ? 'ASC' : 'DESC'}`);
      const idDir = idx.dirs[idx.dirs.length - 1] === 1 ? 'ASC' : 'DESC';
      const pk = idx.unique ? keyCols : [...keyCols, `id ${idDir}`];
      this.db.exec(`CREATE TABLE ${idx.table} (${cols}, id TEXT NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (${pk.join(', ')})) WITHOUT ROWID`);
      const insert = this.prepare(`INSERT INTO ${idx.table} (${idx.fields.map((_, i) => `k${i}`).join(', ')}, id, rid) VALUES (${idx.fields.map(() => '?').join(', ')}, ?, ?)`);
      let multikey = false;
      for (const r of all) {
        const entries = entriesOf(idx, decodeJson(r.doc) as Doc);
        multikey ||= entries.multikey;
        for (const key of entries.keys) {
          try {
            insert.run(...key, r.id, r.rid);
          } catch (err) {
            if (isConstraintError(err)) throw new DuplicateKeyError(spec.name);
            throw err;
          }
        }
      }
      if (multikey) {
        idx.multikey = true;
        c.epoch++;
        this.db.prepare('UPDATE store_indexes SET multikey = 1 WHERE coll = ? AND no = ?').run(c.no, no);
      }
    }
  }

  dropIndexes(name: string, names: readonly string[]): void {
    if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) throw new TypeError('dropIndexes needs an array of index names');
    const c = this.state(name);
    if (!c) return;
    for (const indexName of names) {
      const idx = c.indexes.find((i) => i.name === indexName);
      const text = idx ? undefined : c.texts.find((t) => t.name === indexName);
      if (!idx && !text) continue;
      const no = (idx ?? text)!.no;
      const tables = idx ? [idx.table] : [text!.vocab, text!.table, text!.pending];
      for (const table of tables) this.db.exec(`DROP TABLE IF EXISTS ${table}`);
      this.db.prepare('DELETE FROM store_indexes WHERE coll = ? AND no = ?').run(c.no, no);
      if (idx) c.indexes.splice(c.indexes.indexOf(idx), 1);
      if (text) {
        c.texts.splice(c.texts.indexOf(text), 1);
        this.textsPending.delete(text);
      }
      // Plans, kept results and query shapes made with it are stale; so is every statement on its
      // tables (an index made later may take the same number, so the same table names).
      c.epoch++;
      const named = new RegExp(`\\b(${tables.join('|')})\\b`);
      for (const sql of [...this.statements.keys()]) if (named.test(sql)) this.statements.delete(sql);
      this.catalogChanged = true;
    }
  }

  /** Undoes `createIndexes`' in-memory changes when its SQLite transaction rolled back. */
  reloadCatalog(): void {
    this.collections.clear();
    this.statements.clear();
    this.docs.clear();
    this.loadCatalog();
  }

  // ---- transactions ------------------------------------------------------------------------

  beginTransaction(): StoreTransaction {
    this.assertUsable();
    const tx = new Txn();
    this.txns.set(tx.session, tx);
    return {
      session: tx.session,
      get state() {
        return tx.state;
      },
      commit: async (onCommitted?: () => void) => {
        try {
          if (tx.state !== 'active') throw new Error(`transaction ${tx.session.id} has already ended`);
          if (tx.conflict) throw new TransactionConflictError();
          const writes = [...tx.colls].filter(([, tc]) => tc.writes.size > 0);
          if (writes.length === 0) {
            tx.state = 'committed';
            notifyCommitted(onCommitted, this.warn);
            await this.read(() => undefined);
            return;
          }
          await this.write(() => this.commit(tx, writes), onCommitted);
          tx.state = 'committed';
        } finally {
          if (tx.state === 'active') tx.state = 'aborted';
        }
      },
      abort: () => {
        if (tx.state === 'active') tx.state = 'aborted';
      },
    };
  }

  async withTransaction<R>(fn: (session: StoreSession) => Promise<R>, options?: TransactionOptions): Promise<R> {
    if (typeof fn !== 'function') throw new TypeError('withTransaction needs a function');
    for (let attempt = 1; ; attempt++) {
      const tx = this.beginTransaction();
      try {
        const result = await fn(tx.session);
        await tx.commit(options?.onCommitted);
        return result;
      } catch (err) {
        tx.abort();
        if (err instanceof TransactionConflictError && attempt < MAX_TRANSACTION_ATTEMPTS) {
          await sleep(conflictBackoffMs(attempt));
          continue;
        }
        throw err;
      }
    }
  }

  /** Inside one SQLite transaction: validate every buffered write, then apply them all. */
  private commit(tx: Txn, writes: [string, TxnCollection][]): void {
    const work: { c: CollState; id: string; row: Row | undefined; after: Doc | null; tc: TxnCollection; changes: IndexChange[] }[] = [];
    for (const [name, tc] of writes) {
      const c = this.ensure(name);
      for (const [id, after] of tc.writes) {
        const base = tc.base.get(id);
        // A document the transaction found absent and now writes is not read again: its INSERT
        // meets an id taken since by the id's UNIQUE constraint (a conflict, below).
        const row = base === 0 && after !== null ? undefined : this.rowById(c, id);
        if ((row?.v ?? 0) !== base) {
          throw new TransactionConflictError(`transaction write conflict on ${name}/${id}: another writer committed first`);
        }
        work.push({ c, id, row, after, tc, changes: this.changesOf(c, row?.doc ?? null, after) });
      }
    }
    // Old index entries of every document first, so keys moving between the transaction's own
    // documents do not clash with themselves.
    for (const w of work) if (w.row) this.unindex(w.c, w.id, w.row.rid, w.row.doc, w.after, w.changes);
    for (const w of work) {
      try {
        this.store(w.c, w.id, w.row, w.row?.doc ?? null, w.after, w.changes);
      } catch (err) {
        if (err instanceof DuplicateKeyError && !this.clashIsOwn(w.c, err.index, w.after, w.tc)) {
          // Someone committed the same key after this transaction's own check passed: run it again.
          throw new TransactionConflictError(`transaction conflict: a document committed meanwhile holds the same key in unique index ${err.index}`);
        }
        throw err;
      }
    }
  }

  /** Whether the document holding `after`'s key in `index` is one of the transaction's own. */
  private clashIsOwn(c: CollState, index: string, after: Doc | null, tc: TxnCollection): boolean {
    if (index === ID_INDEX) return false;
    const idx = c.indexes.find((i) => i.name === index);
    if (!idx || !after) return false;
    idx.find ??= this.prepare(`SELECT id FROM ${idx.table} WHERE ${idx.fields.map((_, i) => `k${i} = ?`).join(' AND ')}`);
    for (const key of entriesOf(idx, after).keys) {
      for (const { id } of idx.find.all(...key) as { id: string }[]) if (id !== after._id && tc.writes.has(id)) return true;
    }
    return false;
  }

  // ---- expiry ------------------------------------------------------------------------------

  /**
   * A sweep started by a timer. Started in a promise: whatever fails, even before the sweep's
   * first await (the clock, say), is reported and never escapes the timer as an uncaught
   * exception. Expiry is housekeeping: a failed sweep runs again on the next tick.
   */
  private sweepInBackground(): void {
    if (this.closed) return;
    Promise.resolve()
      .then(() => this.sweepExpired())
      .catch((err: unknown) => {
        if (!this.closed) this.warn({ path: this.path, error: (err as Error).message }, 'store expiry sweep failed; it runs again on the next tick');
      });
  }

  /**
   * Deletes up to SWEEP_LIMIT expired documents in one SQLite transaction, synchronously (before
   * the returned promise is even looked at); the promise resolves once that is on disk.
   */
  sweepExpired(): Promise<number> {
    const now = this.clock().getTime();
    return this.write(() => {
      let removed = 0;
      for (const c of [...this.collections.values()]) {
        for (const idx of c.indexes) {
          const ttl = idx.spec.expireAfterSeconds;
          if (ttl === undefined || removed >= SWEEP_LIMIT) continue;
          const cutoff = encodeKey(new Date(now - ttl * 1000));
          const stmt = this.prepare(`SELECT DISTINCT rid FROM ${idx.table} WHERE k0 >= ? AND k0 <= ? LIMIT ?`);
          const rids = (stmt.all(Buffer.from([0x90]), cutoff, SWEEP_LIMIT - removed) as { rid: number }[]).map((r) => r.rid);
          for (const row of this.rowsByRid(c, rids).values()) {
            this.put(c, row.doc._id as string, row, null);
            removed++;
          }
        }
      }
      if (removed >= SWEEP_LIMIT) {
        // More to do: continue soon rather than at the next interval, without blocking now.
        setTimeout(() => this.sweepInBackground(), 10).unref();
      }
      return removed;
    });
  }
}

/**
 * A filter's shape: its fields and operators, the kind of each value and the length of each list
 * (values of the same kind give the planner the same candidates).
 */
function shapeOf(value: unknown): string {
  if (value === null) return 'n';
  switch (typeof value) {
    case 'string':
      return 's';
    case 'number':
      return 'd';
    case 'boolean':
      return value ? 't' : 'f';
    case 'object':
      break;
    default:
      return '?';
  }
  if (Array.isArray(value)) {
    let out = '[';
    for (const v of value) out += `${shapeOf(v)},`;
    return `${out}]`;
  }
  if (value instanceof Date) return 'D';
  if (value instanceof RegExp) return `/${value.flags}`;
  let out = '{';
  for (const key of Object.keys(value)) out += `${JSON.stringify(key)}:${shapeOf((value as Record<string, unknown>)[key])},`;
  return `${out}}`;
}

function isStatement(value: unknown): value is Statement {
  return typeof value === 'object' && value !== null && typeof (value as Statement).iterate === 'function' && typeof (value as Statement).source === 'string';
}

/** The id of a filter that is exactly `{_id: <string>}`. */
function onlyId(filter: Filter): string | undefined {
  const id = filter._id;
  if (typeof id !== 'string') return undefined;
  for (const key in filter) if (key !== '_id') return undefined;
  return id;
}

function pathDir(file: string): string {
  return path.dirname(path.resolve(file));
}

function emptyExplain(sorted: boolean): QueryExplain {
  return { plan: 'COLLSCAN', sql: '', docsExamined: 0, docsEvaluated: 0, nReturned: 0, inMemorySort: sorted };
}

class SqliteCollectionImpl<T extends StoredDocument> implements SqliteCollection<T> {
  constructor(
    private readonly store: SqliteStore,
    readonly name: string,
  ) {}

  /**
   * The caller's copy of `doc`: the store's documents (cached, or a transaction's buffered ones)
   * are never handed out; a projection copies, and so does `cloneValue`.
   */
  private out(doc: Doc, compiled: CompiledProjection | undefined): T {
    return (compiled ? compiled.apply(doc) : cloneValue(doc)) as T;
  }

  /**
   * `readonly` documents (port.ts): outside a transaction, the one frozen copy of the stored
   * document `doc` (with `projection`) that every readonly read of this row version gets; inside
   * one (its documents are its own buffered versions) a frozen copy of its own.
   */
  private shared(docs: readonly Doc[], projection: Projection | undefined, compiled: CompiledProjection | undefined, inTransaction: boolean): T[] {
    const copy = (d: Doc): T => deepFreeze(this.out(d, compiled));
    if (inTransaction) return docs.map(copy) as T[];
    const memo = this.store.sharedCopies(projection);
    return docs.map((d) => {
      let frozen = memo.get(d);
      if (frozen === undefined) memo.set(d, (frozen = copy(d)));
      return frozen;
    }) as T[];
  }

  async createIndexes(specs: readonly IndexSpec[]): Promise<void> {
    const store = this.store;
    await store.write(() => store.createIndexes(this.name, specs));
  }

  async dropIndexes(names: readonly string[]): Promise<void> {
    const store = this.store;
    await store.write(() => store.dropIndexes(this.name, names));
  }

  async insertOne(doc: T, options?: SessionOption): Promise<void> {
    assertOptions(options, ['session'], 'insertOne');
    const store = this.store;
    const tx = store.txOf(options);
    if (tx) return store.read(() => store.insert(this.name, doc, tx), true);
    await store.write(() => store.insert(this.name, doc, undefined));
  }

  async insertMany(docs: readonly T[], options?: SessionOption): Promise<void> {
    assertOptions(options, ['session'], 'insertMany');
    if (!Array.isArray(docs)) throw new TypeError('insertMany needs an array of documents');
    const store = this.store;
    const tx = store.txOf(options);
    if (tx) return store.read(() => docs.forEach((doc) => store.insert(this.name, doc, tx)), true);
    if (docs.length === 0) return;
    // Ordered: documents before a failure stay inserted.
    await store.writePartial(() => store.insertOrdered(this.name, docs));
  }

  async findOne(filter: Filter, options?: FindOneOptions): Promise<T | null> {
    assertOptions(options, ['session', 'sort', 'projection', 'readonly'], 'findOne');
    const store = this.store;
    const tx = store.txOf(options);
    const projection = compileProjection(options?.projection);
    const { docs } = await store.read(() => store.query(this.name, filter, { ...sortOf(options), limit: 1 }, tx), tx !== undefined, this.name);
    const doc = docs[0];
    if (!doc) return null;
    return options?.readonly === true ? (this.shared([doc], options.projection, projection, tx !== undefined)[0] as T) : this.out(doc, projection);
  }

  async find(filter: Filter, options?: FindOptions): Promise<T[]> {
    assertOptions(options, ['session', 'sort', 'projection', 'skip', 'limit', 'readonly'], 'find');
    const store = this.store;
    const tx = store.txOf(options);
    const projection = compileProjection(options?.projection);
    const { docs } = await store.read(() => store.query(this.name, filter, pageOf(options), tx), tx !== undefined, this.name);
    if (options?.readonly === true) return this.shared(docs, options.projection, projection, tx !== undefined);
    return docs.map((d) => this.out(d, projection));
  }

  async explain(filter: Filter, options?: FindOptions): Promise<QueryExplain> {
    assertOptions(options, ['session', 'sort', 'projection', 'skip', 'limit'], 'explain');
    const store = this.store;
    const tx = store.txOf(options);
    return (await store.read(() => store.query(this.name, filter, pageOf(options), tx), false, this.name)).explain;
  }

  async countDocuments(filter: Filter, options?: SessionOption): Promise<number> {
    assertOptions(options, ['session'], 'countDocuments');
    const store = this.store;
    const tx = store.txOf(options);
    return store.read(() => store.count(this.name, filter, tx), tx !== undefined, this.name);
  }

  async updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    return this.updateWith(filter, update, options, false, 'updateOne');
  }

  async updateMany(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    return this.updateWith(filter, update, options, true, 'updateMany');
  }

  private run<R>(tx: Txn | undefined, fn: () => R, partial = false): Promise<R> {
    const store = this.store;
    if (tx) return store.read(fn, true);
    return partial ? store.writePartial(fn) : store.write(fn);
  }

  private async updateWith(filter: Filter, update: Update, options: UpdateOptions | undefined, multi: boolean, method: string): Promise<UpdateResult> {
    assertOptions(options, ['session', 'upsert'], method);
    const store = this.store;
    const tx = store.txOf(options);
    const outcome = await this.run(tx, () => store.update(this.name, filter, update, { multi, upsert: options?.upsert === true }, tx), multi);
    const result: UpdateResult = { matchedCount: outcome.matched, modifiedCount: outcome.modified };
    if (outcome.upsertedId !== undefined) result.upsertedId = outcome.upsertedId;
    return result;
  }

  async findOneAndUpdate(filter: Filter, update: Update, options?: FindOneAndUpdateOptions): Promise<T | null> {
    assertOptions(options, ['session', 'sort', 'upsert', 'returnDocument', 'projection'], 'findOneAndUpdate');
    const returnDocument = options?.returnDocument ?? 'after';
    if (returnDocument !== 'after' && returnDocument !== 'before') throw new TypeError("returnDocument must be 'before' or 'after'");
    const projection = compileProjection(options?.projection);
    const store = this.store;
    const tx = store.txOf(options);
    const outcome = await this.run(tx, () => store.update(this.name, filter, update, { multi: false, upsert: options?.upsert === true, ...sortOf(options) }, tx));
    const doc = returnDocument === 'after' ? outcome.after : outcome.before;
    return doc ? this.out(doc, projection) : null;
  }

  async findOneAndDelete(filter: Filter, options?: FindOneOptions): Promise<T | null> {
    assertOptions(options, ['session', 'sort', 'projection'], 'findOneAndDelete');
    const projection = compileProjection(options?.projection);
    const store = this.store;
    const tx = store.txOf(options);
    const [doc] = await this.run(tx, () => store.delete(this.name, filter, { multi: false, ...sortOf(options) }, tx));
    return doc ? this.out(doc, projection) : null;
  }

  async deleteOne(filter: Filter, options?: SessionOption): Promise<DeleteResult> {
    assertOptions(options, ['session'], 'deleteOne');
    const store = this.store;
    const tx = store.txOf(options);
    return { deletedCount: (await this.run(tx, () => store.delete(this.name, filter, { multi: false }, tx))).length };
  }

  async deleteMany(filter: Filter, options?: SessionOption): Promise<DeleteResult> {
    assertOptions(options, ['session'], 'deleteMany');
    const store = this.store;
    const tx = store.txOf(options);
    return { deletedCount: (await this.run(tx, () => store.delete(this.name, filter, { multi: true }, tx))).length };
  }
}

function sortOf(options: { sort?: SortSpec } | undefined): { sort?: SortSpec } {
  return options?.sort !== undefined ? { sort: options.sort } : {};
}

function pageOf(options: FindOptions | undefined): QueryOptions {
  const out: QueryOptions = {};
  if (options?.sort !== undefined) out.sort = options.sort;
  if (options?.skip !== undefined) out.skip = options.skip;
  if (options?.limit !== undefined) out.limit = options.limit;
  return out;
}

/** Opens (creating if needed) a store in the SQLite file `options.path`, or in memory for `:memory:`. */
export function createSqliteStore(options: SqliteStoreOptions): SqliteDocumentStore {
  if (!isPlainObject(options)) throw new TypeError('createSqliteStore needs options');
  assertOptions(options, ['path', 'clock', 'expirySweepMs', 'cacheKiB', 'documentCacheKiB', 'textIndexDelayMs', 'keptResults', 'log', 'warn', 'onFlush'], 'createSqliteStore');
  if (typeof options.path !== 'string' || options.path === '') throw new TypeError("path must be a file name or ':memory:'");
  if (options.clock !== undefined && typeof options.clock !== 'function') throw new TypeError('clock must be a function returning a Date');
  if (options.onFlush !== undefined && typeof options.onFlush !== 'function') throw new TypeError('onFlush must be a function');
  return new SqliteStore(options.path, options);
}
