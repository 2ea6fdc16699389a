/**
 * MongoDB commands mapped onto the embedded store: what the official Node driver sends for the
 * store port's operations (CRUD, countDocuments, indexes, sessions and transactions) plus the
 * handshake and a few housekeeping commands. Options this server cannot honour are refused with
 * an error naming them, never ignored, so a test cannot pass on something MongoDB would do
 * differently.
 */
import { Long, type Document } from 'bson';
import {
  createEmbeddedStore,
  DuplicateKeyError,
  TransactionConflictError,
  type Collection,
  type EmbeddedDocumentStore,
  type FindOptions,
  type IndexSpec,
  type Projection,
  type SortSpec,
  type StoreSession,
  type StoredDocument,
} from '@planning/store';
import { assertCollectionName, assertDatabaseName, type Catalog } from './catalog.js';
import type { Cursors } from './cursors.js';
import { CommandError, duplicateKeyError, notSupported, toCommandError } from './errors.js';
import { SESSION_TIMEOUT_MINUTES, Sessions } from './sessions.js';
import { MAX_BSON_OBJECT_SIZE, MAX_MESSAGE_SIZE_BYTES } from './wire-protocol.js';

/** MongoDB 7.0's wire version: what the driver sees. */
export const MAX_WIRE_VERSION = 21;
export const SERVER_VERSION = '7.0.0';
const MAX_WRITE_BATCH_SIZE = 100_000;

export interface ServerIdentity {
  /** `host:port` as clients reach this server; the replica set's only member. */
  readonly me: string;
  readonly setName: string;
}

interface Context {
  readonly db: string;
  readonly connectionId: number;
  /** Set inside a transaction. */
  readonly session?: StoreSession;
  /** The client session (`lsid`), when the command carried one. */
  readonly sessionKey?: string;
}

type Handler = (body: Document, ctx: Context) => Promise<Document>;

/** Arguments every command may carry; they need nothing from this server. */
const GENERIC_ARGS = new Set([
  '$db',
  'lsid',
  'txnNumber',
  'autocommit',
  'startTransaction',
  '$clusterTime',
  '$readPreference',
  'readConcern',
  'writeConcern',
  'comment',
  'maxTimeMS',
  'apiVersion',
  'apiStrict',
  'apiDeprecationErrors',
  '$client',
  'mayBypassWriteBlocking',
]);

/** Options MongoDB has and this server refuses by name (anything else unknown is refused too). */
const UNSUPPORTED_OPTIONS = new Set(['collation', 'hint', 'let', 'arrayFilters', 'explain', 'tailable', 'awaitData', 'min', 'max', 'returnKey', 'showRecordId']);

/** Commands MongoDB allows inside a multi-document transaction (of those this server has). */
const TRANSACTION_COMMANDS = new Set(['find', 'getMore', 'killCursors', 'insert', 'update', 'delete', 'findAndModify', 'aggregate']);
const RETRYABLE_WRITES = new Set(['insert', 'update', 'delete', 'findAndModify']);
const HELLO_COMMANDS = new Set(['hello', 'isMaster', 'ismaster']);

// ---- argument helpers ----------------------------------------------------------------------------

function isDocument(value: unknown): value is Document {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function checkFields(body: Document, command: string, allowed: readonly string[]): void {
  const own = Object.keys(body)[0];
  for (const key of Object.keys(body)) {
    if (key === own || GENERIC_ARGS.has(key) || allowed.includes(key)) continue;
    if (UNSUPPORTED_OPTIONS.has(key)) throw notSupported(`${command} option '${key}'`);
    throw new CommandError('UnknownField', `BSON field '${command}.${key}' is an unknown field.`);
  }
}

function checkStatement(stmt: Document, where: string, allowed: readonly string[]): void {
  for (const key of Object.keys(stmt)) {
    if (allowed.includes(key)) continue;
    if (UNSUPPORTED_OPTIONS.has(key)) throw notSupported(`${where} option '${key}'`);
    throw new CommandError('UnknownField', `BSON field '${where}.${key}' is an unknown field.`);
  }
}

function docArg(value: unknown, field: string): Document | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isDocument(value)) throw new CommandError('TypeMismatch', `BSON field '${field}' is the wrong type, expected an object`);
  return value;
}

function arrayArg(value: unknown, field: string): unknown[] {
  if (!Array.isArray(value)) throw new CommandError('TypeMismatch', `BSON field '${field}' is missing or not an array`);
  return value;
}

function intArg(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new CommandError('TypeMismatch', `BSON field '${field}' must be an integer`);
  return value;
}

function boolArg(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0;
  throw new CommandError('TypeMismatch', `BSON field '${field}' must be a boolean`);
}

function nonEmpty<T extends Document>(doc: Document | undefined): T | undefined {
  return doc && Object.keys(doc).length > 0 ? (doc as T) : undefined;
}

