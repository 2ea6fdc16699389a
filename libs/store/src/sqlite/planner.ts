/**
 * Query planning for the SQLite adapter. A query becomes one SQL statement that narrows the
 * documents through an access path and filters them with the filter's SQL form (`sql-filter.ts`):
 *
 * - `IDHACK`: `_id` equality or `$in` (the table's `_id` index);
 * - `IXSCAN`: an index table of the port's index (equality or `$in` on its leading keys, then an
 *   optional range on the next key; walked in the requested order when its keys give that order,
 *   so the walk stops after a page);
 * - `FTS`: a substring index's trigram table for a literal text condition of three or more
 *   characters (candidates, then the exact test);
 * - `COLLSCAN`: every document.
 *
 * The planner picks the path from what it can know cheaply: an index that decides the whole
 * filter in the requested order wins at once; otherwise counts of the candidate ranges (bounded
 * to what the decision needs) and, for text, the document count of the literal's rarest trigram
 * (from the full-text index's vocabulary) decide between an ordered walk (over the narrowest
 * range that gives the order), fetching the few matches and sorting them, and the ordered walk
 * filtered by another range's (or the text candidates') row ids, so that only candidates' documents
 * are read. The documents are tested only for what the walk does not decide itself.
 */
import type { Filter } from '../port.js';
import { extractConditions, impliesPartial, literalConditions, type FieldCondition } from '../document/filter.js';
import { encodeKey, KEY_BRACKETS } from '../document/keys.js';
import type { SortKey } from './sort.js';
import { LONE_SURROGATE, Params, translateFilter } from './sql-filter.js';
import { CHUNK_BITS, literalWindows } from './text-chunks.js';

export interface PlannerIndex {
  readonly name: string;
  readonly fields: readonly string[];
  readonly dirs: readonly (1 | -1)[];
  readonly unique: boolean;
  readonly multikey: boolean;
  readonly partialFilterExpression: Filter | undefined;
  /** SQL name of the index table. */
  readonly table: string;
}

export interface PlannerText {
  readonly name: string;
  /** The indexed field (the substring index's last key). */
  readonly field: string;
  /** SQL name of the FTS5 table. */
  readonly table: string;
  /**
   * SQL name of the table of rows whose text changed since the FTS5 table was last brought up to
   * date (`rid`): candidates whatever their text, the exact test decides.
   */
  readonly pending: string;
}

export interface PlannerCollection {
  /** SQL name of the documents table. */
  readonly table: string;
  readonly indexes: readonly PlannerIndex[];
  readonly texts: readonly PlannerText[];
  /** About how many documents the collection holds. */
  docCount(): number;
  /** How many documents hold the trigram (an upper bound on a text's matches). */
  trigramDocs(text: PlannerText, trigram: string): number;
  /** Runs a `count(*) AS n` statement. */
  countRows(sql: string, params: Record<string, unknown>): number;
}

export interface PlanRequest {
  filter: Filter;
  sort: readonly SortKey[] | undefined;
  /** `skip + limit` (Infinity: all). */
  want: number;
  countOnly: boolean;
  /** The statement leaves out documents with these ids (a transaction's own versions replace them). */
  excludeIds: boolean;
  /**
   * The access path chosen for an earlier query of the same shape (`Plan.choice`): taken without
   * counting when this query has the same candidates; the plan is built from this query's values.
   */
  hint?: PlanChoice;
}

/** Which access path a plan took, by index name, for queries of the same shape. */
export type PlanChoice = { path: 'collscan' } | { path: 'index'; index: string } | { path: 'filtered'; walk: string; filter: string };

