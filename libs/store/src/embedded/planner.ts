/**
 * The query planner and executor. Candidates come from the cheapest of: `_id` lookups, an index
 * whose leading keys are fixed by equality/`$in` conditions (optionally followed by a range on the
 * next key, or by a literal substring condition tested on the index keys), or a full scan. When
 * the chosen index's order is the requested sort, it is walked in order and the walk stops once
 * `skip + limit` matches are found. Every candidate is checked against the full filter, so an
 * index only ever narrows the work, never the semantics.
 */
import type { Filter } from '../port.js';
import { extractConditions, impliesPartial, literalConditions, type Matcher } from '../document/filter.js';
import type { IndexEntry, IndexState, Range } from './index-state.js';
import { assertPath, sortValue, splitPath } from '../document/paths.js';
import { compareIds, compareValues, isPlainObject } from '../document/values.js';

type Doc = Record<string, unknown>;

export interface Rec {
  readonly doc: Doc;
  /** Commit sequence number of the write that produced this version. */
  readonly v: number;
}

export interface SortKey {
  path: string;
  segs: string[];
  dir: 1 | -1;
}

export type CompiledSort = readonly SortKey[];

export function compileSort(sort: unknown): CompiledSort | undefined {
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

/**
 * Sorts documents by the sort keys, ties by `_id` in the direction of the last key (the same tie
 * order an index walk produces).
 */
export function sortBy<T>(items: T[], docOf: (item: T) => Doc, sort: CompiledSort): T[] {
  const tieDir = sort[sort.length - 1]?.dir ?? 1;
  const decorated = items.map((item) => {
    const doc = docOf(item);
    return { item, id: String(doc._id), keys: sort.map((k) => sortValue(doc, k.segs, k.dir)) };
  });
  decorated.sort((a, b) => {
    for (let i = 0; i < sort.length; i++) {
      const c = compareValues(a.keys[i], b.keys[i]);
      if (c !== 0) return c * (sort[i] as SortKey).dir;
    }
    return compareIds(a.id, b.id) * tieDir;
  });
  return decorated.map((d) => d.item);
}

export interface QueryExplain {
  /** `IDHACK`: `_id` lookups; `IXSCAN`: an index; `COLLSCAN`: every document. */
  plan: 'IDHACK' | 'IXSCAN' | 'COLLSCAN';
  index?: string;
  /** Index entries visited. */
  keysExamined: number;
  /** Documents the filter was evaluated on. */
  docsExamined: number;
  /** Documents returned (after skip and limit). */
  nReturned: number;
  /** The result was sorted after collecting it rather than read in order from an index. */
  inMemorySort: boolean;
  /**
   * The index enforces the whole filter exactly (equality and `$in` on its leading keys), so
   * documents were not re-checked and a count read no documents at all.
   */
  indexOnly: boolean;
}

export interface PlanQuery {
  filter: Filter;
  matcher: Matcher;
  sort: CompiledSort | undefined;
  /** How many matches are wanted in order (`skip + limit`); Infinity for all. */
  want: number;
  /** Ids to leave out (a transaction's own versions replace them). */
  exclude?: (id: string) => boolean;
  /** Only the number of matches is wanted. */
  countOnly?: boolean;
}

export interface PlanResult {
  /** The matches in order (empty for `countOnly`). */
  recs: Rec[];
  count: number;
  explain: QueryExplain;
  /** A trial scan ran out of its budget before finishing: `recs` is incomplete. */
  abandoned?: boolean;
}

/**
 * Relative cost per index entry against a full scan's per-document cost: an extra lookup each,
 * but no filter evaluation when the index decides the filter exactly.
 */
const INDEX_ENTRY_COST = 1.2;
const COVERED_ENTRY_COST = 0.5;

/** Upper bound on point lookups generated from `$in` lists before the planner stops extending the prefix. */
const MAX_POINTS = 1000;

/**
 * Relative cost of an index entry whose key a substring test rejects: no document is fetched, so
 * it is much cheaper than examining a document.
 */
const KEY_FILTER_ENTRY_COST = 0.25;

/**
 * How many documents an ordered walk may examine before the planner gives up on it in favour of a
 * key-filtered scan: about what that scan costs (examining a document costs roughly as much as
 * testing sixteen keys), so neither choice is ever much worse than the other; between 100 and
 * 10,000. A substring condition's selectivity cannot be estimated, so (like MongoDB's trial runs)
 * the ordered walk gets a bounded try: frequent text fills a page early, rare text falls back to
 * testing index keys.
 */
const trialDocs = (keys: number): number => Math.max(100, Math.min(10_000, Math.ceil(keys / 16)));

type Walk = 'forward' | 'backward' | 'merge-forward' | 'merge-backward';

interface IndexPlan {
  idx: IndexState;
  points: unknown[][];
  range: Range | undefined;
  prefix: number;
  walk: Walk | undefined;
  count: number;
  covered: boolean;
  /** A substring the index key at `keyFilter.position` must contain (tested before fetching). */
  keyFilter?: { position: number; literal: string };
}

export function execute(records: ReadonlyMap<string, Rec>, indexes: Iterable<IndexState>, q: PlanQuery): PlanResult {
  const conds = extractConditions(q.filter);
  const idCond = conds.get('_id');
  if (idCond?.eq) return idLookup(records, idCond.eq, q);

  const literals = literalConditions(q.filter);
  const plans: IndexPlan[] = [];
  for (const idx of indexes) {
    const plan = planIndex(idx, conds, q, literals);
    if (plan) plans.push(plan);
  }
  const minCount = plans.reduce((m, p) => Math.min(m, p.count), records.size);
  // Estimated documents examined. An ordered walk stops after `want` matches; the best equality
  // plan's count stands in for the number of matches when estimating how far that walk goes.
  const cost = (count: number, ordered: boolean): number =>
    ordered && Number.isFinite(q.want) ? Math.min(count, (q.want * count) / Math.max(1, minCount)) : count;
  const rank = (c: number, ordered: boolean, prefix: number): [number, number, number] => [c, ordered ? 0 : 1, -prefix];
  const better = (a: [number, number, number], b: [number, number, number]): boolean =>
    a[0] !== b[0] ? a[0] < b[0] : a[1] !== b[1] ? a[1] < b[1] : a[2] < b[2];
  let best: IndexPlan | undefined;
  let bestRank = rank(cost(records.size, q.sort === undefined), q.sort === undefined, -1);
  let keyFiltered: { plan: IndexPlan; rank: [number, number, number] } | undefined;
  for (const plan of plans) {
    const ordered = q.sort === undefined || plan.walk !== undefined;
    const perEntry = plan.keyFilter ? KEY_FILTER_ENTRY_COST : plan.covered ? COVERED_ENTRY_COST : INDEX_ENTRY_COST;
    const r = rank(cost(plan.count, ordered) * perEntry, ordered, plan.prefix);
    if (plan.keyFilter && (!keyFiltered || better(r, keyFiltered.rank))) keyFiltered = { plan, rank: r };
    if (better(r, bestRank)) {
      best = plan;
      bestRank = r;
    }
  }
  // An ordered walk's estimate assumes the substring condition matches often. Try it within a
  // budget; when it does not fill the page in time, test the index keys instead.
  const alternative = keyFiltered?.plan;
  const trial = alternative && alternative !== best && !q.countOnly && Number.isFinite(q.want) && (best === undefined || best.walk !== undefined || q.sort === undefined);
  if (alternative && trial) {
    const budget = trialDocs(alternative.count);
    const tried = best ? indexScan(records, best, q, budget) : collScan(records, q, budget);
    if (!tried.abandoned) return tried;
    const fallback = indexScan(records, alternative, q);
    fallback.explain.keysExamined += tried.explain.keysExamined;
    fallback.explain.docsExamined += tried.explain.docsExamined;
    return fallback;
  }
  return best ? indexScan(records, best, q) : collScan(records, q);
}

function newExplain(plan: QueryExplain['plan'], q: PlanQuery, extra: Partial<QueryExplain> = {}): QueryExplain {
  return { plan, keysExamined: 0, docsExamined: 0, nReturned: 0, inMemorySort: q.sort !== undefined && !q.countOnly, indexOnly: false, ...extra };
}

function idLookup(records: ReadonlyMap<string, Rec>, ids: unknown[], q: PlanQuery): PlanResult {
  const exact = Object.keys(q.filter).length === 1 && isExactEquality(q.filter._id);
  const explain = newExplain('IDHACK', q, { indexOnly: exact });
  const seen = new Set<string>();
  const out: Rec[] = [];
  for (const id of ids) {
    if (typeof id !== 'string' || seen.has(id)) continue;
    seen.add(id);
    explain.keysExamined++;
    if (q.exclude?.(id)) continue;
    const rec = records.get(id);
    if (!rec) continue;
    if (exact) {
      out.push(rec);
      continue;
    }
    explain.docsExamined++;
    if (q.matcher(rec.doc)) out.push(rec);
  }
  return finish(out, q, explain, false);
}

/** A full scan; with a `budget`, abandoned once that many documents were examined without finishing. */
function collScan(records: ReadonlyMap<string, Rec>, q: PlanQuery, budget?: number): PlanResult {
  const explain = newExplain('COLLSCAN', q);
  const out: Rec[] = [];
  const stopEarly = q.sort === undefined && !q.countOnly;
  for (const [id, rec] of records) {
    if (q.exclude?.(id)) continue;
    if (budget !== undefined && explain.docsExamined >= budget) return { recs: [], count: 0, explain, abandoned: true };
    explain.docsExamined++;
    if (q.matcher(rec.doc)) {
      out.push(rec);
      if (stopEarly && out.length >= q.want) break;
    }
  }
  return finish(out, q, explain, false);
}

/** Orders (unless already in order) and truncates the matches. */
function finish(recs: Rec[], q: PlanQuery, explain: QueryExplain, ordered: boolean): PlanResult {
  if (q.countOnly) return { recs: [], count: recs.length, explain };
  let out = recs;
  if (q.sort && !ordered) out = Number.isFinite(q.want) && q.want < recs.length / 8 ? topK(recs, q.sort, q.want) : sortBy(recs, (r) => r.doc, q.sort);
  if (Number.isFinite(q.want) && out.length > q.want) out = out.slice(0, q.want);
  return { recs: out, count: out.length, explain };
}

/** The first `k` records in sort order without sorting all of them. */
function topK(recs: Rec[], sort: CompiledSort, k: number): Rec[] {
  const tieDir = sort[sort.length - 1]?.dir ?? 1;
  type Keyed = { rec: Rec; id: string; keys: unknown[] };
  const cmp = (a: Keyed, b: Keyed): number => {
    for (let i = 0; i < sort.length; i++) {
      const c = compareValues(a.keys[i], b.keys[i]);
      if (c !== 0) return c * (sort[i] as SortKey).dir;
    }
    return compareIds(a.id, b.id) * tieDir;
  };
  const best: Keyed[] = [];
  for (const rec of recs) {
    const item: Keyed = { rec, id: String(rec.doc._id), keys: sort.map((s) => sortValue(rec.doc, s.segs, s.dir)) };
    if (best.length === k && cmp(item, best[k - 1] as Keyed) >= 0) continue;
    let lo = 0;
    let hi = best.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cmp(best[mid] as Keyed, item) <= 0) lo = mid + 1;
      else hi = mid;
    }
    best.splice(lo, 0, item);
    if (best.length > k) best.pop();
  }
  return best.map((b) => b.rec);
}

