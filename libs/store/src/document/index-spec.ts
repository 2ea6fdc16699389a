/**
 * Index specs: validation (one clear error for anything an adapter would treat differently) and
 * comparison, so `createIndexes` is idempotent per name and refuses a name reused for other keys.
 */
import type { Filter, IndexSpec } from '../port.js';
import { compileFilter } from './filter.js';
import { assertPath } from './paths.js';
import { compareValues, isPlainObject, typeRank } from './values.js';

export interface NormalizedIndexSpec {
  name: string;
  keys: [string, 1 | -1][];
  unique: boolean;
  partialFilterExpression?: Filter;
  expireAfterSeconds?: number;
  /** A substring index over the last key (see `IndexSpec.substring`). */
  substring: boolean;
}

export const ID_INDEX = '_id_';

export function normalizeIndexSpec(spec: IndexSpec): NormalizedIndexSpec {
  if (!isPlainObject(spec)) throw new TypeError('index spec must be a plain object');
  const { name, keys, unique, partialFilterExpression, expireAfterSeconds, substring } = spec;
  const known = new Set(['name', 'keys', 'unique', 'partialFilterExpression', 'expireAfterSeconds', 'substring']);
  const unknown = Object.keys(spec).find((k) => !known.has(k));
  if (unknown !== undefined) throw new TypeError(`index spec: unknown option '${unknown}'`);
  if (typeof name !== 'string' || name === '') throw new TypeError('index spec: name must be a non-empty string');
  if (name === ID_INDEX) throw new TypeError(`index spec: the name ${ID_INDEX} is reserved for the built-in _id index`);
  if (!isPlainObject(keys) || Object.keys(keys).length === 0) throw new TypeError(`index ${name}: keys must name at least one field`);
  const entries: [string, 1 | -1][] = [];
  for (const [path, dir] of Object.entries(keys)) {
    assertPath(path, `index ${name}`);
    // MongoDB gives numeric path segments a double meaning (array position or field name) in
    // index keys; the embedded adapter cannot reproduce it, so both refuse them.
    if (path.split('.').some((s) => /^\d+$/.test(s))) throw new TypeError(`index ${name}: numeric path segments ('${path}') are not supported`);
    if (dir !== 1 && dir !== -1) throw new TypeError(`index ${name}: direction of '${path}' must be 1 or -1`);
    entries.push([path, dir]);
  }
  if (unique !== undefined && typeof unique !== 'boolean') throw new TypeError(`index ${name}: unique must be a boolean`);
  if (substring !== undefined && typeof substring !== 'boolean') throw new TypeError(`index ${name}: substring must be a boolean`);
  const out: NormalizedIndexSpec = { name, keys: entries, unique: unique === true, substring: substring === true };
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
  if (out.substring && (out.unique || out.expireAfterSeconds !== undefined || out.partialFilterExpression !== undefined)) {
    throw new TypeError(`index ${name}: a substring index cannot also be unique, partial or a TTL index`);
  }
  return out;
}

export function toIndexSpec(spec: NormalizedIndexSpec): IndexSpec {
  const out: IndexSpec = { name: spec.name, keys: Object.fromEntries(spec.keys) };
  if (spec.unique) out.unique = true;
  if (spec.partialFilterExpression !== undefined) out.partialFilterExpression = spec.partialFilterExpression;
  if (spec.expireAfterSeconds !== undefined) out.expireAfterSeconds = spec.expireAfterSeconds;
  if (spec.substring) out.substring = true;
  return out;
}

export function sameIndexSpec(a: NormalizedIndexSpec, b: NormalizedIndexSpec): boolean {
  return (
    a.name === b.name &&
    a.unique === b.unique &&
    a.substring === b.substring &&
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
    const kb = Object.keys(b as object);
    return ka.length === kb.length && ka.every((k, i) => k === kb[i] && sameFilter((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
  }
  return compareValues(a, b) === 0 && typeRank(a) === typeRank(b);
}
