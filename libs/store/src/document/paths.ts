/**
 * Dotted-path access with MongoDB's implicit array traversal: `items.kind` reaches the `kind` of
 * every element of `items`. Index keys and sort keys are read here.
 */
import { cloneValue, compareValues, isPlainObject } from './values.js';

export function splitPath(path: string): string[] {
  return path.split('.');
}

export function assertPath(path: string, what: string): void {
  if (typeof path !== 'string' || path === '') throw new TypeError(`${what}: field path must be a non-empty string`);
  for (const seg of path.split('.')) {
    if (seg === '') throw new TypeError(`${what}: invalid field path '${path}'`);
    if (seg.startsWith('$')) throw new TypeError(`${what}: field path '${path}' must not contain '$' segments`);
    if (seg === '__proto__') throw new TypeError(`${what}: field path '${path}' is not allowed`);
  }
}

export interface PathValues {
  values: unknown[];
  /** An array was traversed or found at the leaf (a multikey value). */
  viaArray: boolean;
}

/**
 * Every value reachable at a path; missing becomes `null` (MongoDB indexes a missing field as
 * null). Arrays at the leaf contribute their elements; an empty array contributes itself.
 */
export function pathValues(doc: unknown, segs: readonly string[]): PathValues {
  const out: unknown[] = [];
  const state = { viaArray: false };
  collect(doc, segs, 0, out, state);
  return { values: out, viaArray: state.viaArray };
}

function collect(value: unknown, segs: readonly string[], i: number, out: unknown[], state: { viaArray: boolean }): void {
  if (i === segs.length) {
    if (Array.isArray(value)) {
      state.viaArray = true;
      if (value.length === 0) out.push([]);
      else pushFlat(value, out);
    } else {
      out.push(value === undefined ? null : value);
    }
    return;
  }
  if (Array.isArray(value)) {
    state.viaArray = true;
    if (value.length === 0) {
      out.push(null);
      return;
    }
    for (const el of value) collect(el, segs, i, out, state);
    return;
  }
  if (isPlainObject(value)) {
    collect(value[segs[i] as string], segs, i + 1, out, state);
    return;
  }
  out.push(null);
}

/**
 * Elements of a leaf array, nested arrays flattened too: mingo matches `{'a.b': 1}` against
 * `{a: [{b: [[1]]}]}`, so the index must offer that document as a candidate.
 */
function pushFlat(arr: unknown[], out: unknown[]): void {
  for (const el of arr) {
    if (Array.isArray(el) && el.length > 0) pushFlat(el, out);
    else out.push(el);
  }
}

/** Plain lookup without array traversal (for a single non-array value, e.g. a sort key of a non-multikey doc). */
export function getPath(doc: unknown, segs: readonly string[]): unknown {
  let cur = doc;
  for (const seg of segs) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[seg];
  }
  return cur;
}

/**
 * The value a document sorts by for one sort key: MongoDB sorts on the smallest element of an
 * array when ascending and the largest when descending.
 */
export function sortValue(doc: unknown, segs: readonly string[], dir: 1 | -1): unknown {
  const direct = getPath(doc, segs);
  if (direct !== undefined && !Array.isArray(direct)) return direct;
  const { values, viaArray } = pathValues(doc, segs);
  if (!viaArray) return values[0] ?? null;
  let best: unknown = undefined;
  for (const v of values) {
    const candidate = Array.isArray(v) ? null : v;
    if (best === undefined || compareValues(candidate, best) * dir < 0) best = candidate;
  }
  return best ?? null;
}

// ---- projection ----------------------------------------------------------------------------

interface ProjectionTree {
  [field: string]: ProjectionTree | true;
}

export interface CompiledProjection {
  apply(doc: Record<string, unknown>): Record<string, unknown>;
}

/**
 * Compiled frozen projections: a repository's constant projection (frozen, so it cannot change
 * under its compiled copier) is compiled once rather than at every read.
 */
const compiledFrozen = new WeakMap<object, CompiledProjection | undefined>();