export interface Plan {
  kind: 'IDHACK' | 'IXSCAN' | 'FTS' | 'COLLSCAN';
  index?: string;
  /** An index walk tests each entry's row id against this index's range (or text index's candidates) before reading the document. */
  filter?: string;
  /** Rows come out in the requested order (a sort-less query is always "in order"). */
  ordered: boolean;
  /** The same document may come out more than once (an index with array values). */
  duplicates: boolean;
  /** The FROM clause's tables, with `c` the documents table (and `x` the index table). */
  source: string;
  /** Conditions of the access path (ANDed); parameters in `params`. */
  where: string[];
  /** `ORDER BY ...` or ''. */
  orderBy: string;
  /**
   * Runs to merge in order: one SELECT per set of conditions (added to `where`), combined with
   * UNION ALL; `orderBy` then names the `o<n>` columns each SELECT adds (`orderColumns`).
   */
  runs?: string[][];
  orderColumns?: string;
  /** The filter's SQL form over `c.doc`: 1, 0 or NULL (decide in JS). */
  residual: string;
  /** Where `residual` may be NULL (type lookups only; see `FilterSql.unsure`). */
  unsure: string;
  params: Params;
  /** The index alone decides the whole filter (no residual), for index-only counts. */
  covered: boolean;
  /** For an index-only count: `index AS x WHERE ...` without the documents table. */
  indexOnlyFrom?: string;
  /**
   * The access path, when it was chosen among indexes by counting (no text condition steered
   * it): a query of the same shape may take it as `PlanRequest.hint` instead of counting again.
   */
  choice?: PlanChoice;
  /** The access path came from `PlanRequest.hint` (nothing was counted for this query). */
  hinted?: boolean;
}

/** Upper bound on point lookups built from `$in` lists before the prefix stops growing. */
const MAX_POINTS = 1000;

/** Upper bound on runs merged into one ordered walk (one SELECT each). */
const MAX_MERGED_RUNS = 32;

/**
 * Relative cost of a full-text candidate against an index entry walked in order: the candidates
 * must all be read and sorted before the first page is known.
 */
const TEXT_CANDIDATE_COST = 4;

/**
 * Relative costs, against reading a document, of gathering one row id of another index's range
 * (`INDEX_FILTER_COST`) or of the text index's candidates (`TEXT_FILTER_COST`) into the set a
 * walk is filtered by, and of walking one index entry whose document is not read (`ENTRY_COST`).
 */
const INDEX_FILTER_COST = 0.1;
const TEXT_FILTER_COST = 0.25;
const ENTRY_COST = 0.1;

interface IndexCandidate {
  idx: PlannerIndex;
  /** Per leading key, the values it must equal (encoded). */
  points: Buffer[][];
  prefix: number;
  range: { lower?: { key: Buffer; inclusive: boolean }; upper?: { key: Buffer; inclusive: boolean }; bracket: readonly [number, number] } | undefined;
  /** How the index yields the requested order, if it does. */
  order: IndexOrder | undefined;
  /** The order comes from walking the index (one run, or merged runs): a page stops the walk. */
  walk: boolean;
  covered: boolean;
}

function isExactEquality(value: unknown): boolean {
  if (value instanceof RegExp || Array.isArray(value)) return false;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    const ops = Object.keys(value);
    return ops.length === 1 && (ops[0] === '$eq' || ops[0] === '$in');
  }
  return true;
}

const col = (i: number, alias = 'x'): string => `${alias}.k${i}`;

/** How an index gives the requested order, if it can. */
interface IndexOrder {
  /** Index columns (with directions) that yield the order: for ORDER BY, or to merge runs by. */
  columns: { sql: string; dir: 1 | -1 }[];
  /**
   * Several `$in` points come before the sort keys: each point's run is walked in order and the
   * runs are merged (no sort step, the walk still stops after a page).
   */
  merge: boolean;
}

/** Whether walking the index (after its fixed prefix) yields exactly the requested order. */
function indexOrder(idx: PlannerIndex, prefix: number, constant: ReadonlySet<string>, sort: readonly SortKey[]): IndexOrder | undefined {
  if (idx.multikey) return undefined;
  // The requested order: sort keys without those fixed to one value, then `_id` in the direction
  // of the last sort key (the tie order every plan gives).
  const wanted: [string, 1 | -1][] = [];
  for (const k of sort) {
    if (constant.has(k.path)) continue;
    wanted.push([k.path, k.dir]);
    if (k.path === '_id') break;
  }
  if (wanted.at(-1)?.[0] !== '_id') wanted.push(['_id', sort[sort.length - 1]?.dir ?? 1]);
  const idDir = idx.dirs[idx.dirs.length - 1] ?? 1;
  const match = (from: number, skipConstant: boolean): IndexOrder['columns'] | undefined => {
    const columns: { field: string; sql: string; dir: 1 | -1 }[] = [];
    for (let i = from; i < idx.fields.length; i++) {
      const field = idx.fields[i] as string;
      if (skipConstant && i < prefix && constant.has(field)) continue;
      columns.push({ field, sql: col(i), dir: idx.dirs[i] as 1 | -1 });
    }
    // A unique index has one entry per key: ties cannot happen, its `_id` column is not needed;
    // nor when `_id` is one of the index's own fields (`{ issueId: 1, _id: 1 }`): it already ends the order.
    if (!idx.unique && !idx.fields.includes('_id')) columns.push({ field: '_id', sql: 'x.id', dir: idDir });
    const target = idx.unique && wanted.length === columns.length + 1 ? wanted.slice(0, -1) : wanted;
    if (target.length !== columns.length) return undefined;
    let relation = 0;
    const out: IndexOrder['columns'] = [];
    for (let i = 0; i < target.length; i++) {
      const [path, dir] = target[i] as [string, 1 | -1];
      const c = columns[i] as { field: string; sql: string; dir: 1 | -1 };
      if (c.field !== path) return undefined;
      const r = c.dir === dir ? 1 : -1;
      if (relation === 0) relation = r;
      else if (relation !== r) return undefined;
      out.push({ sql: c.sql, dir });
    }
    return out;
  };
  const whole = match(0, true);
  if (whole) return { columns: whole, merge: false };
  const merged = match(prefix, false);
  return merged ? { columns: merged, merge: true } : undefined;
}