function cursorIdArg(value: unknown, field: string): number {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  // Ids this server hands out fit in a double; anything larger was never ours.
  if (value instanceof Long) return -1;
  throw new CommandError('TypeMismatch', `BSON field '${field}' must be a cursor id (long)`);
}

function getPath(doc: Document, path: string): unknown {
  let value: unknown = doc;
  for (const seg of path.split('.')) {
    if (!isDocument(value)) return undefined;
    value = value[seg];
  }
  return value;
}

function keyValueOf(doc: Document, keyPattern: Document): Document {
  const out: Document = {};
  for (const path of Object.keys(keyPattern)) out[path] = getPath(doc, path) ?? null;
  return out;
}

function canonical(value: unknown): string {
  return JSON.stringify(value ?? null, (_k, v: unknown) => (v instanceof Date ? { $date: v.getTime() } : v instanceof RegExp ? { $re: String(v) } : v));
}

/** Runs `fn` against a throwaway in-memory store (to replay an update or a projection exactly as the engine does). */
async function withScratch<R>(fn: (c: Collection) => Promise<R>): Promise<R> {
  const scratch = createEmbeddedStore();
  try {
    return await fn(scratch.collection('scratch'));
  } finally {
    await scratch.close();
  }
}

/** The document an update produced from `before` (or, for an upsert, from the filter). */
function replayUpdate(filter: Document, update: Document, before: Document | null): Promise<StoredDocument> {
  return withScratch(async (c) => {
    if (before) await c.insertOne(before as StoredDocument);
    const after = await c.findOneAndUpdate(filter, update, { upsert: before === null, returnDocument: 'after' });
    if (!after) throw new Error('replayUpdate: the update did not apply');
    return after;
  });
}

function project(doc: Document, projection: Projection | undefined): Promise<Document> {
  if (!projection) return Promise.resolve(doc);
  return withScratch(async (c) => {
    await c.insertOne(doc as StoredDocument);
    return (await c.findOne({ _id: doc._id }, { projection })) as Document;
  });
}

// ---- the runner ------------------------------------------------------------------------------

export class CommandRunner {
  private readonly handlers: Record<string, Handler>;

  constructor(
    private readonly store: EmbeddedDocumentStore,
    private readonly catalog: Catalog,
    private readonly sessions: Sessions,
    private readonly cursors: Cursors,
    private readonly identity: ServerIdentity,
  ) {
    const h: Record<string, Handler> = {
      hello: (b, c) => this.hello(b, c),
      isMaster: (b, c) => this.hello(b, c),
      ismaster: (b, c) => this.hello(b, c),
      ping: async () => ({ ok: 1 }),
      buildInfo: async () => this.buildInfo(),
      buildinfo: async () => this.buildInfo(),
      endSessions: (b) => this.endSessions(b),
      commitTransaction: (b, c) => this.commitTransaction(b, c),
      abortTransaction: (b, c) => this.abortTransaction(b, c),
      find: (b, c) => this.find(b, c),
      getMore: (b, c) => this.getMore(b, c),
      killCursors: (b, c) => this.killCursors(b, c),
      insert: (b, c) => this.insert(b, c),
      update: (b, c) => this.update(b, c),
      delete: (b, c) => this.delete(b, c),
      findAndModify: (b, c) => this.findAndModify(b, c),
      aggregate: (b, c) => this.aggregate(b, c),
      count: (b, c) => this.count(b, c),
      createIndexes: (b, c) => this.createIndexes(b, c),
      listIndexes: (b, c) => this.listIndexes(b, c),
      dropIndexes: (b, c) => this.dropIndexes(b, c),
      create: (b, c) => this.create(b, c),
      drop: (b, c) => this.drop(b, c),
      dropDatabase: (b, c) => this.dropDatabase(b, c),
      listCollections: (b, c) => this.listCollections(b, c),
      listDatabases: (b, c) => this.listDatabases(b, c),
    };
    this.handlers = h;
  }

  /** Runs one command and returns its reply; failures are replies too (`ok: 0`). */
  async run(body: Document, options: { connectionId: number; legacyDb?: string }): Promise<Document> {
    try {
      return await this.dispatch(body, options);
    } catch (err) {
      return toCommandError(err).toReply();
    }
  }

