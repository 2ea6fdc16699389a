/**
 * The embedded document store: MongoDB filter and update semantics over in-memory collections,
 * with real indexes, optimistic transactions and optional file persistence.
 *
 * Every operation runs synchronously from reading to writing (no `await` in between), so on the
 * single JS thread each one is atomic towards every other operation. Transactions buffer their
 * writes in an overlay and validate at commit (first committer wins).
 */
import { randomUUID } from 'node:crypto';
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
  type SortSpec,
  type StoreSession,
  type StoredDocument,
  type Update,
  type UpdateOptions,
  type UpdateResult,
} from '../port.js';
import { conflictBackoffMs, MAX_TRANSACTION_ATTEMPTS, sleep } from '../retry-policy.js';
import { compileFilter, dateRangeUpTo } from '../document/filter.js';
import { ID_INDEX, IndexState, normalizeIndexSpec, sameIndexSpec, toIndexSpec, type IndexEntry, type IndexKeys } from './index-state.js';
import { compileProjection } from '../document/paths.js';
import { Persistence, type JournalOp, type LoadedState } from './persistence.js';
import { compileSort, execute, sortBy, type QueryExplain, type Rec } from './planner.js';
import { SortedList } from './sorted-list.js';
import { applyUpdate, compileUpdate, upsertSeed } from '../document/update.js';
import { cloneValue, isPlainObject, normalizeValue } from '../document/values.js';

export type { QueryExplain } from './planner.js';

type Doc = Record<string, unknown>;

export interface EmbeddedStoreOptions {
  /** Directory for the snapshot and journal files. Without it the store lives in memory only. */
  dataDir?: string;
  /** File name prefix inside `dataDir` (default `store`). */
  name?: string;
  /** Time source for TTL expiry (default: the system clock). */
  clock?: () => Date;
  /** How often expired documents are removed (default 60 000 ms, like MongoDB's TTL monitor). */
  expirySweepMs?: number;
  /** Journal size in bytes that triggers folding it into the snapshot (default 64 MiB). */
  compactAfterBytes?: number;
}

export interface EmbeddedCollection<T extends StoredDocument = StoredDocument> extends Collection<T> {
  /** Runs the query like `find` and reports how it was executed (for tests and diagnostics). */
  explain(filter: Filter, options?: FindOptions): Promise<QueryExplain>;
}

/**
 * A transaction begun explicitly (`withTransaction` is built on it). Operations that pass
 * `session` take part; nothing is visible to others until `commit()`.
 */
export interface EmbeddedTransaction {
  readonly session: StoreSession;
  /** `active` until `commit()` or `abort()`; a commit that throws leaves it `aborted`. */
  readonly state: 'active' | 'committed' | 'aborted';
  /**
   * Validates and applies every buffered write at once. Throws TransactionConflictError (run the
   * whole transaction again) or DuplicateKeyError; either way the transaction has ended.
   */
  commit(): Promise<void>;
  /** Discards the buffered writes. A no-op once the transaction has ended. */
  abort(): void;
}

export interface EmbeddedDocumentStore extends DocumentStore {
  readonly kind: 'embedded';
  collection<T extends StoredDocument = StoredDocument>(name: string): EmbeddedCollection<T>;
  /**
   * Starts a transaction without running it: for callers that cannot hand over a function, such
   * as a server mapping a client's start/commit/abort onto the store. No retries: on
   * TransactionConflictError from an operation or from `commit()`, begin again.
   */
  beginTransaction(): EmbeddedTransaction;
  /** Removes documents whose TTL has passed, now; returns how many. The sweep timer calls this. */
  sweepExpired(): number;
}

const DEFAULT_SWEEP_MS = 60_000;
const DEFAULT_COMPACT_BYTES = 64 * 1024 * 1024;

class CollectionState {
  readonly records = new Map<string, Rec>();
  readonly indexes = new Map<string, IndexState>();

  constructor(readonly name: string) {
    this.indexes.set(ID_INDEX, new IndexState({ name: ID_INDEX, keys: [['_id', 1]], unique: true }));
  }

  *uniqueIndexes(): Generator<IndexState> {
    for (const idx of this.indexes.values()) if (idx.unique && idx.name !== ID_INDEX) yield idx;
  }

