/**
 * Update documents: validation, MongoDB's type rules that mingo leaves silent (it skips `$inc` on a
 * string, MongoDB refuses), `$setOnInsert`, `_id` immutability and upsert seeding. The operators
 * themselves are applied by mingo's updater.
 */
import { update as mingoUpdate } from 'mingo/updater';
import { $addToSet, $inc, $max, $min, $pull, $push, $set, $unset } from 'mingo/operators/update';
import type { Filter, Update } from '../port.js';
import { assertFilter } from './filter.js';
import { cloneValue, isPlainObject, normalizeValue, valuesEqual } from './values.js';

type Doc = Record<string, unknown>;

export const UPDATE_OPERATORS = ['$set', '$unset', '$inc', '$push', '$pull', '$addToSet', '$setOnInsert', '$min', '$max'] as const;
type UpdateOperator = (typeof UPDATE_OPERATORS)[number];
const SUPPORTED = new Set<string>(UPDATE_OPERATORS);
const PUSH_MODIFIERS = new Set(['$each', '$slice', '$sort', '$position']);

/** An update document checked once per operation, with its values already copied into store form. */
export interface CompiledUpdate {
  readonly ops: ReadonlyMap<UpdateOperator, Record<string, unknown>>;
  /** Some path uses the positional `$` operator (needs the filter to find the element). */
  readonly positional: boolean;
  /** Some path addresses an array element by number (may leave holes to fill with null). */
  readonly numeric: boolean;
  /**
   * Only `$set`, `$setOnInsert` and `$unset` of top-level fields (the common update: a document's
   * new field values): applied directly, without mingo's path walking.
   */
  readonly flat: boolean;
}

function isPositionalSegment(seg: string): boolean {
  return seg === '$' || seg === '$[]' || (seg.startsWith('$[') && seg.endsWith(']'));
}

/** Checks a field path of an update operator; answers its segments. */
function assertUpdatePath(path: string, op: string): string[] {
  if (path === '') throw new TypeError(`${op}: empty field path`);
  // A top-level field (what repository writes name) is its own segment: no split.
  const segs = path.includes('.') ? path.split('.') : [path];
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i] as string;
    if (seg === '') throw new TypeError(`${op}: invalid field path '${path}'`);
    if (seg === '__proto__') throw new TypeError(`${op}: field path '${path}' is not allowed`);
    if (seg.startsWith('$') && (i === 0 || !isPositionalSegment(seg))) {
      throw new TypeError(`${op}: field path '${path}' must not contain '$' segments other than positional operators`);
    }
  }
  return segs;
}

const NUMERIC_SEGMENT = /^\d+$/;

export function compileUpdate(update: Update): CompiledUpdate {
  if (!isPlainObject(update)) throw new TypeError('update must be a plain object of update operators');
  const keys = Object.keys(update);
  if (keys.length === 0) throw new TypeError('update document is empty: use operators such as $set');
  const nonOperator = keys.find((k) => !k.startsWith('$'));
  if (nonOperator !== undefined) {
    throw new TypeError(`replacement documents are not supported ('${nonOperator}'): use update operators such as $set`);
  }
  const ops = new Map<UpdateOperator, Record<string, unknown>>();
  let positional = false;
  let numeric = false;
  let flat = true;
  const seen: string[] = [];
  for (const op of keys) {
    if (!SUPPORTED.has(op)) throw new TypeError(`unsupported update operator ${op} (supported: ${UPDATE_OPERATORS.join(', ')})`);
    const arg = update[op];
    if (!isPlainObject(arg)) throw new TypeError(`${op} needs a plain object of field paths`);
    if (op !== '$set' && op !== '$setOnInsert' && op !== '$unset') flat = false;
    const normalized: Record<string, unknown> = {};
    for (const path of Object.keys(arg)) {
      const raw = arg[path];
      const segs = assertUpdatePath(path, op);
      if (segs.length > 1) {
        if (segs.includes('$')) positional = true;
        flat = false;
      }
      if (segs.some((s) => NUMERIC_SEGMENT.test(s))) numeric = true;
      if (raw === undefined && op !== '$unset') continue; // dropped like the driver's ignoreUndefined
      normalized[path] = normalizeOperand(op as UpdateOperator, path, raw);
      seen.push(path);
    }
    ops.set(op as UpdateOperator, normalized);
  }
  assertNoConflicts(seen);
  return { ops, positional, numeric, flat };
}

