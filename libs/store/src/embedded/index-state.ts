/**
 * One index of a collection: a sorted list of (key, _id) entries kept up to date on every write,
 * used for uniqueness checks, candidate lookup and ordered walks.
 */
import type { Filter, IndexSpec } from '../port.js';
import { compileFilter, type FieldCondition, type Matcher } from '../document/filter.js';
import { assertPath, pathValues, splitPath } from '../document/paths.js';
import { SortedList, type Cursor } from './sorted-list.js';
import { compareIds, compareValues, isPlainObject, typeRank } from '../document/values.js';

type Doc = Record<string, unknown>;

export interface IndexEntry {
  readonly k: readonly unknown[];
  readonly id: string;
}

export interface NormalizedIndexSpec {
  name: string;
  keys: [string, 1 | -1][];
  unique: boolean;
  partialFilterExpression?: Filter;
  expireAfterSeconds?: number;
}

export const ID_INDEX = '_id_';

export function normalizeIndexSpec(spec: IndexSpec): NormalizedIndexSpec {
  if (!isPlainObject(spec)) throw new TypeError('index spec must be a plain object');
  const { name, keys, unique, partialFilterExpression, expireAfterSeconds } = spec;
  const known = new Set(['name', 'keys', 'unique', 'partialFilterExpression', 'expireAfterSeconds']);
  const unknown = Object.keys(spec).find((k) => !known.has(k));
  if (unknown !== undefined) throw new TypeError(`index spec: unknown option '${unknown}'`);
  if (typeof name !== 'string' || name === '') throw new TypeError('index spec: name must be a non-empty string');
  if (name === ID_INDEX) throw new TypeError(`index spec: the name ${ID_INDEX} is reserved for the built-in _id index`);
  if (!isPlainObject(keys) || Object.keys(keys).length === 0) throw new TypeError(`index ${name}: keys must name at least one field`);
  const entries: [string, 1 | -1][] = [];
  for (const [path, dir] of Object.entries(keys)) {
    assertPath(path, `index ${name}`);
    // The embedded engine cannot reproduce MongoDB's double meaning of numeric path segments
    // (array position or field name) in index keys, so it refuses them.
    if (path.split('.').some((s) => /^\d+$/.test(s))) throw new TypeError(`index ${name}: numeric path segments ('${path}') are not supported`);
    if (dir !== 1 && dir !== -1) throw new TypeError(`index ${name}: direction of '${path}' must be 1 or -1`);
    entries.push([path, dir]);
  }
  if (unique !== undefined && typeof unique !== 'boolean') throw new TypeError(`index ${name}: unique must be a boolean`);
  const out: NormalizedIndexSpec = { name, keys: entries, unique: unique === true };
  if (partialFilterExpression !== undefined) {
    compileFilter(partialFilterExpression, `index ${name} partialFilterExpression`);
    out.partialFilterExpression = partialFilterExpression;
  }
  if (expireAfterSeconds !== undefined) {
    if (typeof expireAfterSeconds !== 'number' || !Number.isInteger(expireAfterSeconds) || expireAfterSeconds < 0) {
      throw new TypeError(`index ${name}: expireAfterSeconds must be a non-negative integer`);
    }
    if (entries.length !== 1) throw new TypeError(`index ${name}: a TTL index (expireAfterSeconds) must have exactly one key`);
    out.expireAfterSeconds = expireAfterSeconds;
  }
  return out;
}

export function toIndexSpec(spec: NormalizedIndexSpec): IndexSpec {
  const out: IndexSpec = { name: spec.name, keys: Object.fromEntries(spec.keys) };
  if (spec.unique) out.unique = true;
  if (spec.partialFilterExpression !== undefined) out.partialFilterExpression = spec.partialFilterExpression;
  if (spec.expireAfterSeconds !== undefined) out.expireAfterSeconds = spec.expireAfterSeconds;
  return out;
}

export function sameIndexSpec(a: NormalizedIndexSpec, b: NormalizedIndexSpec): boolean {
  return (
    a.name === b.name &&
    a.unique === b.unique &&
    a.expireAfterSeconds === b.expireAfterSeconds &&
    a.keys.length === b.keys.length &&
    a.keys.every(([p, d], i) => b.keys[i]?.[0] === p && b.keys[i]?.[1] === d) &&
    sameFilter(a.partialFilterExpression, b.partialFilterExpression)
  );
}