function candidate(idx: PlannerIndex, conds: Map<string, FieldCondition>, req: PlanRequest): IndexCandidate | undefined {
  if (idx.partialFilterExpression !== undefined && !impliesPartial(req.filter, idx.partialFilterExpression)) return undefined;
  const points: Buffer[][] = [];
  const constant = new Set<string>();
  let combos = 1;
  let prefix = 0;
  while (prefix < idx.fields.length) {
    const field = idx.fields[prefix] as string;
    const cond = conds.get(field);
    if (!cond?.eq) break;
    const keys = dedupeKeys(cond.eq.map(encodeKey));
    if (combos * keys.length > MAX_POINTS) break;
    combos *= keys.length;
    points.push(keys);
    if (keys.length === 1) constant.add(field);
    prefix++;
  }
  let range: IndexCandidate['range'];
  const next = idx.fields[prefix];
  const r = next !== undefined && !idx.multikey ? conds.get(next)?.range : undefined;
  if (r) {
    const bracket = r.rank === 2 ? KEY_BRACKETS.number : r.rank === 3 ? KEY_BRACKETS.string : r.rank === 9 ? KEY_BRACKETS.date : undefined;
    if (bracket) {
      range = { bracket };
      if (r.lower) range.lower = { key: encodeKey(r.lower.value), inclusive: r.lower.inclusive };
      if (r.upper) range.upper = { key: encodeKey(r.upper.value), inclusive: r.upper.inclusive };
    }
  }
  let order = req.sort ? indexOrder(idx, prefix, constant, req.sort) : undefined;
  if (order?.merge && combos > MAX_MERGED_RUNS) order = undefined;
  if (prefix === 0 && !range && !order) return undefined;
  const covered =
    !idx.multikey &&
    range === undefined &&
    Object.entries(req.filter).every(([key, value]) => idx.fields.slice(0, prefix).includes(key) && isExactEquality(value));
  const walk = order !== undefined && (order.merge || idx.fields.slice(0, prefix).every((f) => constant.has(f)));
  return { idx, points, prefix, range, order, walk, covered };
}

function dedupeKeys(keys: Buffer[]): Buffer[] {
  const sorted = keys.sort(Buffer.compare);
  return sorted.filter((k, i) => i === 0 || !k.equals(sorted[i - 1] as Buffer));
}

/** `x.k0 = @a AND x.k1 IN (...) AND x.k2 > @lo ...` for an index candidate (`alias`: the index table's name in the statement). */
function indexWhere(c: IndexCandidate, p: Params, alias = 'x'): string[] {
  const where: string[] = [];
  c.points.forEach((keys, i) => {
    where.push(keys.length === 1 ? `${col(i, alias)} = ${p.add(keys[0])}` : `${col(i, alias)} IN (${keys.map((k) => p.add(k)).join(', ')})`);
  });
  return [...where, ...rangeWhere(c, p, alias)];
}

function cartesian(lists: Buffer[][]): Buffer[][] {
  let out: Buffer[][] = [[]];
  for (const list of lists) out = out.flatMap((prefix) => list.map((v) => [...prefix, v]));
  return out;
}