  private async dispatch(body: Document, options: { connectionId: number; legacyDb?: string }): Promise<Document> {
    const name = Object.keys(body)[0];
    if (name === undefined) throw new CommandError('FailedToParse', 'empty command document');
    const legacy = options.legacyDb !== undefined;
    if (legacy && !HELLO_COMMANDS.has(name)) {
      throw new CommandError('UnsupportedOpQueryCommand', `Unsupported OP_QUERY command: ${name}. The client driver may require an upgrade.`);
    }
    const db: unknown = legacy ? options.legacyDb : body.$db;
    if (typeof db !== 'string') throw new CommandError('FailedToParse', `command ${name} needs a $db field`);
    assertDatabaseName(db);
    const handler = Object.hasOwn(this.handlers, name) ? this.handlers[name] : undefined;
    if (!handler) throw new CommandError('CommandNotFound', `no such command: '${name}'`);

    const sessionKey = body.lsid !== undefined ? Sessions.keyOf(body.lsid) : undefined;
    const ctx: Context = { db, connectionId: options.connectionId, ...(sessionKey !== undefined ? { sessionKey } : {}) };
    const txnNumber = intArg(body.txnNumber, 'txnNumber');

    if (body.autocommit !== undefined && name !== 'commitTransaction' && name !== 'abortTransaction') {
      if (body.autocommit !== false) throw new CommandError('BadValue', 'autocommit must be false when given');
      if (sessionKey === undefined || txnNumber === undefined) throw new CommandError('BadValue', 'a transaction needs lsid and txnNumber');
      if (!TRANSACTION_COMMANDS.has(name)) {
        throw new CommandError('OperationNotSupportedInTransaction', `Cannot run '${name}' in a multi-document transaction.`);
      }
      const tx = this.sessions.transactionFor(sessionKey, txnNumber, boolArg(body.startTransaction, 'startTransaction', false));
      const reply = await this.exec(handler, body, { ...ctx, session: tx.session });
      if (reply.ok !== 1 || reply.writeErrors !== undefined) {
        const errmsg = reply.ok !== 1 ? reply.errmsg : (reply.writeErrors as Document[])[0]?.errmsg;
        this.sessions.failed(sessionKey, txnNumber, String(errmsg));
      }
      return reply;
    }
    if (body.startTransaction !== undefined) throw new CommandError('BadValue', 'startTransaction needs autocommit: false');
    if (txnNumber !== undefined && sessionKey !== undefined && RETRYABLE_WRITES.has(name)) {
      return this.sessions.retryableWrite(sessionKey, txnNumber, () => this.exec(handler, body, ctx));
    }
    return this.exec(handler, body, ctx);
  }

  private async exec(handler: Handler, body: Document, ctx: Context): Promise<Document> {
    try {
      return await handler(body, ctx);
    } catch (err) {
      return toCommandError(err).toReply();
    }
  }

  private opts(ctx: Context): { session?: StoreSession } {
    return ctx.session ? { session: ctx.session } : {};
  }

  private namespace(body: Document, command: string, ctx: Context): { coll: string; ns: string; handle: Collection } {
    const coll: unknown = body[command];
    assertCollectionName(ctx.db, coll);
    return { coll, ns: `${ctx.db}.${coll}`, handle: this.store.collection(this.catalog.physical(ctx.db, coll)) };
  }

  private keyPattern(db: string, coll: string, index: string): Document | undefined {
    if (index === '_id_') return { _id: 1 };
    return this.catalog.indexes(db, coll).find((spec) => spec.name === index)?.keys;
  }

  private duplicate(ctx: Context, coll: string, err: DuplicateKeyError, doc?: Document): CommandError {
    const keyPattern = this.keyPattern(ctx.db, coll, err.index);
    return duplicateKeyError(`${ctx.db}.${coll}`, err.index, keyPattern, doc && keyPattern ? keyValueOf(doc, keyPattern) : undefined);
  }

  // ---- handshake and housekeeping --------------------------------------------------------------

  private async hello(body: Document, ctx: Context): Promise<Document> {
    const name = Object.keys(body)[0];
    const primary = name === 'hello' ? { isWritablePrimary: true } : { ismaster: true };
    // No topologyVersion: the driver then polls with hello instead of the streaming exhaust protocol.
    return {
      ...primary,
      helloOk: true,
      secondary: false,
      setName: this.identity.setName,
      setVersion: 1,
      hosts: [this.identity.me],
      primary: this.identity.me,
      me: this.identity.me,
      maxBsonObjectSize: MAX_BSON_OBJECT_SIZE,
      maxMessageSizeBytes: MAX_MESSAGE_SIZE_BYTES,
      maxWriteBatchSize: MAX_WRITE_BATCH_SIZE,
      localTime: new Date(),
      logicalSessionTimeoutMinutes: SESSION_TIMEOUT_MINUTES,
      connectionId: ctx.connectionId,
      minWireVersion: 0,
      maxWireVersion: MAX_WIRE_VERSION,
      readOnly: false,
      mongoWire: 'the embedded store behind the MongoDB wire protocol: a test fixture, not MongoDB',
      ok: 1,
    };
  }

  private buildInfo(): Document {
    return {
      version: SERVER_VERSION,
      gitVersion: 'mongo-wire',
      versionArray: [7, 0, 0, 0],
      bits: 64,
      debug: false,
      maxBsonObjectSize: MAX_BSON_OBJECT_SIZE,
      storageEngines: ['embedded'],
      mongoWire: true,
      ok: 1,
    };
  }

  private async endSessions(body: Document): Promise<Document> {
    const keys = arrayArg(body.endSessions, 'endSessions').map((lsid) => Sessions.keyOf(lsid));
    this.sessions.end(keys);
    this.cursors.killSessions(keys);
    return { ok: 1 };
  }

