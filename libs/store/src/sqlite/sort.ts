/**
 * Sorts in MongoDB's order: by each sort key (an array sorts by its smallest element ascending,
 * its largest descending), ties by `_id` in the direction of the last sort key, which is also the
 * order an index walk gives, so results do not depend on which indexes exist.
 */
import { assertPath, sortValue, splitPath } from '../document/paths.js';
import { compareIds, compareValues, isPlainObject } from '../document/values.js';

type Doc = Record<string, unknown>;

export interface SortKey {
  path: string;
  segs: string[];
  dir: 1 | -1;
}

export function compileSort(sort: unknown): SortKey[] | undefined {
  if (sort === undefined) return undefined;
  if (!isPlainObject(sort)) throw new TypeError('sort must be a plain object of {field: 1 | -1}');
  const keys: SortKey[] = [];
  for (const [path, dir] of Object.entries(sort)) {
    assertPath(path, 'sort');
    if (dir !== 1 && dir !== -1) throw new TypeError(`sort direction of '${path}' must be 1 or -1`);
    keys.push({ path, segs: splitPath(path), dir });
  }
  return keys.length > 0 ? keys : undefined;
}

export interface Keyed<T> {
  item: T;
  id: string;
  keys: unknown[];
}

export function keyed<T>(item: T, doc: Doc, sort: readonly SortKey[]): Keyed<T> {
  return { item, id: String(doc._id), keys: sort.map((k) => sortValue(doc, k.segs, k.dir)) };
}

export function comparator<T>(sort: readonly SortKey[]): (a: Keyed<T>, b: Keyed<T>) => number {
  const tieDir = sort[sort.length - 1]?.dir ?? 1;
  return (a, b) => {
    for (let i = 0; i < sort.length; i++) {
      const c = compareValues(a.keys[i], b.keys[i]);
      if (c !== 0) return c * (sort[i] as SortKey).dir;
    }
    return compareIds(a.id, b.id) * tieDir;
  };
}

/** The first `k` items in sort order (all of them, sorted, when `k` is Infinity). */
export function topK<T>(items: Keyed<T>[], sort: readonly SortKey[], k: number): Keyed<T>[] {
  const cmp = comparator<T>(sort);
  if (!Number.isFinite(k) || k >= items.length / 8) return items.sort(cmp).slice(0, Number.isFinite(k) ? k : undefined);
  const best: Keyed<T>[] = [];
  for (const item of items) {
    if (best.length === k && cmp(item, best[k - 1] as Keyed<T>) >= 0) continue;
    let lo = 0;
    let hi = best.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cmp(best[mid] as Keyed<T>, item) <= 0) lo = mid + 1;
      else hi = mid;
    }
    best.splice(lo, 0, item);
    if (best.length > k) best.pop();
  }
  return best;
}