/**
 * Whether the index alone decides the filter: every condition is an equality or `$in` on one of
 * the leading keys the plan fixes, on an index without array values (then an entry's key is
 * exactly the field's value, or null when the field is missing).
 */
function coveredBy(filter: Filter, idx: IndexState, prefix: number): boolean {
  if (idx.multikey) return false;
  const fields = new Set(idx.fields.slice(0, prefix));
  for (const [key, value] of Object.entries(filter)) {
    if (!fields.has(key) || !isExactEquality(value)) return false;
  }
  return true;
}

/**
 * A condition that is only an equality or `$in` (the planner has already checked that the values
 * are plain scalars when it used them as lookup keys).
 */
function isExactEquality(value: unknown): boolean {
  if (value instanceof RegExp || Array.isArray(value)) return false;
  if (isPlainObject(value)) {
    const ops = Object.keys(value);
    return ops.length === 1 && (ops[0] === '$eq' || ops[0] === '$in');
  }
  return true;
}

function planIndex(
  idx: IndexState,
  conds: ReturnType<typeof extractConditions>,
  q: PlanQuery,
  literals: readonly { field: string; literal: string }[],
): IndexPlan | undefined {
  const partial = idx.spec.partialFilterExpression;
  if (partial !== undefined && !impliesPartial(q.filter, partial)) return undefined;
  const fields = idx.fields;
  const pointValues: unknown[][] = [];
  let combos = 1;
  let prefix = 0;
  while (prefix < fields.length) {
    const cond = conds.get(fields[prefix] as string);
    if (!cond?.eq) break;
    const values = idx.sortedPointValues(cond, prefix);
    if (combos * values.length > MAX_POINTS) break;
    combos *= values.length;
    pointValues.push(values);
    prefix++;
  }
  // With arrays in the index, bounds from different elements cannot be intersected safely.
  const range = prefix < fields.length && !idx.multikey ? conds.get(fields[prefix] as string)?.range : undefined;
  const walk = chooseWalk(idx, prefix, pointValues, q.sort);
  // A key after the prefix may be tested for a substring without fetching the document (not with
  // arrays in the index: an entry's key is then one element, not the field's value).
  let keyFilter: IndexPlan['keyFilter'];
  if (!idx.multikey) {
    for (let position = prefix; position < fields.length && !keyFilter; position++) {
      const literal = literals.find((l) => l.field === fields[position]);
      if (literal) keyFilter = { position, literal: literal.literal };
    }
  }
  if (prefix === 0 && range === undefined && walk === undefined && keyFilter === undefined) return undefined;
  const points = cartesian(pointValues);
  let count = 0;
  for (const point of points) {
    const { start, end } = idx.interval(point, range);
    count += idx.list.rank(end) - idx.list.rank(start);
  }
  const covered = range === undefined && coveredBy(q.filter, idx, prefix);
  return { idx, points, range, prefix, walk, count, covered, ...(keyFilter ? { keyFilter } : {}) };
}