function rangeWhere(c: IndexCandidate, p: Params, alias = 'x'): string[] {
  const where: string[] = [];
  if (c.range) {
    const k = col(c.prefix, alias);
    const { lower, upper, bracket } = c.range;
    where.push(lower ? `${k} ${lower.inclusive ? '>=' : '>'} ${p.add(lower.key)}` : `${k} >= ${p.add(Buffer.from([bracket[0]]))}`);
    where.push(upper ? `${k} ${upper.inclusive ? '<=' : '<'} ${p.add(upper.key)}` : `${k} < ${p.add(Buffer.from([bracket[1]]))}`);
  }
  return where;
}

/** Trigrams of a literal, by code point (the FTS5 trigram tokenizer's unit). */
export function trigrams(literal: string): string[] {
  const cps = Array.from(literal);
  const out: string[] = [];
  for (let i = 0; i + 3 <= cps.length; i++) {
    const t = cps.slice(i, i + 3).join('');
    // Lone surrogates and NUL do not survive the trip into SQLite unchanged: leave them out
    // (fewer trigrams only widen the candidates; the exact test decides).
    if (t.includes('\0') || LONE_SURROGATE.test(t)) continue;
    if (!out.includes(t)) out.push(t);
  }
  return out;
}

/** FTS5 query: the trigrams as quoted terms joined by AND (a superset of the matches; see textCandidate). */
function ftsQuery(terms: readonly string[]): string {
  return terms.map((t) => `"${t.replace(/"/g, '""')}"`).join(' AND ');
}

interface TextCandidate {
  text: PlannerText;
  terms: string[];
  estimate: number;
}

function textCandidate(coll: PlannerCollection, filter: Filter): TextCandidate | undefined {
  if (coll.texts.length === 0) return undefined;
  let best: TextCandidate | undefined;
  for (const { field, literal } of literalConditions(filter)) {
    const text = coll.texts.find((t) => t.field === field);
    if (!text) continue;
    const grams = trigrams(literal);
    if (grams.length === 0) continue;
    const count = new Map(grams.map((t) => [t, coll.trigramDocs(text, t)]));
    const rarest = (of: string[]): string[] => [...of].sort((a, b) => (count.get(a) as number) - (count.get(b) as number));
    // The rarest trigram alone; or the two rarest of one whitespace-free piece of the literal,
    // which a document holds in one chunk's row (text-chunks.ts), so FTS5 finds them together.
    // Two narrow as well as all of them, for far fewer doclists to read.
    let terms = rarest(grams).slice(0, 1);
    for (const window of literalWindows(literal)) {
      const pair = rarest(trigrams(window)).slice(0, 2);
      if (pair.length > 0 && (count.get(pair[0] as string) as number) <= (count.get(terms[0] as string) as number) && pair.length >= terms.length) terms = pair;
    }
    const estimate = count.get(terms[0] as string) as number;
    if (!best || estimate < best.estimate) best = { text, terms, estimate };
  }
  return best;
}

/** The values a top-level equality (`v`, `{$eq: v}`, `{$in: [...]}`) accepts. */
function equalityValues(value: unknown): unknown[] | undefined {
  if (value instanceof RegExp || Array.isArray(value)) return undefined;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    const ops = Object.keys(value);
    if (ops.length !== 1) return undefined;
    const operand = (value as Record<string, unknown>)[ops[0] as string];
    if (ops[0] === '$eq') return [operand];
    if (ops[0] === '$in' && Array.isArray(operand)) return operand;
    return undefined;
  }
  return [value];
}

const sameKeys = (a: readonly Buffer[], b: readonly Buffer[]): boolean => a.length === b.length && a.every((k, i) => k.equals(b[i] as Buffer));

/**
 * Top-level conditions the index walk of `c` applies exactly, so the documents need no second
 * test of them: an equality (or `$in`) on a leading key whose values are the walk's points, and a
 * range on the next key within one type bracket. A range over numbers needs a lower bound (NaN
 * sorts below every number, and `$lt` never matches it). Nothing is decided by an index with
 * array values: its entries hold the elements of nested arrays too, which equality does not reach.
 */