function sameFilter(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a instanceof RegExp || b instanceof RegExp) return String(a) === String(b);
  if (Array.isArray(a) || isPlainObject(a)) {
    if (Array.isArray(a) !== Array.isArray(b) || !(Array.isArray(b) || isPlainObject(b))) return false;
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k, i) => k === kb[i] && sameFilter((a as Doc)[k], (b as Doc)[k]));
  }
  return compareValues(a, b) === 0 && typeRank(a) === typeRank(b);
}

export interface Range {
  rank: number;
  lower?: { value: unknown; inclusive: boolean };
  upper?: { value: unknown; inclusive: boolean };
}

function belowLower(v: unknown, r: Range): boolean {
  const rank = typeRank(v);
  if (rank !== r.rank) return rank < r.rank;
  if (!r.lower) return false;
  const c = compareValues(v, r.lower.value);
  return c < 0 || (c === 0 && !r.lower.inclusive);
}

function aboveUpper(v: unknown, r: Range): boolean {
  const rank = typeRank(v);
  if (rank !== r.rank) return rank > r.rank;
  if (!r.upper) return false;
  const c = compareValues(v, r.upper.value);
  return c > 0 || (c === 0 && !r.upper.inclusive);
}

export interface IndexKeys {
  keys: unknown[][];
  multikey: boolean;
}

export class IndexState {
  readonly name: string;
  readonly fields: readonly string[];
  readonly dirs: readonly (1 | -1)[];
  readonly unique: boolean;
  readonly partial: Matcher | undefined;
  readonly list: SortedList<IndexEntry>;
  /** Documents with an array on an indexed path: while any exist, the index cannot serve sorts. */
  readonly multikeyDocs = new Set<string>();
  private readonly segs: readonly string[][];
  private readonly idDir: 1 | -1;

  constructor(readonly spec: NormalizedIndexSpec) {
    this.name = spec.name;
    this.fields = spec.keys.map(([p]) => p);
    this.dirs = spec.keys.map(([, d]) => d);
    this.segs = this.fields.map(splitPath);
    this.unique = spec.unique;
    this.partial = spec.partialFilterExpression ? compileFilter(spec.partialFilterExpression) : undefined;
    // Ties on the key are ordered by _id in the direction of the last key, which makes a reverse walk
    // produce exactly the reverse order (in-memory sorts follow the same rule).
    this.idDir = this.dirs[this.dirs.length - 1] ?? 1;
    this.list = new SortedList<IndexEntry>(this.compareEntries);
  }

  get multikey(): boolean {
    return this.multikeyDocs.size > 0;
  }

  readonly compareEntries = (a: IndexEntry, b: IndexEntry): number => {
    const n = this.dirs.length;
    for (let i = 0; i < n; i++) {
      const c = compareValues(a.k[i], b.k[i]);
      if (c !== 0) return c * (this.dirs[i] as number);
    }
    return compareIds(a.id, b.id) * this.idDir;
  };

  /** Whether the document belongs in this index (partial indexes hold only matching documents). */
  covers(doc: Doc): boolean {
    return this.partial === undefined || this.partial(doc);
  }

  /** The distinct keys a document contributes; throws for parallel arrays, as MongoDB does. */
  keysOf(doc: Doc): IndexKeys {
    if (!this.covers(doc)) return { keys: [], multikey: false };
    let multiField = -1;
    let multikey = false;
    const perField: unknown[][] = [];
    for (let i = 0; i < this.segs.length; i++) {
      const { values, viaArray } = pathValues(doc, this.segs[i] as string[]);
      if (viaArray) {
        if (multikey) {
          throw new TypeError(`cannot index parallel arrays [${this.fields[multiField]}] [${this.fields[i]}] (index ${this.name})`);
        }
        multikey = true;
        multiField = i;
      }
      perField.push(values.length > 1 ? dedupe(values) : values);
    }
    if (!multikey) return { keys: [perField.map((v) => v[0])], multikey };
    const keys: unknown[][] = [];
    for (const v of perField[multiField] as unknown[]) keys.push(perField.map((vals, i) => (i === multiField ? v : vals[0])));
    return { keys, multikey };
  }