/**
 * How to walk the index so entries come out in exactly the order an in-memory sort gives (sort
 * keys, then `_id` in the direction of the last sort key), if it can. Requiring the exact order,
 * ties included, keeps results independent of which indexes exist. Keys fixed to one value by the
 * filter drop out of both orders.
 */
function chooseWalk(idx: IndexState, prefix: number, pointValues: unknown[][], sort: CompiledSort | undefined): Walk | undefined {
  if (sort === undefined || idx.multikey) return undefined;
  const fields = idx.fields;
  const dirs = idx.dirs;
  const constant = new Set<string>();
  for (let i = 0; i < prefix; i++) if ((pointValues[i] as unknown[]).length === 1) constant.add(fields[i] as string);
  const upToId = (keys: [string, 1 | -1][], idDir: 1 | -1): [string, 1 | -1][] => {
    const out: [string, 1 | -1][] = [];
    for (const k of keys) {
      out.push(k);
      if (k[0] === '_id') return out;
    }
    out.push(['_id', idDir]);
    return out;
  };
  const target = upToId(
    sort.filter((k) => !constant.has(k.path)).map((k) => [k.path, k.dir] as [string, 1 | -1]),
    (sort[sort.length - 1] as SortKey).dir,
  );
  const idDir = dirs[dirs.length - 1] ?? 1;
  const keyed = fields.map((f, i) => [f, dirs[i]] as [string, 1 | -1]);
  const relation = (order: [string, 1 | -1][]): 1 | -1 | 0 => {
    if (order.length !== target.length) return 0;
    let rel: 1 | -1 | 0 = 0;
    for (let i = 0; i < order.length; i++) {
      const [path, dir] = order[i] as [string, 1 | -1];
      const [wantPath, wantDir] = target[i] as [string, 1 | -1];
      if (path !== wantPath) return 0;
      const r = dir === wantDir ? 1 : -1;
      if (rel === 0) rel = r;
      else if (rel !== r) return 0;
    }
    return rel;
  };
  // Points are visited in index order, so concatenating their runs yields the index order.
  const whole = relation(upToId(keyed.filter(([f]) => !constant.has(f)), idDir));
  if (whole !== 0) return whole === 1 ? 'forward' : 'backward';
  // Otherwise merge the runs of several points by the keys after the prefix.
  const merged = relation(upToId(keyed.slice(prefix), idDir));
  if (merged !== 0) return merged === 1 ? 'merge-forward' : 'merge-backward';
  return undefined;
}