function normalizeOperand(op: UpdateOperator, path: string, raw: unknown): unknown {
  switch (op) {
    case '$inc':
      if (typeof raw !== 'number') throw new TypeError(`${op}.${path}: Cannot increment with non-numeric argument`);
      return raw;
    case '$unset':
      return '';
    case '$pull': {
      if (isPlainObject(raw)) {
        // A condition (`{$gte: 3}`) or a sub-document query (`{kind: 'x'}`): both are filters.
        const asQuery = Object.keys(raw).some((k) => k.startsWith('$')) ? { v: raw } : raw;
        assertFilter(asQuery, `${op}.${path}`);
        return raw;
      }
      if (raw instanceof RegExp) return raw;
      return normalizeValue(raw, path);
    }
    case '$push':
    case '$addToSet': {
      if (isPlainObject(raw) && Object.keys(raw).some((k) => k.startsWith('$'))) {
        const mods = Object.keys(raw);
        const allowed = op === '$push' ? PUSH_MODIFIERS : new Set(['$each']);
        const bad = mods.find((m) => !allowed.has(m));
        if (bad !== undefined) throw new TypeError(`${op}.${path}: unsupported modifier ${bad} (supported: ${[...allowed].join(', ')})`);
        if (!Array.isArray(raw.$each)) throw new TypeError(`${op}.${path}: $each must be an array`);
        if ('$slice' in raw && !Number.isInteger(raw.$slice)) throw new TypeError(`${op}.${path}: $slice must be an integer`);
        if ('$position' in raw && !Number.isInteger(raw.$position)) throw new TypeError(`${op}.${path}: $position must be an integer`);
        if ('$sort' in raw) {
          const s = raw.$sort;
          const okDir = (d: unknown): boolean => d === 1 || d === -1;
          // mingo sorts pushed arrays by one key only; refuse more rather than sort differently.
          if (!okDir(s) && !(isPlainObject(s) && Object.values(s).length === 1 && Object.values(s).every(okDir))) {
            throw new TypeError(`${op}.${path}: $sort must be 1, -1 or a single-field {field: 1|-1} document`);
          }
        }
        return { ...raw, $each: normalizeValue(raw.$each, path) };
      }
      return normalizeValue(raw, path);
    }
    default:
      return normalizeValue(raw, path);
  }
}

function assertNoConflicts(paths: string[]): void {
  if (!paths.some((p) => p.includes('.'))) {
    // Top-level fields only: two paths conflict only when they are the same field.
    const fields = new Set<string>();
    for (const p of paths) {
      if (fields.has(p)) throw new TypeError(`Updating the path '${p}' would create a conflict at '${p}'`);
      fields.add(p);
    }
    return;
  }
  const sorted = paths.map((p) => p.split('.').filter((s) => !isPositionalSegment(s)).join('.')).sort();
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1] as string;
    const b = sorted[i] as string;
    if (a === b || b.startsWith(`${a}.`)) throw new TypeError(`Updating the path '${b}' would create a conflict at '${a}'`);
  }
}

type Slot = { kind: 'value'; value: unknown } | { kind: 'missing' } | { kind: 'blocked'; at: string; value: unknown } | { kind: 'skip' };