  /** Adds a document's entries (`keys`: its already computed `keysOf`, if at hand). */
  add(id: string, doc: Doc, keys: IndexKeys = this.keysOf(doc)): void {
    for (const k of keys.keys) this.list.insert({ k, id });
    if (keys.multikey) this.multikeyDocs.add(id);
  }

  remove(id: string, doc: Doc): void {
    const { keys } = this.keysOf(doc);
    for (const k of keys) this.list.remove({ k, id });
    this.multikeyDocs.delete(id);
  }

  load(records: Iterable<[string, Doc]>): void {
    const entries: IndexEntry[] = [];
    this.multikeyDocs.clear();
    for (const [id, doc] of records) {
      const { keys, multikey } = this.keysOf(doc);
      for (const k of keys) entries.push({ k, id });
      if (multikey) this.multikeyDocs.add(id);
    }
    this.list.load(entries);
  }

  /**
   * Another document holding `key`, if any: `counts` decides which ids are considered, `list`
   * defaults to this index's entries (a transaction passes its own overlay entries).
   */
  findOther(key: readonly unknown[], id: string, counts: (otherId: string) => boolean, list = this.list): string | undefined {
    const n = key.length;
    const start = list.bisect((e) => comparePrefix(e.k, key, this.dirs, n) < 0);
    for (const e of list.forward(start, list.end())) {
      if (comparePrefix(e.k, key, this.dirs, n) !== 0) return undefined;
      if (e.id !== id && counts(e.id)) return e.id;
    }
    return undefined;
  }

  /**
   * The stretch of entries whose first `point.length` keys equal `point` and whose next key lies
   * in `range` (if given).
   */
  interval(point: readonly unknown[], range?: Range): { start: Cursor; end: Cursor } {
    const p = point.length;
    const dirs = this.dirs;
    const dir = dirs[p] ?? 1;
    const start = this.list.bisect((e) => {
      const c = comparePrefix(e.k, point, dirs, p);
      if (c !== 0) return c < 0;
      if (!range) return false;
      const v = e.k[p];
      return dir === 1 ? belowLower(v, range) : aboveUpper(v, range);
    });
    const end = this.list.bisect((e) => {
      const c = comparePrefix(e.k, point, dirs, p);
      if (c !== 0) return c < 0;
      if (!range) return true;
      const v = e.k[p];
      return !(dir === 1 ? aboveUpper(v, range) : belowLower(v, range));
    });
    return { start, end };
  }

  /** Whether two entries carry the same key (whatever their ids). */
  sameKey(a: IndexEntry, b: IndexEntry): boolean {
    return comparePrefix(a.k, b.k, this.dirs, this.dirs.length) === 0;
  }

  /** Entry comparison restricted to the keys from position `from`, then _id (for merging runs). */
  compareFrom(a: IndexEntry, b: IndexEntry, from: number): number {
    for (let i = from; i < this.dirs.length; i++) {
      const c = compareValues(a.k[i], b.k[i]);
      if (c !== 0) return c * (this.dirs[i] as number);
    }
    return compareIds(a.id, b.id) * this.idDir;
  }

  /** Point-lookup values for one field from a planner condition, in index order. */
  sortedPointValues(cond: FieldCondition, field: number): unknown[] {
    const dir = this.dirs[field] ?? 1;
    return dedupe(cond.eq ?? []).sort((a, b) => compareValues(a, b) * dir);
  }
}

function comparePrefix(k: readonly unknown[], point: readonly unknown[], dirs: readonly (1 | -1)[], n: number): number {
  for (let i = 0; i < n; i++) {
    const c = compareValues(k[i], point[i]);
    if (c !== 0) return c * (dirs[i] as number);
  }
  return 0;
}

function dedupe(values: readonly unknown[]): unknown[] {
  const sorted = values.slice().sort(compareValues);
  const out: unknown[] = [];
  for (const v of sorted) if (out.length === 0 || compareValues(out[out.length - 1], v) !== 0) out.push(v);
  return out;
}