function decidedFields(c: IndexCandidate, filter: Filter): Set<string> {
  const out = new Set<string>();
  if (c.idx.multikey) return out;
  for (let i = 0; i < c.prefix; i++) {
    const field = c.idx.fields[i] as string;
    const values = equalityValues(filter[field]);
    if (values === undefined || values.length === 0) continue;
    let keys: Buffer[];
    try {
      keys = dedupeKeys(values.map(encodeKey));
    } catch {
      continue;
    }
    if (sameKeys(keys, c.points[i] as Buffer[])) out.add(field);
  }
  const range = c.range;
  const field = c.idx.fields[c.prefix];
  const value = field === undefined ? undefined : filter[field];
  if (range && field !== undefined && value !== null && typeof value === 'object' && !(value instanceof Date) && !(value instanceof RegExp)) {
    const ops = Object.entries(value as Record<string, unknown>);
    const kinds = new Set(ops.map(([, v]) => (typeof v === 'string' ? 'string' : v instanceof Date && !Number.isNaN(v.getTime()) ? 'date' : typeof v === 'number' && !Number.isNaN(v) ? 'number' : 'other')));
    const lower = ops.find(([op]) => op === '$gt' || op === '$gte');
    const upper = ops.find(([op]) => op === '$lt' || op === '$lte');
    const same = (bound: { key: Buffer; inclusive: boolean } | undefined, op: [string, unknown] | undefined): boolean =>
      bound === undefined ? op === undefined : op !== undefined && bound.inclusive === op[0].endsWith('e') && bound.key.equals(encodeKey(op[1]));
    if (
      ops.length > 0 &&
      ops.every(([op]) => op === '$gt' || op === '$gte' || op === '$lt' || op === '$lte') &&
      kinds.size === 1 &&
      !kinds.has('other') &&
      !(kinds.has('number') && lower === undefined) &&
      same(range.lower, lower) &&
      same(range.upper, upper)
    ) {
      out.add(field);
    }
  }
  return out;
}