  /**
   * Every index's keys for a document, computed once per write. Throws if the document cannot be
   * indexed (parallel arrays) before anything changes.
   */
  keysFor(doc: Doc): Map<IndexState, IndexKeys> {
    const out = new Map<IndexState, IndexKeys>();
    for (const idx of this.indexes.values()) out.set(idx, idx.keysOf(doc));
    return out;
  }

  /** The unique index `doc` (stored as `id`) would violate against committed documents not `ignored`. */
  uniqueViolation(id: string, keys: Map<IndexState, IndexKeys>, ignored: (otherId: string) => boolean): string | undefined {
    for (const idx of this.uniqueIndexes()) {
      for (const k of (keys.get(idx) as IndexKeys).keys) {
        if (idx.findOther(k, id, (other) => !ignored(other)) !== undefined) return idx.name;
      }
    }
    return undefined;
  }

  apply(id: string, after: Doc | null, v: number, keys?: Map<IndexState, IndexKeys>): void {
    const before = this.records.get(id);
    for (const idx of this.indexes.values()) {
      if (before) idx.remove(id, before.doc);
      if (after) idx.add(id, after, keys?.get(idx));
    }
    if (after) this.records.set(id, { doc: after, v });
    else this.records.delete(id);
  }
}

interface TxnCollection {
  /** The transaction's version of each document it wrote (`null`: deleted). */
  readonly writes: Map<string, Doc | null>;
  /** Committed version of each document when the transaction first read or wrote it (0: absent). */
  readonly base: Map<string, number>;
  /** Unique-index entries of the overlay documents, per index name. */
  readonly uniq: Map<string, SortedList<IndexEntry>>;
}

class Txn {
  readonly session: StoreSession;
  state: 'active' | 'committed' | 'aborted' = 'active';
  /** A conflict was already detected; the commit must fail even if `fn` swallowed the error. */
  conflict = false;
  readonly colls = new Map<string, TxnCollection>();

  constructor() {
    this.session = Object.freeze({ id: randomUUID() });
  }

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

class EmbeddedStore implements EmbeddedDocumentStore {
  readonly kind = 'embedded' as const;
  private readonly collections = new Map<string, CollectionState>();
  private readonly handles = new Map<string, EmbeddedCollectionImpl<StoredDocument>>();
  private readonly txns = new WeakMap<StoreSession, Txn>();
  private readonly clock: () => Date;
  private readonly persistence: Persistence | undefined;
  private readonly sweepTimer: ReturnType<typeof setInterval> | undefined;
  private pending: JournalOp[] = [];
  private seq = 0;
  private closed = false;
  private failure: Error | undefined;