/** Validates a projection the way MongoDB does and compiles it into a copier. */
export function compileProjection(projection: unknown): CompiledProjection | undefined {
  if (projection === undefined) return undefined;
  if (!isPlainObject(projection)) throw new TypeError('projection must be a plain object');
  if (!Object.isFrozen(projection)) return compile(projection);
  if (compiledFrozen.has(projection)) return compiledFrozen.get(projection);
  const compiled = compile(projection);
  compiledFrozen.set(projection, compiled);
  return compiled;
}

function compile(projection: Record<string, unknown>): CompiledProjection | undefined {
  const entries = Object.entries(projection);
  if (entries.length === 0) return undefined;
  let includeId = true;
  let mode: 'include' | 'exclude' | undefined;
  const tree: ProjectionTree = {};
  for (const [path, raw] of entries) {
    let flag: boolean;
    if (raw === 1 || raw === true) flag = true;
    else if (raw === 0 || raw === false) flag = false;
    else throw new TypeError(`projection value for '${path}' must be 0 or 1 (expressions are not supported)`);
    assertPath(path, 'projection');
    if (path === '_id') {
      includeId = flag;
      continue;
    }
    const wanted = flag ? 'include' : 'exclude';
    if (mode !== undefined && mode !== wanted) {
      throw new TypeError(
        mode === 'include'
          ? `Cannot do exclusion on field ${path} in inclusion projection`
          : `Cannot do inclusion on field ${path} in exclusion projection`,
      );
    }
    mode = wanted;
    addToTree(tree, splitPath(path), path);
  }
  if (mode === undefined) {
    // Only `_id` was named: `{_id: 0}` excludes it, `{_id: 1}` keeps only it.
    if (includeId) return { apply: (doc) => ('_id' in doc ? { _id: cloneValue(doc._id) } : {}) };
    return { apply: (doc) => excludeTree(doc, { _id: true }) as Record<string, unknown> };
  }
  if (mode === 'include') {
    return {
      apply(doc) {
        const out = includeTree(doc, tree) as Record<string, unknown>;
        if (includeId && '_id' in doc) return { _id: cloneValue(doc._id), ...out };
        return out;
      },
    };
  }
  const excluded: ProjectionTree = includeId ? tree : { ...tree, _id: true };
  return { apply: (doc) => excludeTree(doc, excluded) as Record<string, unknown> };
}

function addToTree(tree: ProjectionTree, segs: string[], path: string): void {
  let node = tree;
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i] as string;
    const last = i === segs.length - 1;
    const existing = node[seg];
    if (last) {
      if (existing !== undefined) throw new TypeError(`Path collision at ${path}`);
      node[seg] = true;
      return;
    }
    if (existing === true) throw new TypeError(`Path collision at ${path}`);
    if (existing === undefined) {
      const child: ProjectionTree = {};
      node[seg] = child;
      node = child;
    } else {
      node = existing;
    }
  }
}

function includeTree(value: unknown, tree: ProjectionTree): unknown {
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (const el of value) {
      if (isPlainObject(el) || Array.isArray(el)) out.push(includeTree(el, tree));
    }
    return out;
  }
  if (!isPlainObject(value)) return undefined;
  const out: Record<string, unknown> = {};
  // Stored objects are plain: `for...in` visits their own fields (see `cloneValue`).
  for (const key in value) {
    const sub = Object.hasOwn(tree, key) ? tree[key] : undefined;
    if (sub === undefined) continue;
    const v = value[key];
    if (sub === true) {
      out[key] = cloneValue(v);
    } else if (isPlainObject(v) || Array.isArray(v)) {
      out[key] = includeTree(v, sub);
    }
  }
  return out;
}

function excludeTree(value: unknown, tree: ProjectionTree): unknown {
  if (Array.isArray(value)) return value.map((el) => (isPlainObject(el) || Array.isArray(el) ? excludeTree(el, tree) : cloneValue(el)));
  if (!isPlainObject(value)) return cloneValue(value);
  const out: Record<string, unknown> = {};
  // One copy: fields outside the tree are copied as they are, excluded ones never (the caller's
  // copy of a stored document is made here, not copied again). `for...in`: see `cloneValue`.
  for (const key in value) {
    if (!Object.hasOwn(tree, key)) {
      out[key] = cloneValue(value[key]);
      continue;
    }
    const sub = tree[key] as ProjectionTree | true;
    if (sub !== true) out[key] = excludeTree(value[key], sub);
  }
  return out;
}