export function plan(coll: PlannerCollection, req: PlanRequest): Plan {
  const p = new Params();
  const { sargable, residual, unsure } = translateFilter(req.filter, p);
  const base = (): string[] => [...sargable, ...(req.excludeIds ? ['c.id NOT IN (SELECT value FROM json_each(@exclude))'] : [])];
  const finish = (kind: Plan['kind'], source: string, where: string[], extra: Partial<Plan> = {}): Plan => ({
    kind,
    ordered: req.sort === undefined,
    duplicates: false,
    source,
    where,
    orderBy: '',
    residual,
    unsure,
    params: p,
    covered: false,
    ...extra,
  });
  const docs = `${coll.table} AS c`;
  if (sargable.length > 0) return finish('IDHACK', docs, base());
  /**
   * Every document, or those in a string range on `_id` (the range read from the table's `_id`
   * index). Sorted by `_id` alone, SQLite walks that index in order (the column's BINARY order is
   * UTF-8 byte order, the store's order of strings): a page reads its own rows instead of sorting
   * every match, and a range (a cursor) starts the walk where it does. The range stays in the
   * residual too, which tests it again.
   */
  const collscan = (): Plan => {
    const range = idRange(req.filter._id, p);
    const only = req.sort?.length === 1 ? req.sort[0] : undefined;
    if (only?.path !== '_id') return finish('COLLSCAN', docs, [...range, ...base()]);
    return finish('COLLSCAN', docs, [...range, ...base()], { ordered: true, orderBy: `ORDER BY c.id ${only.dir === 1 ? 'ASC' : 'DESC'}` });
  };

  const conds = extractConditions(req.filter);
  const candidates: IndexCandidate[] = [];
  for (const idx of coll.indexes) {
    const c = candidate(idx, conds, req);
    if (c) candidates.push(c);
  }
  const text = req.countOnly && candidates.some((c) => c.covered) ? undefined : textCandidate(coll, req.filter);
  const inOrder = (c: IndexCandidate): boolean => req.sort === undefined || c.order !== undefined;

  const hinted = text === undefined && req.hint !== undefined ? fromHint(req.hint, candidates) : undefined;
  const choice = hinted !== undefined ? hinted.choice : choose(coll, req, candidates, text);
  // The path chosen among indexes (by counting, or from the hint), for queries of the same shape.
  const remembered = (made: Plan): Plan => {
    if (text !== undefined || candidates.length === 0) return made;
    if (hinted !== undefined) return { ...made, choice: req.hint as PlanChoice, hinted: true };
    return { ...made, choice: toHint(choice as Exclude<Choice, 'text'> | undefined) };
  };
  // Rows of the full-text candidates (and of the rows still pending for the text index): the
  // documents with the trigrams in one of their chunks' rows (text-chunks.ts).
  const textRows = (t: TextCandidate): string =>
    `SELECT rowid >> ${CHUNK_BITS} FROM ${t.text.table} WHERE ${t.text.table} MATCH ${p.add(ftsQuery(t.terms))} UNION ALL SELECT rid FROM ${t.text.pending}`;
  if (choice === 'text' && text) return { ...finish('FTS', docs, [`c.rid IN (${textRows(text)})`, ...base()]), index: text.text.name };
  if (choice === undefined || choice === 'text') return remembered(collscan());
  const chosen = 'filtered' in choice ? choice.filtered : choice;
  const filter = 'filtered' in choice ? choice.filter : undefined;
  // A filtered walk tests each entry's row id against the other index's range (or the text
  // candidates), gathered once by SQLite, before the document is read.
  const filterWhere: string[] = [];
  const filterDecides = new Set<string>();
  if (filter === 'text' && text) filterWhere.push(`x.rid IN (${textRows(text)})`);
  else if (filter !== undefined && filter !== 'text') {
    const where = indexWhere(filter, p, 'y');
    filterWhere.push(`x.rid IN (SELECT y.rid FROM ${filter.idx.table} AS y${where.length ? ` WHERE ${where.join(' AND ')}` : ''})`);
    for (const f of decidedFields(filter, req.filter)) filterDecides.add(f);
  }
  const filterName = filter === undefined ? undefined : filter === 'text' ? text?.text.name : filter.idx.name;
  const source = `${chosen.idx.table} AS x CROSS JOIN ${docs} ON c.rid = x.rid`;
  const order = req.sort ? chosen.order : undefined;
  const direction = (d: 1 | -1): string => (d === 1 ? 'ASC' : 'DESC');
  // The index decides the whole filter: the documents need no second test; otherwise they are
  // tested only for the conditions the walk does not apply itself.
  const skip = chosen.covered ? undefined : new Set([...decidedFields(chosen, req.filter), ...filterDecides]);
  const rest = skip && skip.size > 0 ? translateFilter(Object.fromEntries(Object.entries(req.filter).filter(([k]) => !skip.has(k))), p) : undefined;
  const decided: Partial<Plan> = chosen.covered ? { residual: '1', unsure: '0' } : rest ? { residual: rest.residual, unsure: rest.unsure } : {};
  if (order?.merge) {
    const range = rangeWhere(chosen, p);
    return remembered({
      ...finish('IXSCAN', source, [...filterWhere, ...base()], decided),
      index: chosen.idx.name,
      ...(filterName === undefined ? {} : { filter: filterName }),
      ordered: true,
      runs: cartesian(chosen.points).map((point) => [...point.map((k, i) => `${col(i)} = ${p.add(k)}`), ...range]),
      orderColumns: order.columns.map((c, i) => `${c.sql} AS o${i}`).join(', '),
      orderBy: `ORDER BY ${order.columns.map((c, i) => `o${i} ${direction(c.dir)}`).join(', ')}`,
    });
  }
  const where = indexWhere(chosen, p);
  const plan: Plan = {
    ...finish('IXSCAN', source, [...where, ...filterWhere, ...base()], decided),
    index: chosen.idx.name,
    ...(filterName === undefined ? {} : { filter: filterName }),
    ordered: inOrder(chosen),
    orderBy: order ? `ORDER BY ${order.columns.map((c) => `${c.sql} ${direction(c.dir)}`).join(', ')}` : '',
    duplicates: chosen.idx.multikey,
    covered: chosen.covered,
  };
  if (chosen.covered && !req.excludeIds && filter === undefined) plan.indexOnlyFrom = `${chosen.idx.table} AS x${where.length ? ` WHERE ${where.join(' AND ')}` : ''}`;
  return remembered(plan);
}

/** The string bounds of an `_id` condition, as conditions on the `_id` column (none for anything else). */
function idRange(cond: unknown, p: Params): string[] {
  if (cond === null || typeof cond !== 'object' || cond instanceof RegExp || Array.isArray(cond)) return [];
  const ops = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' } as const;
  const out: string[] = [];
  for (const [op, operand] of Object.entries(cond as Record<string, unknown>)) {
    if (op in ops && typeof operand === 'string') out.push(`c.id ${ops[op as keyof typeof ops]} ${p.add(operand)}`);
  }
  return out;
}