function cartesian(lists: unknown[][]): unknown[][] {
  let out: unknown[][] = [[]];
  for (const list of lists) {
    const next: unknown[][] = [];
    for (const prefix of out) for (const v of list) next.push([...prefix, v]);
    out = next;
  }
  return out;
}

/** Entries of several runs merged into sort order (an `$in` on a key before the sort keys). */
function* mergedEntries(plan: IndexPlan, sign: 1 | -1): Generator<IndexEntry> {
  const { idx, points, range } = plan;
  const list = idx.list;
  const runs = points.map((point) => {
    const { start, end } = idx.interval(point, range);
    return sign === 1 ? list.forward(start, end) : list.backward(start, end);
  });
  const heads = runs.map((r) => r.next());
  for (;;) {
    let pick = -1;
    for (let i = 0; i < heads.length; i++) {
      const h = heads[i] as IteratorResult<IndexEntry>;
      if (h.done) continue;
      const cur = heads[pick];
      if (pick === -1 || (cur && !cur.done && idx.compareFrom(h.value, cur.value, plan.prefix) * sign < 0)) pick = i;
    }
    if (pick === -1) return;
    const head = heads[pick] as IteratorYieldResult<IndexEntry>;
    yield head.value;
    heads[pick] = (runs[pick] as Generator<IndexEntry>).next();
  }
}