/** Where a path lands in a document, for the type checks MongoDB makes before changing it. */
function locate(doc: Doc, path: string): Slot {
  const segs = path.split('.');
  let cur: unknown = doc;
  let walked = '';
  for (const seg of segs) {
    if (isPositionalSegment(seg)) return { kind: 'skip' };
    if (cur === undefined) return { kind: 'missing' };
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(seg)) return { kind: 'blocked', at: walked, value: cur };
      cur = cur[Number(seg)];
    } else if (isPlainObject(cur)) {
      cur = cur[seg];
    } else {
      return { kind: 'blocked', at: walked, value: cur };
    }
    walked = walked === '' ? seg : `${walked}.${seg}`;
  }
  return cur === undefined ? { kind: 'missing' } : { kind: 'value', value: cur };
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) return 'date';
  return typeof value === 'object' ? 'object' : typeof value;
}

function checkTypes(doc: Doc, op: UpdateOperator, paths: Record<string, unknown>): void {
  for (const path of Object.keys(paths)) {
    const slot = locate(doc, path);
    if (slot.kind === 'skip' || slot.kind === 'missing') continue;
    if (slot.kind === 'blocked') {
      if (op === '$unset' || op === '$pull') continue;
      const last = path.slice(slot.at.length + (slot.at === '' ? 0 : 1)).split('.')[0];
      throw new TypeError(`${op}: Cannot create field '${last}' in element {${slot.at}: ${typeName(slot.value)}}`);
    }
    const current = slot.value;
    switch (op) {
      case '$inc':
        if (typeof current !== 'number') {
          throw new TypeError(`Cannot apply $inc to a value of non-numeric type: field '${path}' is of type ${typeName(current)}`);
        }
        break;
      case '$push':
      case '$addToSet':
        if (!Array.isArray(current)) throw new TypeError(`${op}: the field '${path}' must be an array but is of type ${typeName(current)}`);
        break;
      case '$pull':
        if (!Array.isArray(current)) throw new TypeError(`Cannot apply $pull to a non-array value: field '${path}' is of type ${typeName(current)}`);
        break;
      default:
        break;
    }
  }
}

const APPLIERS = { $set, $unset, $inc, $push, $pull, $addToSet, $min, $max } as const;

export interface ApplyResult {
  doc: Doc;
  changed: boolean;
}

/**
 * Applies a compiled update to a copy of `doc`. `insert` marks an upsert's insert: `$setOnInsert`
 * then applies like `$set`. `filter` resolves positional `$` paths.
 */
export function applyUpdate(doc: Doc, update: CompiledUpdate, opts: { insert: boolean; filter: Filter }): ApplyResult {
  if (update.flat) return applyFlat(doc, update, opts.insert);
  const next = cloneValue(doc);
  const modifier: Record<string, Record<string, unknown>> = {};
  for (const [op, paths] of update.ops) {
    if (op === '$setOnInsert' && !opts.insert) continue;
    const target = op === '$setOnInsert' ? '$set' : op;
    const own: Record<string, unknown> = {};
    for (const [path, value] of Object.entries(paths)) {
      if (path === '_id' || path.startsWith('_id.')) {
        if ((op === '$set' || op === '$setOnInsert') && valuesEqual(value, next._id)) continue;
        throw immutableId(path);
      }
      own[path] = value;
    }
    checkTypes(next, op, own);
    if (Object.keys(own).length === 0) continue;
    if (op === '$push' || op === '$addToSet') startMissingArrays(next, own);
    modifier[target] = { ...modifier[target], ...own };
  }
  if (Object.keys(modifier).length === 0) return { doc: next, changed: false };
  let changed = false;
  if (update.positional) {
    // The positional `$` needs the filter to find its element: only mingo's full updater does that.
    changed = mingoUpdate(next, modifier, undefined, opts.filter, { cloneMode: 'deep' }).length > 0;
  } else {
    // The operator functions directly: the full updater builds a new operator context per call.
    // Their shallow value copies are safe here: `next` is a private deep copy and stored versions
    // are never mutated.
    for (const [op, expr] of Object.entries(modifier)) {
      const apply = APPLIERS[op as keyof typeof APPLIERS] as (e: Record<string, unknown>) => (o: Doc) => string[];
      if (apply(expr)(next).length > 0) changed = true;
    }
  }
  // Setting `arr.5` on a shorter array leaves holes; MongoDB pads with nulls.
  return { doc: update.numeric ? (normalizeValue(next, '') as Doc) : next, changed };
}