function toHint(choice: IndexCandidate | FilteredWalk | undefined): PlanChoice {
  if (choice === undefined) return { path: 'collscan' };
  if ('filtered' in choice) return { path: 'filtered', walk: choice.filtered.idx.name, filter: choice.filter === 'text' ? '' : choice.filter.idx.name };
  return { path: 'index', index: choice.idx.name };
}

/** The hinted path among this query's candidates (undefined: it has none such: choose again). */
function fromHint(hint: PlanChoice, candidates: readonly IndexCandidate[]): { choice: IndexCandidate | FilteredWalk | undefined } | undefined {
  const named = (name: string): IndexCandidate | undefined => candidates.find((c) => c.idx.name === name);
  if (hint.path === 'collscan') return { choice: undefined };
  if (hint.path === 'index') {
    const c = named(hint.index);
    return c && { choice: c };
  }
  const walk = named(hint.walk);
  const filter = named(hint.filter);
  return walk && filter && { choice: { filtered: walk, filter } };
}

function choose(
  coll: PlannerCollection,
  req: PlanRequest,
  candidates: IndexCandidate[],
  text: TextCandidate | undefined,
): Choice | undefined {
  const longest = (list: IndexCandidate[]): IndexCandidate | undefined =>
    list.reduce<IndexCandidate | undefined>((best, c) => {
      if (!best) return c;
      const rank = (x: IndexCandidate): number[] => [x.covered ? 1 : 0, x.walk ? 1 : 0, x.prefix, x.range ? 1 : 0];
      const a = rank(c);
      const b = rank(best);
      for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return (a[i] as number) > (b[i] as number) ? c : best;
      return best;
    }, undefined);
  const inOrder = (c: IndexCandidate): boolean => req.sort === undefined || c.order !== undefined;

  // An index that decides the whole filter in the requested order: nothing can beat it.
  const perfect = longest(candidates.filter((c) => c.covered && (inOrder(c) && (req.sort === undefined || c.walk))));
  if (perfect && !text) return perfect;
  if (candidates.length === 0 && !text) return undefined;

  const n = Math.max(1, coll.docCount());
  // Entries counted per range: exact below the cap it was counted with, else at least that many.
  const counts = new Map<string, { n: number; cap: number }>();
  const countOf = (c: IndexCandidate, cap: number): number => {
    const key = `${c.idx.table}|${c.points.map((k) => k.map((b) => b.toString('hex')).join(',')).join('|')}|${c.range ? JSON.stringify(c.range) : ''}`;
    const known = counts.get(key);
    if (known !== undefined && (known.n < known.cap || cap <= known.cap)) return Math.min(known.n, cap);
    const q = new Params();
    const where = indexWhere(c, q);
    const sql = `SELECT count(*) AS n FROM (SELECT 1 FROM ${c.idx.table} AS x${where.length ? ` WHERE ${where.join(' AND ')}` : ''} LIMIT ${q.add(cap)})`;
    const got = coll.countRows(sql, q.values);
    counts.set(key, { n: got, cap });
    return got;
  };

  if (!Number.isFinite(req.want) || req.countOnly) return smallest(candidates, countOf, text);
  const walks = candidates.filter(inOrder);
  const preferred = perfect ?? longest(walks.filter((c) => c.walk || req.sort === undefined)) ?? longest(walks);
  if (!preferred) return smallest(candidates, countOf, text);
  const { walk: bestWalk, entries } = perfect ? { walk: perfect, entries: n } : narrowestWalk(preferred, walks.filter((c) => c.walk || req.sort === undefined), countOf, n);
  // A walk in order stops after `want` matches: about want × entries / matches entries (its range
  // holds `entries`). Reading all matches of a narrower range (or the full-text candidates) and
  // sorting them costs about their count each (times `cost`): that wins while
  // count × cost < want × entries / count.
  const budget = (cost: number): number => Math.ceil(Math.sqrt((req.want * entries) / cost));
  // Past this count a candidate can neither be sorted here nor filter the walk more cheaply.
  const cap = budget(INDEX_FILTER_COST);
  const walked = new Set(constrained(bestWalk));
  const options: { c: IndexCandidate | 'text'; count: number }[] = text ? [{ c: 'text', count: text.estimate }] : [];
  for (const c of candidates) {
    if (c === bestWalk || (inOrder(c) && c.walk)) continue;
    // Constraining only fields the walk constrains too (the same conditions), it holds at least
    // the walk's range: never narrower, and counting it would cost up to `cap` entries for nothing.
    if (constrained(c).every((f) => walked.has(f))) continue;
    const count = countOf(c, cap + 1);
    if (count <= cap) options.push({ c, count });
  }
  // Costs in documents read. The walk reads one per entry until `want` matches, its range holding
  // at most as many matches as the narrowest candidate.
  const matches = Math.max(1, Math.min(entries, ...options.map((o) => o.count)));
  const walkCost = (req.want * entries) / matches;
  const filterable = bestWalk.walk || req.sort === undefined;
  let best: Choice = bestWalk;
  let bestCost = walkCost;
  for (const { c, count } of options) {
    const sorted = count * (c === 'text' ? TEXT_CANDIDATE_COST : 1);
    if (sorted < bestCost) {
      best = c;
      bestCost = sorted;
    }
    // The same walk testing each entry against the candidates' row ids first: the documents of
    // entries that are no candidates are never read.
    const filtered = count * (c === 'text' ? TEXT_FILTER_COST : INDEX_FILTER_COST) + walkCost * ENTRY_COST + req.want;
    if (filterable && filtered < bestCost) {
      best = { filtered: bestWalk, filter: c };
      bestCost = filtered;
    }
  }
  return best;
}