  constructor(options: EmbeddedStoreOptions) {
    assertOptions(options, ['dataDir', 'name', 'clock', 'expirySweepMs', 'compactAfterBytes'], 'createEmbeddedStore');
    this.clock = options.clock ?? (() => new Date());
    const sweepMs = options.expirySweepMs ?? DEFAULT_SWEEP_MS;
    if (!Number.isFinite(sweepMs) || sweepMs <= 0) throw new TypeError('expirySweepMs must be a positive number');
    if (options.clock !== undefined && typeof options.clock !== 'function') throw new TypeError('clock must be a function returning a Date');
    const compactAfterBytes = options.compactAfterBytes ?? DEFAULT_COMPACT_BYTES;
    if (!Number.isFinite(compactAfterBytes) || compactAfterBytes <= 0) throw new TypeError('compactAfterBytes must be a positive number');
    if (options.dataDir !== undefined) {
      const { persistence, loaded } = Persistence.open(options.dataDir, options.name ?? 'store', compactAfterBytes);
      this.persistence = persistence;
      try {
        this.load(loaded);
        if (persistence.hasJournal) this.compact();
      } catch (err) {
        persistence.close();
        throw err;
      }
    }
    this.sweepTimer = setInterval(() => {
      try {
        this.sweepExpired();
      } catch (err) {
        // Expiry is housekeeping; a failed sweep is retried on the next tick.
        process.emitWarning(`embedded store TTL sweep failed: ${(err as Error).message}`);
      }
    }, sweepMs);
    this.sweepTimer.unref();
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  private load(loaded: LoadedState): void {
    this.seq = loaded.seq;
    const v = Math.max(1, loaded.seq);
    for (const [name, lc] of loaded.collections) {
      const state = this.state(name);
      for (const [id, doc] of lc.docs) state.records.set(id, { doc, v });
      for (const spec of lc.indexes.values()) state.indexes.set(spec.name, new IndexState(normalizeIndexSpec(spec)));
      const entries = [...state.records].map(([id, rec]) => [id, rec.doc] as [string, Doc]);
      for (const idx of state.indexes.values()) idx.load(entries);
    }
  }

  private compact(): void {
    if (!this.persistence) return;
    const sources = [...this.collections.values()]
      .filter((s) => s.records.size > 0 || s.indexes.size > 1)
      .map((s) => ({
        name: s.name,
        indexes: [...s.indexes.values()].filter((i) => i.name !== ID_INDEX).map((i) => toIndexSpec(i.spec)),
        docs: (function* () {
          for (const rec of s.records.values()) yield rec.doc;
        })(),
      }));
    this.persistence.writeSnapshot(this.seq, sources);
  }

  private assertUsable(): void {
    if (this.closed) throw new Error('embedded store is closed');
    if (this.failure) throw new Error(`embedded store stopped after a journal write failed: ${this.failure.message}`);
  }

  /** Runs one operation synchronously and journals what it changed, even if it stopped part-way. */
  run<R>(fn: () => R): R {
    this.assertUsable();
    try {
      return fn();
    } finally {
      this.flushJournal();
    }
  }

  private flushJournal(): void {
    if (this.pending.length === 0) return;
    const ops = this.pending;
    this.pending = [];
    if (!this.persistence) return;
    try {
      // Each journal line gets its own sequence number (index creation bumps no document version),
      // so replay can tell exactly which lines a snapshot already holds.
      this.persistence.append(++this.seq, ops);
    } catch (err) {
      // Memory now holds changes the files do not: refuse further work rather than diverge silently.
      this.failure = err as Error;
      throw err;
    }
    if (this.persistence.shouldCompact) {
      try {
        this.compact();
      } catch (err) {
        // The journal still holds everything; compaction is retried once it has grown further.
        this.persistence.deferCompaction();
        process.emitWarning(`embedded store snapshot failed: ${(err as Error).message}`);
      }
    }
  }

  async ping(): Promise<void> {
    this.assertUsable();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.persistence?.close();
  }

  // ---- collections -------------------------------------------------------------------------

  collection<T extends StoredDocument = StoredDocument>(name: string): EmbeddedCollection<T> {
    assertCollectionName(name);
    let handle = this.handles.get(name);
    if (!handle) {
      handle = new EmbeddedCollectionImpl(this, name);
      this.handles.set(name, handle);
    }
    return handle as unknown as EmbeddedCollection<T>;
  }

  state(name: string): CollectionState {
    let state = this.collections.get(name);
    if (!state) {
      state = new CollectionState(name);
      this.collections.set(name, state);
    }
    return state;
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

  query(state: CollectionState, filter: Filter, opts: QueryOptions, tx: Txn | undefined): { docs: Doc[]; explain: QueryExplain } {
    const matcher = compileFilter(filter);
    const sort = compileSort(opts.sort);
    const skip = countOption(opts.skip, 'skip');
    const limit = countOption(opts.limit, 'limit');
    const want = limit > 0 ? skip + limit : Infinity;
    const overlay = this.overlayOf(state, tx);
    const { recs, explain } = execute(state.records, state.indexes.values(), {
      filter,
      matcher,
      sort,
      want,
      ...(overlay ? { exclude: (id: string) => overlay.has(id) } : {}),
    });
    let items: { doc: Doc; rec?: Rec }[] = recs.map((rec) => ({ doc: rec.doc, rec }));
    if (overlay) {
      for (const doc of overlay.values()) if (doc && matcher(doc)) items.push({ doc });
      if (sort) items = sortBy(items, (i) => i.doc, sort);
    }
    items = items.slice(skip, Number.isFinite(want) ? want : undefined);
    if (tx) {
      // Remember the version each returned document had: writing it later is then checked
      // against this version, so a read-modify-write cannot overwrite a newer commit.
      const txc = tx.coll(state.name);
      for (const item of items) {
        const id = item.doc._id as string;
        if (item.rec && !txc.base.has(id)) txc.base.set(id, item.rec.v);
      }
    }
    explain.nReturned = items.length;
    return { docs: items.map((i) => i.doc), explain };
  }

  count(state: CollectionState, filter: Filter, tx: Txn | undefined): number {
    const matcher = compileFilter(filter);
    const overlay = this.overlayOf(state, tx);
    const { count } = execute(state.records, state.indexes.values(), {
      filter,
      matcher,
      sort: undefined,
      want: Infinity,
      countOnly: true,
      ...(overlay ? { exclude: (id: string) => overlay.has(id) } : {}),
    });
    let extra = 0;
    if (overlay) for (const doc of overlay.values()) if (doc && matcher(doc)) extra++;
    return count + extra;
  }

  private overlayOf(state: CollectionState, tx: Txn | undefined): Map<string, Doc | null> | undefined {
    const tc = tx?.colls.get(state.name);
    return tc && tc.writes.size > 0 ? tc.writes : undefined;
  }

  private visible(state: CollectionState, id: string, tx: Txn | undefined): Doc | undefined {
    const tc = tx?.colls.get(state.name);
    if (tc?.writes.has(id)) return tc.writes.get(id) ?? undefined;
    return state.records.get(id)?.doc;
  }

  // ---- writes ------------------------------------------------------------------------------

  /** The one write primitive: applies directly, or buffers into the transaction's overlay. */
  private write(state: CollectionState, id: string, after: Doc | null, tx: Txn | undefined): void {
    const keys = after ? state.keysFor(after) : undefined;
    if (!tx) {
      if (keys) {
        const violated = state.uniqueViolation(id, keys, () => false);
        if (violated !== undefined) throw new DuplicateKeyError(violated);
      }
      state.apply(id, after, ++this.seq, keys);
      this.pending.push(after ? { t: 'put', c: state.name, d: after } : { t: 'del', c: state.name, id });
      return;
    }
    const tc = tx.coll(state.name);
    const current = state.records.get(id)?.v ?? 0;
    const base = tc.base.get(id);
    if (base === undefined) {
      tc.base.set(id, current);
    } else if (base !== current) {
      tx.conflict = true;
      throw new TransactionConflictError(`transaction write conflict on ${state.name}/${id}: changed by another writer since this transaction read it`);
    }
    const unique = [...state.uniqueIndexes()];
    const newKeys = new Map<string, unknown[][]>();
    if (keys) {
      for (const idx of unique) {
        const own = (keys.get(idx) as IndexKeys).keys;
        newKeys.set(idx.name, own);
        const overlayList = tc.uniq.get(idx.name);
        for (const k of own) {
          const committedClash = idx.findOther(k, id, (other) => !tc.writes.has(other));
          const overlayClash = overlayList ? idx.findOther(k, id, () => true, overlayList) : undefined;
          if (committedClash !== undefined || overlayClash !== undefined) throw new DuplicateKeyError(idx.name);
        }
      }
    }
    const previous = tc.writes.get(id);
    for (const idx of unique) {
      let list = tc.uniq.get(idx.name);
      if (!list) {
        list = new SortedList<IndexEntry>(idx.compareEntries);
        tc.uniq.set(idx.name, list);
      }
      if (previous) for (const k of idx.keysOf(previous).keys) list.remove({ k, id });
      for (const k of newKeys.get(idx.name) ?? []) list.insert({ k, id });
    }
    tc.writes.set(id, after);
  }

  private assertReadVersionCurrent(state: CollectionState, id: string, tx: Txn): void {
    const tc = tx.coll(state.name);
    if (tc.writes.has(id)) return; // written before: checked at commit
    const base = tc.base.get(id);
    if (base !== undefined && base !== (state.records.get(id)?.v ?? 0)) {
      tx.conflict = true;
      throw new TransactionConflictError(`transaction write conflict on ${state.name}/${id}: changed by another writer since this transaction read it`);
    }
  }

  insert(state: CollectionState, input: unknown, tx: Txn | undefined): void {
    const doc = normalizeDocument(input);
    const id = doc._id as string;
    if (this.visible(state, id, tx)) throw new DuplicateKeyError(ID_INDEX);
    this.write(state, id, doc, tx);
  }

  update(
    state: CollectionState,
    filter: Filter,
    update: Update,
    opts: { multi: boolean; upsert: boolean; sort?: SortSpec },
    tx: Txn | undefined,
  ): WriteOutcome {
    const compiled = compileUpdate(update);
    const queryOpts: QueryOptions = { limit: opts.multi ? 0 : 1 };
    if (opts.sort !== undefined) queryOpts.sort = opts.sort;
    const { docs } = this.query(state, filter, queryOpts, tx);
    if (docs.length === 0) {
      if (!opts.upsert) return { matched: 0, modified: 0 };
      const seed = upsertSeed(filter, compiled);
      const { doc } = applyUpdate(seed, compiled, { insert: true, filter });
      const id = doc._id as string;
      if (this.visible(state, id, tx)) throw new DuplicateKeyError(ID_INDEX);
      this.write(state, id, doc, tx);
      return { matched: 0, modified: 0, upsertedId: id, after: doc };
    }
    // Compute every new version first: a bad update (e.g. `$inc` on a string) then changes nothing.
    const changes = docs.map((old) => ({ old, ...applyUpdate(old, compiled, { insert: false, filter }) }));
    if (tx) {
      // An update that changes nothing writes nothing, but it still decided on a document the
      // transaction may have read at an older version (`$set` of a value computed from that
      // read): it must conflict like a write would, or a read-modify-write loses an update.
      for (const change of changes) if (!change.changed) this.assertReadVersionCurrent(state, change.old._id as string, tx);
    }
    let modified = 0;
    for (const change of changes) {
      if (!change.changed) continue;
      this.write(state, change.old._id as string, change.doc, tx);
      modified++;
    }
    const first = changes[0];
    return { matched: docs.length, modified, before: first?.old, after: first?.changed ? first.doc : first?.old };
  }

  delete(state: CollectionState, filter: Filter, opts: { multi: boolean; sort?: SortSpec }, tx: Txn | undefined): Doc[] {
    const queryOpts: QueryOptions = { limit: opts.multi ? 0 : 1 };
    if (opts.sort !== undefined) queryOpts.sort = opts.sort;
    const { docs } = this.query(state, filter, queryOpts, tx);
    for (const doc of docs) this.write(state, doc._id as string, null, tx);
    return docs;
  }

  createIndexes(state: CollectionState, specs: readonly IndexSpec[]): void {
    if (!Array.isArray(specs)) throw new TypeError('createIndexes needs an array of index specs');
    const normalized = specs.map(normalizeIndexSpec);
    for (const spec of normalized) {
      const existing = state.indexes.get(spec.name);
      if (existing) {
        if (sameIndexSpec(existing.spec, spec)) continue;
        throw new Error(`index ${spec.name} already exists on ${state.name} with different keys or options`);
      }
      const idx = new IndexState(spec);
      idx.load([...state.records].map(([id, rec]) => [id, rec.doc]));
      if (idx.unique) {
        let prev: IndexEntry | undefined;
        for (const e of idx.list) {
          if (prev && prev.id !== e.id && idx.sameKey(prev, e)) throw new DuplicateKeyError(spec.name);
          prev = e;
        }
      }
      state.indexes.set(spec.name, idx);
      this.pending.push({ t: 'index', c: state.name, spec: toIndexSpec(spec) });
    }
  }

  // ---- transactions ------------------------------------------------------------------------

  beginTransaction(): EmbeddedTransaction {
    this.assertUsable();
    const tx = new Txn();
    this.txns.set(tx.session, tx);
    return {
      session: tx.session,
      get state() {
        return tx.state;
      },
      commit: async () => {
        try {
          this.run(() => this.commit(tx));
        } finally {
          if (tx.state === 'active') tx.state = 'aborted';
        }
      },
      abort: () => {
        if (tx.state === 'active') tx.state = 'aborted';
      },
    };
  }

  async withTransaction<R>(fn: (session: StoreSession) => Promise<R>): Promise<R> {
    if (typeof fn !== 'function') throw new TypeError('withTransaction needs a function');
    for (let attempt = 1; ; attempt++) {
      const tx = this.beginTransaction();
      try {
        const result = await fn(tx.session);
        await tx.commit();
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

  private commit(tx: Txn): void {
    if (tx.state !== 'active') throw new Error(`transaction ${tx.session.id} has already ended`);
    if (tx.conflict) throw new TransactionConflictError();
    const work: { state: CollectionState; tc: TxnCollection }[] = [];
    for (const [name, tc] of tx.colls) {
      if (tc.writes.size === 0) continue;
      const state = this.state(name);
      for (const id of tc.writes.keys()) {
        if ((state.records.get(id)?.v ?? 0) !== tc.base.get(id)) {
          throw new TransactionConflictError(`transaction write conflict on ${name}/${id}: another writer committed first`);
        }
      }
      this.checkBatchUnique(state, tc.writes);
      work.push({ state, tc });
    }
    // Validated: from here on nothing can fail, and no other operation runs until we return.
    for (const { state, tc } of work) {
      for (const [id, doc] of tc.writes) {
        state.apply(id, doc, ++this.seq);
        this.pending.push(doc ? { t: 'put', c: state.name, d: doc } : { t: 'del', c: state.name, id });
      }
    }
    tx.state = 'committed';
  }

  /**
   * Unique indexes over the committed state as the transaction would leave it. A clash with a
   * committed document means someone committed it after this transaction's own check passed
   * (a conflict: retrying re-runs the check inside `fn`); a clash among the transaction's own
   * documents can only come from an index created meanwhile and is a plain duplicate.
   */
  private checkBatchUnique(state: CollectionState, writes: Map<string, Doc | null>): void {
    for (const idx of state.uniqueIndexes()) {
      const mine: IndexEntry[] = [];
      for (const [id, doc] of writes) {
        if (!doc) continue;
        for (const k of idx.keysOf(doc).keys) {
          if (idx.findOther(k, id, (other) => !writes.has(other)) !== undefined) {
            throw new TransactionConflictError(`transaction conflict: a document committed meanwhile holds the same key in unique index ${idx.name}`);
          }
          mine.push({ k, id });
        }
      }
      mine.sort(idx.compareEntries);
      for (let i = 1; i < mine.length; i++) {
        const a = mine[i - 1] as IndexEntry;
        const b = mine[i] as IndexEntry;
        if (a.id !== b.id && idx.sameKey(a, b)) throw new DuplicateKeyError(idx.name);
      }
    }
  }

  // ---- expiry ------------------------------------------------------------------------------

  sweepExpired(): number {
    return this.run(() => {
      const now = this.clock().getTime();
      let removed = 0;
      for (const state of this.collections.values()) {
        for (const idx of state.indexes.values()) {
          const ttl = idx.spec.expireAfterSeconds;
          if (ttl === undefined) continue;
          const { start, end } = idx.interval([], dateRangeUpTo(new Date(now - ttl * 1000)));
          const ids = new Set<string>();
          for (const e of idx.list.forward(start, end)) ids.add(e.id);
          for (const id of ids) {
            if (!state.records.has(id)) continue;
            this.write(state, id, null, undefined);
            removed++;
          }
        }
      }
      return removed;
    });
  }
}

class EmbeddedCollectionImpl<T extends StoredDocument> implements EmbeddedCollection<T> {
  constructor(
    private readonly store: EmbeddedStore,
    readonly name: string,
  ) {}

  private out(doc: Doc, projection: unknown): T {
    const compiled = compileProjection(projection);
    return (compiled ? compiled.apply(doc) : cloneValue(doc)) as T;
  }

  async createIndexes(specs: readonly IndexSpec[]): Promise<void> {
    const store = this.store;
    store.run(() => store.createIndexes(store.state(this.name), specs));
  }

  async insertOne(doc: T, options?: SessionOption): Promise<void> {
    assertOptions(options, ['session'], 'insertOne');
    const store = this.store;
    const tx = store.txOf(options);
    store.run(() => store.insert(store.state(this.name), doc, tx));
  }

  async insertMany(docs: readonly T[], options?: SessionOption): Promise<void> {
    assertOptions(options, ['session'], 'insertMany');
    if (!Array.isArray(docs)) throw new TypeError('insertMany needs an array of documents');
    const store = this.store;
    const tx = store.txOf(options);
    store.run(() => {
      const state = store.state(this.name);
      for (const doc of docs) store.insert(state, doc, tx);
    });
  }

  async findOne(filter: Filter, options?: FindOneOptions): Promise<T | null> {
    assertOptions(options, ['session', 'sort', 'projection'], 'findOne');
    const store = this.store;
    const tx = store.txOf(options);
    compileProjection(options?.projection);
    const { docs } = store.run(() => store.query(store.state(this.name), filter, { ...sortOf(options), limit: 1 }, tx));
    const doc = docs[0];
    return doc ? this.out(doc, options?.projection) : null;
  }

  async find(filter: Filter, options?: FindOptions): Promise<T[]> {
    assertOptions(options, ['session', 'sort', 'projection', 'skip', 'limit'], 'find');
    const store = this.store;
    const tx = store.txOf(options);
    const projection = compileProjection(options?.projection);
    const { docs } = store.run(() => store.query(store.state(this.name), filter, pageOf(options), tx));
    return docs.map((d) => (projection ? projection.apply(d) : cloneValue(d)) as T);
  }

  async explain(filter: Filter, options?: FindOptions): Promise<QueryExplain> {
    assertOptions(options, ['session', 'sort', 'projection', 'skip', 'limit'], 'explain');
    const store = this.store;
    const tx = store.txOf(options);
    return store.run(() => store.query(store.state(this.name), filter, pageOf(options), tx)).explain;
  }

  async countDocuments(filter: Filter, options?: SessionOption): Promise<number> {
    assertOptions(options, ['session'], 'countDocuments');
    const store = this.store;
    const tx = store.txOf(options);
    return store.run(() => store.count(store.state(this.name), filter, tx));
  }

  async updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    return this.updateWith(filter, update, options, false, 'updateOne');
  }

  async updateMany(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    return this.updateWith(filter, update, options, true, 'updateMany');
  }

  private updateWith(filter: Filter, update: Update, options: UpdateOptions | undefined, multi: boolean, method: string): UpdateResult {
    assertOptions(options, ['session', 'upsert'], method);
    const store = this.store;
    const tx = store.txOf(options);
    const outcome = store.run(() => store.update(store.state(this.name), filter, update, { multi, upsert: options?.upsert === true }, tx));
    const result: UpdateResult = { matchedCount: outcome.matched, modifiedCount: outcome.modified };
    if (outcome.upsertedId !== undefined) result.upsertedId = outcome.upsertedId;
    return result;
  }

  async findOneAndUpdate(filter: Filter, update: Update, options?: FindOneAndUpdateOptions): Promise<T | null> {
    assertOptions(options, ['session', 'sort', 'upsert', 'returnDocument', 'projection'], 'findOneAndUpdate');
    const returnDocument = options?.returnDocument ?? 'after';
    if (returnDocument !== 'after' && returnDocument !== 'before') throw new TypeError("returnDocument must be 'before' or 'after'");
    compileProjection(options?.projection);
    const store = this.store;
    const tx = store.txOf(options);
    const outcome = store.run(() =>
      store.update(store.state(this.name), filter, update, { multi: false, upsert: options?.upsert === true, ...sortOf(options) }, tx),
    );
    const doc = returnDocument === 'after' ? outcome.after : outcome.before;
    return doc ? this.out(doc, options?.projection) : null;
  }

  async findOneAndDelete(filter: Filter, options?: FindOneOptions): Promise<T | null> {
    assertOptions(options, ['session', 'sort', 'projection'], 'findOneAndDelete');
    compileProjection(options?.projection);
    const store = this.store;
    const tx = store.txOf(options);
    const [doc] = store.run(() => store.delete(store.state(this.name), filter, { multi: false, ...sortOf(options) }, tx));
    return doc ? this.out(doc, options?.projection) : null;
  }

  async deleteOne(filter: Filter, options?: SessionOption): Promise<DeleteResult> {
    assertOptions(options, ['session'], 'deleteOne');
    const store = this.store;
    const tx = store.txOf(options);
    return { deletedCount: store.run(() => store.delete(store.state(this.name), filter, { multi: false }, tx)).length };
  }

  async deleteMany(filter: Filter, options?: SessionOption): Promise<DeleteResult> {
    assertOptions(options, ['session'], 'deleteMany');
    const store = this.store;
    const tx = store.txOf(options);
    return { deletedCount: store.run(() => store.delete(store.state(this.name), filter, { multi: true }, tx)).length };
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

/** Opens an embedded store; with `dataDir` it loads (and compacts) the files there first. */
export function createEmbeddedStore(options: EmbeddedStoreOptions = {}): EmbeddedDocumentStore {
  return new EmbeddedStore(options);
}