/** An index scan; with a `budget`, abandoned once that many documents were examined without finishing. */
function indexScan(records: ReadonlyMap<string, Rec>, plan: IndexPlan, q: PlanQuery, budget?: number): PlanResult {
  const ordered = q.sort === undefined || plan.walk !== undefined;
  const explain = newExplain('IXSCAN', q, { index: plan.idx.name, inMemorySort: !ordered && !q.countOnly, indexOnly: plan.covered });
  if (q.countOnly && plan.covered && !q.exclude) return { recs: [], count: plan.count, explain };
  const seen = plan.idx.multikey ? new Set<string>() : undefined;
  const stopAt = ordered && !q.countOnly ? q.want : Infinity;
  const out: Rec[] = [];
  const matcher = plan.covered ? undefined : q.matcher;
  const keyFilter = plan.keyFilter;
  let overBudget = false;
  const visit = (e: IndexEntry): boolean => {
    explain.keysExamined++;
    if (keyFilter) {
      const key = e.k[keyFilter.position];
      if (typeof key === 'string' && !key.includes(keyFilter.literal)) return true;
    }
    if (seen) {
      if (seen.has(e.id)) return true;
      seen.add(e.id);
    }
    if (q.exclude?.(e.id)) return true;
    if (budget !== undefined && explain.docsExamined >= budget) {
      overBudget = true;
      return false;
    }
    const rec = records.get(e.id);
    if (!rec) return true;
    if (matcher) {
      explain.docsExamined++;
      if (!matcher(rec.doc)) return true;
    }
    out.push(rec);
    return out.length < stopAt;
  };
  const { idx, points, range, walk } = plan;
  if (walk === 'merge-forward' || walk === 'merge-backward') {
    for (const e of mergedEntries(plan, walk === 'merge-forward' ? 1 : -1)) if (!visit(e)) break;
  } else {
    const reverse = walk === 'backward';
    for (let i = 0; i < points.length; i++) {
      const point = points[reverse ? points.length - 1 - i : i] as unknown[];
      const { start, end } = idx.interval(point, range);
      if (!idx.list.scan(start, end, reverse, visit)) break;
    }
  }
  if (overBudget) return { recs: [], count: 0, explain, abandoned: true };
  return finish(out, q, explain, ordered);
}