  private transactionTarget(body: Document, ctx: Context, command: string): { key: string; txnNumber: number } {
    if (ctx.db !== 'admin') throw new CommandError('Unauthorized', `${command} may only be run against the admin database.`);
    const txnNumber = intArg(body.txnNumber, 'txnNumber');
    if (ctx.sessionKey === undefined || txnNumber === undefined) throw new CommandError('BadValue', `${command} needs lsid and txnNumber`);
    return { key: ctx.sessionKey, txnNumber };
  }

  private async commitTransaction(body: Document, ctx: Context): Promise<Document> {
    const { key, txnNumber } = this.transactionTarget(body, ctx, 'commitTransaction');
    try {
      await this.sessions.commit(key, txnNumber);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw duplicateKeyError('?', err.index);
      throw err;
    }
    return { ok: 1 };
  }

  private async abortTransaction(body: Document, ctx: Context): Promise<Document> {
    const { key, txnNumber } = this.transactionTarget(body, ctx, 'abortTransaction');
    this.sessions.abort(key, txnNumber);
    return { ok: 1 };
  }

  // ---- reads -------------------------------------------------------------------------------

  private async find(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'find', ['filter', 'sort', 'projection', 'skip', 'limit', 'batchSize', 'singleBatch', 'allowDiskUse', 'noCursorTimeout', 'allowPartialResults']);
    const { ns, handle } = this.namespace(body, 'find', ctx);
    const filter = docArg(body.filter, 'filter') ?? {};
    const options: FindOptions = { ...this.opts(ctx) };
    const sort = nonEmpty<SortSpec>(docArg(body.sort, 'sort'));
    const projection = nonEmpty<Projection>(docArg(body.projection, 'projection'));
    if (sort) options.sort = sort;
    if (projection) options.projection = projection;
    const skip = intArg(body.skip, 'skip');
    if (skip !== undefined) {
      if (skip < 0) throw new CommandError('BadValue', 'skip value must be non-negative');
      options.skip = skip;
    }
    let singleBatch = boolArg(body.singleBatch, 'singleBatch', false);
    const limit = intArg(body.limit, 'limit');
    if (limit !== undefined && limit !== 0) {
      // A negative limit is the legacy spelling of "this many, in one batch".
      if (limit < 0) singleBatch = true;
      options.limit = Math.abs(limit);
    }
    const batchSize = intArg(body.batchSize, 'batchSize');
    if (batchSize !== undefined && batchSize < 0) throw new CommandError('BadValue', 'batchSize value must be non-negative');
    const docs = await handle.find(filter, options);
    const { id, batch } = this.cursors.first(ns, docs, { ...(batchSize !== undefined ? { batchSize } : {}), singleBatch, ...this.cursorOwner(ctx) });
    return { cursor: { firstBatch: batch, id, ns }, ok: 1 };
  }

  private cursorOwner(ctx: Context): { sessionKey?: string } {
    return ctx.sessionKey !== undefined ? { sessionKey: ctx.sessionKey } : {};
  }

  private async getMore(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'getMore', ['collection', 'batchSize']);
    const id = cursorIdArg(body.getMore, 'getMore');
    const coll: unknown = body.collection;
    assertCollectionName(ctx.db, coll);
    const ns = `${ctx.db}.${coll}`;
    const batchSize = intArg(body.batchSize, 'batchSize');
    const next = this.cursors.next(id, ns, batchSize);
    return { cursor: { nextBatch: next.batch, id: next.id, ns }, ok: 1 };
  }

  private async killCursors(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'killCursors', ['cursors']);
    this.namespace(body, 'killCursors', ctx);
    const ids = arrayArg(body.cursors, 'cursors').map((v) => cursorIdArg(v, 'cursors'));
    const { killed, notFound } = this.cursors.kill(ids);
    return { cursorsKilled: killed.map((n) => Long.fromNumber(n)), cursorsNotFound: notFound.map((n) => Long.fromNumber(n)), cursorsAlive: [], cursorsUnknown: [], ok: 1 };
  }

  /**
   * `$match` first, then `$skip`/`$limit`, then optionally `$count` or a `$group` with a constant
   * `_id` and `$sum` of constants: the shapes `countDocuments` sends. Anything else is refused.
   */
  private async aggregate(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'aggregate', ['pipeline', 'cursor', 'allowDiskUse', 'bypassDocumentValidation']);
    if (typeof body.aggregate !== 'string') throw notSupported('aggregate without a collection');
    const { ns, handle } = this.namespace(body, 'aggregate', ctx);
    const cursorOpt = docArg(body.cursor, 'cursor');
    if (!cursorOpt) throw new CommandError('FailedToParse', "The 'cursor' option is required, except for aggregate with the explain argument");
    const batchSize = intArg(cursorOpt.batchSize, 'cursor.batchSize');
    let filter: Document = {};
    let skip = 0;
    let limit: number | undefined;
    let terminal: { kind: 'count'; field: string } | { kind: 'group'; id: unknown; sums: [string, number][] } | undefined;
    let matched = false;
    arrayArg(body.pipeline, 'pipeline').forEach((stage, i) => {
      if (!isDocument(stage) || Object.keys(stage).length !== 1) throw new CommandError('FailedToParse', `pipeline stage ${i} must be an object with exactly one field`);
      const [op, arg] = Object.entries(stage)[0] as [string, unknown];
      if (terminal) throw notSupported(`aggregation stage ${op} after ${terminal.kind === 'count' ? '$count' : '$group'}`);
      switch (op) {
        case '$match':
          if (skip > 0 || limit !== undefined) throw notSupported('$match after $skip or $limit');
          filter = matched ? { $and: [filter, docArg(arg, '$match') ?? {}] } : (docArg(arg, '$match') ?? {});
          matched = true;
          break;
        case '$skip': {
          const n = intArg(arg, '$skip');
          if (n === undefined || n < 0) throw new CommandError('BadValue', '$skip must be a non-negative integer');
          skip += n;
          if (limit !== undefined) limit = Math.max(0, limit - n);
          break;
        }
        case '$limit': {
          const n = intArg(arg, '$limit');
          if (n === undefined || n <= 0) throw new CommandError('BadValue', '$limit must be a positive integer');
          limit = limit === undefined ? n : Math.min(limit, n);
          break;
        }
        case '$count':
          if (typeof arg !== 'string' || arg === '' || arg.startsWith('$') || arg.includes('.')) throw new CommandError('BadValue', '$count needs a field name');
          terminal = { kind: 'count', field: arg };
          break;
        case '$group': {
          const spec = docArg(arg, '$group');
          if (!spec || !('_id' in spec)) throw new CommandError('FailedToParse', "a group specification must include an _id");
          const id: unknown = spec._id;
          if (isDocument(id) || Array.isArray(id) || (typeof id === 'string' && id.startsWith('$'))) throw notSupported('$group by anything but a constant _id');
          const sums: [string, number][] = [];
          for (const [field, acc] of Object.entries(spec)) {
            if (field === '_id') continue;
            const k = isDocument(acc) && Object.keys(acc).length === 1 ? acc.$sum : undefined;
            if (typeof k !== 'number') throw notSupported(`$group accumulator for '${field}' other than {$sum: <number>}`);
            sums.push([field, k]);
          }
          terminal = { kind: 'group', id, sums };
          break;
        }
        default:
          throw notSupported(`aggregation stage ${op}`);
      }
    });
    const page: FindOptions = { ...this.opts(ctx) };
    if (skip > 0) page.skip = skip;
    if (limit !== undefined) page.limit = limit;
    let docs: Document[];
    if (limit === 0) {
      docs = [];
    } else if (!terminal) {
      docs = await handle.find(filter, page);
    } else {
      const n = skip === 0 && limit === undefined ? await handle.countDocuments(filter, this.opts(ctx)) : (await handle.find(filter, { ...page, projection: { _id: 1 } })).length;
      if (n === 0) docs = [];
      else if (terminal.kind === 'count') docs = [{ [terminal.field]: n }];
      else docs = [{ _id: terminal.id, ...Object.fromEntries(terminal.sums.map(([field, k]) => [field, n * k])) }];
    }
    const { id, batch } = this.cursors.first(ns, docs, { ...(batchSize !== undefined ? { batchSize } : {}), ...this.cursorOwner(ctx) });
    return { cursor: { firstBatch: batch, id, ns }, ok: 1 };
  }

  private async count(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'count', ['query', 'skip', 'limit']);
    const { handle } = this.namespace(body, 'count', ctx);
    const filter = docArg(body.query, 'query') ?? {};
    const skip = intArg(body.skip, 'skip') ?? 0;
    const limit = Math.abs(intArg(body.limit, 'limit') ?? 0);
    if (skip === 0 && limit === 0) return { n: await handle.countDocuments(filter), ok: 1 };
    const page: FindOptions = { projection: { _id: 1 } };
    if (skip > 0) page.skip = skip;
    if (limit > 0) page.limit = limit;
    return { n: (await handle.find(filter, page)).length, ok: 1 };
  }

  // ---- writes ------------------------------------------------------------------------------

  private async insert(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'insert', ['documents', 'ordered', 'bypassDocumentValidation']);
    const { coll, handle } = this.namespace(body, 'insert', ctx);
    const documents = arrayArg(body.documents, 'documents');
    const ordered = boolArg(body.ordered, 'ordered', true);
    await this.catalog.ensure(ctx.db, coll);
    let n = 0;
    const writeErrors: Document[] = [];
    for (const [i, doc] of documents.entries()) {
      try {
        await handle.insertOne(doc as StoredDocument, this.opts(ctx));
        n++;
      } catch (err) {
        if (err instanceof TransactionConflictError) throw err;
        const error = err instanceof DuplicateKeyError ? this.duplicate(ctx, coll, err, doc as Document) : toCommandError(err);
        writeErrors.push(error.toWriteError(i));
        if (ordered) break;
      }
    }
    return writeErrors.length > 0 ? { n, writeErrors, ok: 1 } : { n, ok: 1 };
  }

  private async update(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'update', ['updates', 'ordered', 'bypassDocumentValidation']);
    const { coll, handle } = this.namespace(body, 'update', ctx);
    const updates = arrayArg(body.updates, 'updates');
    const ordered = boolArg(body.ordered, 'ordered', true);
    let n = 0;
    let nModified = 0;
    const upserted: Document[] = [];
    const writeErrors: Document[] = [];
    for (const [i, raw] of updates.entries()) {
      try {
        const stmt = docArg(raw, `updates.${i}`) ?? {};
        checkStatement(stmt, 'update.updates', ['q', 'u', 'upsert', 'multi', 'upsertSupplied']);
        const q = docArg(stmt.q, 'q') ?? {};
        if (Array.isArray(stmt.u)) throw notSupported('an update pipeline');
        const u = stmt.u as Document;
        const upsert = boolArg(stmt.upsert, 'upsert', false);
        const multi = boolArg(stmt.multi, 'multi', false);
        if (upsert) await this.catalog.ensure(ctx.db, coll);
        try {
          const options = { ...this.opts(ctx), ...(upsert ? { upsert } : {}) };
          const res = multi ? await handle.updateMany(q, u, options) : await handle.updateOne(q, u, options);
          n += res.matchedCount;
          nModified += res.modifiedCount;
          if (res.upsertedId !== undefined) {
            n++;
            upserted.push({ index: i, _id: res.upsertedId });
          }
        } catch (err) {
          if (!(err instanceof DuplicateKeyError)) throw err;
          // The key that collided is in the updated document: replay the update to show it.
          const after = multi ? undefined : await this.replayQuietly(handle, q, u, upsert, ctx);
          throw this.duplicate(ctx, coll, err, after);
        }
      } catch (err) {
        if (err instanceof TransactionConflictError) throw err;
        writeErrors.push(toCommandError(err).toWriteError(i));
        if (ordered) break;
      }
    }
    const reply: Document = { n, nModified };
    if (upserted.length > 0) reply.upserted = upserted;
    if (writeErrors.length > 0) reply.writeErrors = writeErrors;
    reply.ok = 1;
    return reply;
  }

  private async replayQuietly(handle: Collection, q: Document, u: Document, upsert: boolean, ctx: Context): Promise<Document | undefined> {
    try {
      const before = await handle.findOne(q, this.opts(ctx));
      if (!before && !upsert) return undefined;
      return await replayUpdate(q, u, before);
    } catch {
      return undefined;
    }
  }

  private async delete(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'delete', ['deletes', 'ordered']);
    const { handle } = this.namespace(body, 'delete', ctx);
    const deletes = arrayArg(body.deletes, 'deletes');
    const ordered = boolArg(body.ordered, 'ordered', true);
    let n = 0;
    const writeErrors: Document[] = [];
    for (const [i, raw] of deletes.entries()) {
      try {
        const stmt = docArg(raw, `deletes.${i}`) ?? {};
        checkStatement(stmt, 'delete.deletes', ['q', 'limit']);
        const q = docArg(stmt.q, 'q') ?? {};
        const limit = intArg(stmt.limit, 'limit');
        if (limit !== 0 && limit !== 1) throw new CommandError('BadValue', 'The limit field in delete objects must be 0 or 1');
        const res = limit === 1 ? await handle.deleteOne(q, this.opts(ctx)) : await handle.deleteMany(q, this.opts(ctx));
        n += res.deletedCount;
      } catch (err) {
        if (err instanceof TransactionConflictError) throw err;
        writeErrors.push(toCommandError(err).toWriteError(i));
        if (ordered) break;
      }
    }
    return writeErrors.length > 0 ? { n, writeErrors, ok: 1 } : { n, ok: 1 };
  }

  private async findAndModify(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'findAndModify', ['query', 'sort', 'update', 'new', 'upsert', 'fields', 'remove', 'bypassDocumentValidation']);
    const { coll, handle } = this.namespace(body, 'findAndModify', ctx);
    const query = docArg(body.query, 'query') ?? {};
    const sort = nonEmpty<SortSpec>(docArg(body.sort, 'sort'));
    const projection = nonEmpty<Projection>(docArg(body.fields, 'fields'));
    const remove = boolArg(body.remove, 'remove', false);
    const returnNew = boolArg(body.new, 'new', false);
    const upsert = boolArg(body.upsert, 'upsert', false);
    const update: unknown = body.update;
    const base = { ...this.opts(ctx), ...(sort ? { sort } : {}) };

    if (remove) {
      if (update !== undefined) throw new CommandError('FailedToParse', 'Cannot specify both an update and remove=true');
      if (upsert) throw new CommandError('FailedToParse', 'Cannot specify both upsert=true and remove=true');
      if (returnNew) throw new CommandError('FailedToParse', 'Cannot specify both new=true and remove=true; \'remove\' always returns the deleted document');
      const value = await handle.findOneAndDelete(query, { ...base, ...(projection ? { projection } : {}) });
      return { lastErrorObject: { n: value ? 1 : 0 }, value, ok: 1 };
    }
    if (update === undefined) throw new CommandError('FailedToParse', 'Either an update or remove=true must be specified');
    if (Array.isArray(update)) throw notSupported('an update pipeline');
    const u = update as Document;
    try {
      if (!upsert) {
        const value = await handle.findOneAndUpdate(query, u, { ...base, returnDocument: returnNew ? 'after' : 'before', ...(projection ? { projection } : {}) });
        return { lastErrorObject: { n: value ? 1 : 0, updatedExisting: value !== null }, value, ok: 1 };
      }
      await this.catalog.ensure(ctx.db, coll);
      // The port returns one version of the document; ask for the one before, which tells an
      // update from an insert, and replay the update on it for the one after.
      const before = await handle.findOneAndUpdate(query, u, { ...base, upsert: true, returnDocument: 'before' });
      if (before) {
        const value = returnNew ? await project(await replayUpdate(query, u, before), projection) : await project(before, projection);
        return { lastErrorObject: { n: 1, updatedExisting: true }, value, ok: 1 };
      }
      const inserted = await replayUpdate(query, u, null);
      const value = returnNew ? await project(inserted, projection) : null;
      return { lastErrorObject: { n: 1, updatedExisting: false, upserted: inserted._id }, value, ok: 1 };
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      throw this.duplicate(ctx, coll, err, await this.replayQuietly(handle, query, u, upsert, ctx));
    }
  }

  // ---- indexes and namespaces --------------------------------------------------------------

  private async createIndexes(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'createIndexes', ['indexes', 'commitQuorum']);
    const { coll, handle } = this.namespace(body, 'createIndexes', ctx);
    const requested = arrayArg(body.indexes, 'indexes');
    const created = await this.catalog.ensure(ctx.db, coll);
    const before = this.catalog.indexes(ctx.db, coll).length + 1;
    let added = 0;
    for (const [i, raw] of requested.entries()) {
      const desc = docArg(raw, `indexes.${i}`) ?? {};
      for (const key of Object.keys(desc)) {
        if (!['key', 'name', 'unique', 'partialFilterExpression', 'expireAfterSeconds', 'v', 'background', 'ns'].includes(key)) throw notSupported(`index option '${key}'`);
      }
      const keys = docArg(desc.key, 'key');
      if (!keys || typeof desc.name !== 'string') throw new CommandError('FailedToParse', 'every index needs a key document and a name');
      if (desc.name === '_id_') {
        if (canonical(keys) === canonical({ _id: 1 })) continue;
        throw new CommandError('BadValue', 'The index name _id_ is reserved for the _id index');
      }
      const spec: IndexSpec = { name: desc.name, keys: keys as IndexSpec['keys'] };
      if (boolArg(desc.unique, 'unique', false)) spec.unique = true;
      const partial = docArg(desc.partialFilterExpression, 'partialFilterExpression');
      if (partial) spec.partialFilterExpression = partial;
      const ttl = intArg(desc.expireAfterSeconds, 'expireAfterSeconds');
      if (ttl !== undefined) spec.expireAfterSeconds = ttl;
      const existing = this.catalog.indexes(ctx.db, coll);
      const sameName = existing.find((e) => e.name === spec.name);
      if (sameName) {
        if (canonicalSpec(sameName) === canonicalSpec(spec)) continue;
        throw new CommandError(
          'IndexKeySpecsConflict',
          `An existing index has the same name as the requested index. Requested index: ${canonicalSpec(spec)}, existing index: ${canonicalSpec(sameName)}`,
        );
      }
      const sameKeys = existing.find((e) => canonical(e.keys) === canonical(spec.keys) && canonical(e.partialFilterExpression) === canonical(spec.partialFilterExpression));
      if (sameKeys) throw new CommandError('IndexOptionsConflict', `Index already exists with a different name: ${sameKeys.name}`);
      try {
        await handle.createIndexes([spec]);
      } catch (err) {
        if (err instanceof DuplicateKeyError) throw duplicateKeyError(`${ctx.db}.${coll}`, err.index, spec.keys);
        throw new CommandError('CannotCreateIndex', (err as Error).message);
      }
      await this.catalog.addIndexes(ctx.db, coll, [spec]);
      added++;
    }
    const reply: Document = { numIndexesBefore: before, numIndexesAfter: before + added, createdCollectionAutomatically: created };
    if (added === 0) reply.note = 'all indexes already exist';
    reply.ok = 1;
    return reply;
  }

  /** One index by name (what `Collection.dropIndex` sends); `*` and lists are not served. */
  private async dropIndexes(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'dropIndexes', ['index']);
    const { coll, ns, handle } = this.namespace(body, 'dropIndexes', ctx);
    if (!this.catalog.exists(ctx.db, coll)) throw new CommandError('NamespaceNotFound', `ns not found ${ns}`);
    if (typeof body.index !== 'string' || body.index === '*') throw notSupported('dropIndexes other than of one index by name');
    if (body.index === '_id_') throw new CommandError('InvalidOptions', 'cannot drop _id index');
    const existing = this.catalog.indexes(ctx.db, coll);
    if (!existing.some((spec) => spec.name === body.index)) throw new CommandError('IndexNotFound', `index not found with name [${body.index}]`);
    await handle.dropIndexes([body.index]);
    await this.catalog.removeIndex(ctx.db, coll, body.index);
    return { nIndexesWas: existing.length + 1, ok: 1 };
  }

  private async listIndexes(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'listIndexes', ['cursor']);
    const { coll, ns } = this.namespace(body, 'listIndexes', ctx);
    if (!this.catalog.exists(ctx.db, coll)) throw new CommandError('NamespaceNotFound', `ns does not exist: ${ns}`);
    const docs: Document[] = [{ v: 2, key: { _id: 1 }, name: '_id_' }];
    for (const spec of this.catalog.indexes(ctx.db, coll)) {
      const doc: Document = { v: 2, key: spec.keys, name: spec.name };
      if (spec.unique) doc.unique = true;
      if (spec.partialFilterExpression) doc.partialFilterExpression = spec.partialFilterExpression;
      if (spec.expireAfterSeconds !== undefined) doc.expireAfterSeconds = spec.expireAfterSeconds;
      docs.push(doc);
    }
    const batchSize = intArg(docArg(body.cursor, 'cursor')?.batchSize, 'cursor.batchSize');
    const { id, batch } = this.cursors.first(ns, docs, batchSize !== undefined ? { batchSize } : {});
    return { cursor: { firstBatch: batch, id, ns }, ok: 1 };
  }

  private async create(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'create', []);
    const { coll, ns } = this.namespace(body, 'create', ctx);
    if (!(await this.catalog.ensure(ctx.db, coll))) throw new CommandError('NamespaceExists', `Collection ${ns} already exists.`);
    return { ok: 1 };
  }

  private async drop(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'drop', []);
    const { coll, ns } = this.namespace(body, 'drop', ctx);
    const nIndexesWas = await this.catalog.drop(this.store, ctx.db, coll);
    return { nIndexesWas: nIndexesWas ?? 0, ns, ok: 1 };
  }

  private async dropDatabase(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'dropDatabase', []);
    for (const coll of this.catalog.collections(ctx.db)) await this.catalog.drop(this.store, ctx.db, coll);
    return { dropped: ctx.db, ok: 1 };
  }

  private async listCollections(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'listCollections', ['filter', 'nameOnly', 'authorizedCollections', 'cursor']);
    const nameOnly = boolArg(body.nameOnly, 'nameOnly', false);
    const filter = docArg(body.filter, 'filter') ?? {};
    const all = this.catalog.collections(ctx.db).map((name) =>
      nameOnly
        ? { name, type: 'collection' }
        : { name, type: 'collection', options: {}, info: { readOnly: false }, idIndex: { v: 2, key: { _id: 1 }, name: '_id_' } },
    );
    // The filter is a query over these descriptions: let the engine evaluate it.
    const docs = await withScratch(async (c) => {
      await c.insertMany(all.map((d) => ({ _id: d.name, ...d })));
      return c.find(filter, { projection: { _id: 0 }, sort: { name: 1 } });
    });
    const batchSize = intArg(docArg(body.cursor, 'cursor')?.batchSize, 'cursor.batchSize');
    const ns = `${ctx.db}.$cmd.listCollections`;
    const { id, batch } = this.cursors.first(ns, docs, batchSize !== undefined ? { batchSize } : {});
    return { cursor: { firstBatch: batch, id, ns }, ok: 1 };
  }

  private async listDatabases(body: Document, ctx: Context): Promise<Document> {
    checkFields(body, 'listDatabases', ['nameOnly', 'authorizedDatabases', 'filter']);
    if (ctx.db !== 'admin') throw new CommandError('Unauthorized', 'listDatabases may only be run against the admin database.');
    if (body.filter !== undefined) throw notSupported('listDatabases filter');
    const names = this.catalog.databases().sort();
    const nameOnly = boolArg(body.nameOnly, 'nameOnly', false);
    const databases = names.map((name) => (nameOnly ? { name } : { name, sizeOnDisk: 0, empty: false }));
    return nameOnly ? { databases, ok: 1 } : { databases, totalSize: 0, totalSizeMb: 0, ok: 1 };
  }
}

function canonicalSpec(spec: IndexSpec): string {
  return canonical({
    key: spec.keys,
    unique: spec.unique === true,
    partialFilterExpression: spec.partialFilterExpression ?? null,
    expireAfterSeconds: spec.expireAfterSeconds ?? null,
  });
}