/** A walk in order whose entries must also be candidates of another index or of the text index. */
interface FilteredWalk {
  filtered: IndexCandidate;
  filter: IndexCandidate | 'text';
}

type Choice = IndexCandidate | 'text' | FilteredWalk;

/**
 * Of several indexes that all give the requested order, the one whose range holds the fewest
 * entries: with the same matches to find, the walk over the narrower range reads fewer entries
 * before a page is full. An index constraining only fields another one constrains too is never
 * narrower and is not counted. The ranges are counted side by side with a growing cap, so
 * choosing costs about twice the narrowest range, not the widest. Returns the walk and about
 * how many entries its range holds (`n` when nothing was counted).
 */
function narrowestWalk(
  preferred: IndexCandidate,
  walks: IndexCandidate[],
  countOf: (c: IndexCandidate, cap: number) => number,
  n: number,
): { walk: IndexCandidate; entries: number } {
  const distinct = walks.filter((c) => {
    const mine = constrained(c);
    return !walks.some((o) => o !== c && constrained(o).length > mine.length && mine.every((f) => constrained(o).includes(f)));
  });
  if (!distinct.includes(preferred) || distinct.length < 2) return { walk: preferred, entries: n };
  // The preferred walk first: on a tie it stays.
  const order = [preferred, ...distinct.filter((c) => c !== preferred)];
  for (let cap = 256; ; cap *= 4) {
    let best: { walk: IndexCandidate; entries: number } | undefined;
    for (const c of order) {
      const count = countOf(c, cap + 1);
      if (count <= cap && (!best || count < best.entries)) best = { walk: c, entries: count };
    }
    if (best) return { walk: best.walk, entries: Math.max(1, best.entries) };
    if (cap > n) return { walk: preferred, entries: n };
  }
}

/** The fields whose conditions an index candidate applies (its equality prefix and range). */
function constrained(c: IndexCandidate): string[] {
  const fields = c.idx.fields.slice(0, c.prefix);
  if (c.range) fields.push(c.idx.fields[c.prefix] as string);
  return fields;
}

/** Every match is read: the plan with the fewest candidates (counted up to the best so far). */
function smallest(
  candidates: IndexCandidate[],
  countOf: (c: IndexCandidate, cap: number) => number,
  text: TextCandidate | undefined,
): IndexCandidate | 'text' | undefined {
  let best: IndexCandidate | 'text' | undefined = text ? 'text' : undefined;
  let bestCount = text ? text.estimate * 2 : Infinity;
  const ordered = [...candidates].sort((a, b) => Number(b.covered) - Number(a.covered) || b.prefix - a.prefix);
  for (const c of ordered) {
    const cap = Number.isFinite(bestCount) ? bestCount : 1_000_000_000;
    const count = countOf(c, cap + 1);
    if (count < bestCount || (count === bestCount && best !== undefined && best !== 'text' && c.covered && !best.covered)) {
      best = c;
      bestCount = count;
    }
  }
  return best;
}