function immutableId(path: string): TypeError {
  return new TypeError(`Performing an update on the path '${path}' would modify the immutable field '_id'`);
}

/**
 * A flat update (`CompiledUpdate.flat`) on a shallow copy of `doc`: only top-level fields change,
 * each to its own copy of the update's value, so the copy shares nothing it changes with `doc`
 * (stored versions are never mutated, and mingo's path is the one that mutates in place). A field
 * set to an equal value is no change, as in MongoDB.
 */
function applyFlat(doc: Doc, update: CompiledUpdate, insert: boolean): ApplyResult {
  const next: Doc = { ...doc };
  let changed = false;
  for (const [op, paths] of update.ops) {
    if (op === '$setOnInsert' && !insert) continue;
    for (const path in paths) {
      const value = paths[path];
      if (op === '$unset') {
        if (path === '_id') throw immutableId(path);
        if (next[path] !== undefined) {
          delete next[path];
          changed = true;
        }
        continue;
      }
      const current = next[path];
      if (current !== undefined && valuesEqual(current, value)) continue;
      if (path === '_id') throw immutableId(path);
      next[path] = cloneValue(value);
      changed = true;
    }
  }
  return { doc: next, changed };
}

/**
 * mingo creates a missing array straight from `$each`, skipping `$sort`, `$slice` and the
 * de-duplication of `$addToSet`; MongoDB applies them as if the array had been empty.
 */
function startMissingArrays(doc: Doc, paths: Record<string, unknown>): void {
  for (const path of Object.keys(paths)) {
    if (path.split('.').some((s) => s.startsWith('$') || /^\d+$/.test(s))) continue;
    if (locate(doc, path).kind === 'missing') setPath(doc, path, []);
  }
}

/**
 * The document an upsert starts from: the filter's equality conditions (top level and inside
 * `$and`), dotted paths expanded, plus an `_id` from `$set`/`$setOnInsert` when the filter has none.
 */
export function upsertSeed(filter: Filter, update: CompiledUpdate): Doc {
  const seed: Doc = {};
  const assigned: string[] = [];
  const visit = (query: Record<string, unknown>): void => {
    for (const [key, value] of Object.entries(query)) {
      if (key === '$and') {
        for (const sub of value as Record<string, unknown>[]) visit(sub);
        continue;
      }
      if (key.startsWith('$')) continue;
      let eq: unknown;
      if (isPlainObject(value) && Object.keys(value).some((k) => k.startsWith('$'))) {
        if (!('$eq' in value)) continue;
        eq = value.$eq;
      } else {
        eq = value;
      }
      if (eq instanceof RegExp) continue;
      assigned.push(key);
      setPath(seed, key, normalizeValue(eq, key));
    }
  };
  visit(filter);
  assertNoConflicts(assigned);
  if (!('_id' in seed)) {
    const fromUpdate = update.ops.get('$setOnInsert')?._id ?? update.ops.get('$set')?._id;
    if (fromUpdate !== undefined) seed._id = fromUpdate;
  }
  if (typeof seed._id !== 'string') {
    throw new TypeError('upsert needs a string _id: give it as an equality in the filter or in $setOnInsert (documents have application-chosen ids)');
  }
  if (update.positional) throw new TypeError('The positional operator did not find the match needed from the query (upsert)');
  return seed;
}

function setPath(doc: Doc, path: string, value: unknown): void {
  const segs = path.split('.');
  let cur: Doc = doc;
  for (let i = 0; i < segs.length - 1; i++) {
    const seg = segs[i] as string;
    const next = cur[seg];
    if (next === undefined) {
      const created: Doc = {};
      cur[seg] = created;
      cur = created;
    } else if (isPlainObject(next)) {
      cur = next;
    } else {
      throw new TypeError(`cannot infer an upsert document from the filter: '${path}' conflicts with another condition`);
    }
  }
  cur[segs[segs.length - 1] as string] = value;
}
