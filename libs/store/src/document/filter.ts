/**
 * Filter documents: validation (a clear error for anything the engine does not evaluate the way
 * MongoDB does), evaluation through mingo's `Query`, and the facts the planner reads from a filter
 * (equality, `$in` and range conditions per field).
 */
import { Context } from 'mingo/core';
import * as queryOperators from 'mingo/operators/query';
import { Query } from 'mingo/query';
import type { Filter } from '../port.js';
import { assertPath } from './paths.js';
import { isPlainObject, typeRank, valuesEqual } from './values.js';

const LOGICAL = new Set(['$and', '$or', '$nor']);
const FIELD_OPERATORS = new Set([
  '$eq',
  '$ne',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$in',
  '$nin',
  '$exists',
  '$regex',
  '$options',
  '$elemMatch',
  '$not',
  '$size',
  '$all',
  '$type',
  '$mod',
]);

export interface Matcher {
  (doc: Record<string, unknown>): boolean;
}

const MATCH_ALL: Matcher = () => true;

/**
 * mingo's query operators only: `mingo` itself (its index) builds one context with every operator
 * it has (expressions, pipeline stages, accumulators, window functions) when it is imported, about
 * 1.5 MB of heap in each thread that loads the store, none of it used by a filter.
 */
const QUERY_CONTEXT = Context.init().addQueryOps(queryOperators);

/** Validates and compiles a filter. */
export function compileFilter(filter: Filter, what = 'filter'): Matcher {
  assertFilter(filter, what);
  if (Object.keys(filter).length === 0) return MATCH_ALL;
  // Compiled on first use: building a mingo Query costs tens of microseconds, and plans that an
  // index decides exactly (e.g. an `_id` lookup) never evaluate the filter.
  let query: Query | undefined;
  const full: Matcher = (doc) => (query ??= new Query(filter, { scriptEnabled: false, context: QUERY_CONTEXT })).test(doc);
  const direct = directConditions(filter);
  if (direct !== undefined) {
    return (doc) => {
      let answer: boolean | undefined = true;
      for (const [field, test] of direct) {
        const one = test(doc[field]);
        if (one === false) return false;
        if (one === undefined) answer = undefined;
      }
      return answer ?? full(doc);
    };
  }
  const literals = literalConditions(filter);
  if (literals.length === 0) return full;
  // Text search over many documents mostly rejects: a substring test turns most documents away
  // without building mingo's per-document evaluation (several times faster); survivors still
  // meet the whole filter through mingo, so the answer is unchanged.
  return (doc) => {
    for (const { field, literal } of literals) {
      const value = doc[field];
      if (typeof value === 'string' && !value.includes(literal)) return false;
    }
    return full(doc);
  };
}

/** A value a direct condition compares with: a string, a finite number, a boolean or a valid date. */
type Scalar = string | number | boolean | Date;
/** One field's condition, tested directly: true, false, or undefined when mingo must decide. */
type DirectTest = (value: unknown) => boolean | undefined;

const isDate = (v: unknown): v is Date => v instanceof Date && !Number.isNaN(v.getTime());

const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)) || isDate(v);

/** A stored value the direct tests understand: missing, null, a string, a number but NaN, a boolean, a valid date. */
const isPlainValue = (v: unknown): boolean =>
  v === undefined || v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && !Number.isNaN(v)) || isDate(v);

/** Equality of a plain stored value with a scalar (dates by their time; no other type equals another). */
const same = (x: unknown, want: Scalar): boolean => (want instanceof Date ? x instanceof Date && x.getTime() === want.getTime() : x === want);

/**
 * `test` on the value, or on each element of an array value (MongoDB matches an array when an
 * element does); undefined for anything else (sub-documents, dates, nested arrays, NaN).
 */
function anyValue(value: unknown, test: (v: unknown) => boolean): boolean | undefined {
  if (Array.isArray(value)) {
    let hit = false;
    for (const el of value) {
      if (!isPlainValue(el)) return undefined;
      if (!hit && test(el)) hit = true;
    }
    return hit;
  }
  return isPlainValue(value) ? test(value) : undefined;
}

const not = (t: DirectTest): DirectTest => (v) => {
  const r = t(v);
  return r === undefined ? undefined : !r;
};

function comparison(op: string, want: Scalar): DirectTest | undefined {
  if (typeof want === 'boolean') return undefined;
  // Only values of the operand's type compare (dates as their time).
  const date = want instanceof Date;
  const type = typeof want;
  const bound = date ? want.getTime() : (want as string | number);
  const of = date ? (v: unknown) => (v instanceof Date ? v.getTime() : undefined) : (v: unknown) => (typeof v === type ? (v as string | number) : undefined);
  const holds =
    op === '$gt' ? (v: unknown) => { const x = of(v); return x !== undefined && x > bound; }
    : op === '$gte' ? (v: unknown) => { const x = of(v); return x !== undefined && x >= bound; }
    : op === '$lt' ? (v: unknown) => { const x = of(v); return x !== undefined && x < bound; }
    : (v: unknown) => { const x = of(v); return x !== undefined && x <= bound; };
  return (v) => anyValue(v, holds);
}

/** One operator of a field's condition, or undefined when it is not one tested directly. */
function directOperator(op: string, arg: unknown): DirectTest | undefined {
  switch (op) {
    case '$eq':
      return isScalar(arg) ? (v) => anyValue(v, (x) => same(x, arg)) : undefined;
    case '$ne':
      return isScalar(arg) ? not((v) => anyValue(v, (x) => same(x, arg))) : undefined;
    case '$in':
    case '$nin': {
      if (!Array.isArray(arg) || !arg.every(isScalar)) return undefined;
      const set = new Set<unknown>(arg.filter((a) => !(a instanceof Date)));
      const times = new Set<number>(arg.flatMap((a) => (a instanceof Date ? [a.getTime()] : [])));
      const t: DirectTest = (v) => anyValue(v, (x) => (x instanceof Date ? times.has(x.getTime()) : set.has(x)));
      return op === '$in' ? t : not(t);
    }
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      return isScalar(arg) ? comparison(op, arg) : undefined;
    case '$exists':
      return typeof arg === 'boolean' ? (v) => (v !== undefined) === arg : undefined;
    default:
      return undefined;
  }
}

/**
 * The conditions of a filter made only of top-level fields, each equal to a string, a finite number
 * a boolean or a date, or held to `$eq`, `$ne`, `$in`, `$nin`, `$gt`, `$gte`, `$lt`, `$lte` of such values
 * or `$exists` (`{_id, version}`: a write conditional on the version it read; a claim's
 * `{_id, state, expiresAt: {$gt}}`), else undefined. These are tested directly: building mingo's
 * query costs more than the test. A stored value they do not cover (a sub-document, NaN, an invalid date)
 * is left to mingo.
 */
function directConditions(filter: Filter): [string, DirectTest][] | undefined {
  const out: [string, DirectTest][] = [];
  for (const field in filter) {
    if (field.startsWith('$') || field.includes('.')) return undefined;
    const cond = filter[field];
    if (isScalar(cond)) {
      out.push([field, (v) => anyValue(v, (x) => same(x, cond))]);
      continue;
    }
    if (!isPlainObject(cond)) return undefined;
    const ops = Object.keys(cond);
    if (ops.length === 0 || !ops.every((op) => op.startsWith('$'))) return undefined;
    const tests: DirectTest[] = [];
    for (const op of ops) {
      const t = directOperator(op, cond[op]);
      if (t === undefined) return undefined;
      tests.push(t);
    }
    out.push([
      field,
      tests.length === 1
        ? (tests[0] as DirectTest)
        : (v) => {
            let answer: boolean | undefined = true;
            for (const t of tests) {
              const r = t(v);
              if (r === false) return false;
              if (r === undefined) answer = undefined;
            }
            return answer;
          },
    ]);
  }
  return out;
}

/** Characters that make a regular expression more than literal text when unescaped. */
const REGEX_SYNTAX = new Set(['.', '*', '+', '?', '^', '$', '{', '}', '(', ')', '|', '[', ']', '\\']);
/** Characters a backslash makes literal (what `escapeRegExp` escapes, and a few more). */
const ESCAPED_LITERAL = new Set([...REGEX_SYNTAX, '/', '-']);

/**
 * The text a regular expression source matches literally, or undefined when it uses any regex
 * syntax (`.`, classes, anchors, escapes such as `\d`, ...). `escapeRegExp(text)` gives back `text`.
 */
export function literalOfRegex(source: string): string | undefined {
  let out = '';
  for (let i = 0; i < source.length; i++) {
    const c = source[i] as string;
    if (c === '\\') {
      const next = source[i + 1];
      if (next === undefined || !ESCAPED_LITERAL.has(next)) return undefined;
      out += next;
      i++;
    } else if (REGEX_SYNTAX.has(c)) {
      return undefined;
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * Conditions every match must meet that are plain substring tests: `{ field: { $regex: <literal> } }`
 * on a top-level field (also inside a top-level `$and`), without the `i` flag (`m` and `s` do not
 * change a literal's meaning). A document whose string value lacks the text cannot match; any
 * other value (an array, a missing field) is left to the full evaluation.
 */
export function literalConditions(filter: Filter): { field: string; literal: string }[] {
  const out: { field: string; literal: string }[] = [];
  const visit = (query: Record<string, unknown>): void => {
    for (const [key, value] of Object.entries(query)) {
      if (key === '$and') {
        for (const sub of value as Record<string, unknown>[]) visit(sub);
        continue;
      }
      if (key.startsWith('$') || key.includes('.') || !isOperatorObject(value)) continue;
      const regex = value.$regex;
      const options = value.$options ?? '';
      if (typeof regex !== 'string' || typeof options !== 'string' || options.includes('i')) continue;
      const literal = literalOfRegex(regex);
      if (literal !== undefined && literal !== '') out.push({ field: key, literal });
    }
  };
  visit(filter);
  return out;
}

export function assertFilter(filter: unknown, what = 'filter'): asserts filter is Filter {
  if (!isPlainObject(filter)) throw new TypeError(`${what} must be a plain object`);
  validateQuery(filter, what);
}

function validateQuery(query: Record<string, unknown>, where: string): void {
  for (const [key, value] of Object.entries(query)) {
    if (key.startsWith('$')) {
      if (!LOGICAL.has(key)) throw new TypeError(`${where}: unsupported top-level query operator ${key} (supported: $and, $or, $nor)`);
      if (!Array.isArray(value) || value.length === 0) throw new TypeError(`${where}: ${key} needs a non-empty array of filters`);
      value.forEach((sub, i) => {
        if (!isPlainObject(sub)) throw new TypeError(`${where}: ${key}[${i}] must be a plain object`);
        validateQuery(sub, `${where}.${key}[${i}]`);
      });
      continue;
    }
    assertPath(key, where);
    validateCondition(value, `${where}.${key}`);
  }
}

function isOperatorObject(value: unknown): value is Record<string, unknown> {
  if (!isPlainObject(value)) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && keys.some((k) => k.startsWith('$'));
}

function validateCondition(value: unknown, where: string): void {
  if (isOperatorObject(value)) {
    for (const [op, operand] of Object.entries(value)) {
      if (!op.startsWith('$')) throw new TypeError(`${where}: cannot mix operators and field '${op}' in one condition`);
      if (!FIELD_OPERATORS.has(op)) throw new TypeError(`${where}: unsupported query operator ${op}`);
      validateOperand(op, operand, value, `${where}.${op}`);
    }
    return;
  }
  validateLiteral(value, where);
}

function validateLiteral(value: unknown, where: string): void {
  if (value === undefined) {
    throw new TypeError(`${where}: undefined in a filter (use null to match a missing field, or leave the condition out)`);
  }
  if (value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return;
  if (value instanceof Date || value instanceof RegExp) return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => validateLiteral(v, `${where}[${i}]`));
    return;
  }
  if (isPlainObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (k.startsWith('$')) throw new TypeError(`${where}: operator ${k} is not valid inside a literal sub-document`);
      validateLiteral(v, `${where}.${k}`);
    }
    return;
  }
  throw new TypeError(`${where}: unsupported value in a filter`);
}

function validateOperand(op: string, operand: unknown, all: Record<string, unknown>, where: string): void {
  switch (op) {
    case '$in':
    case '$nin':
    case '$all':
      if (!Array.isArray(operand)) throw new TypeError(`${where} needs an array`);
      operand.forEach((v, i) => validateLiteral(v, `${where}[${i}]`));
      return;
    case '$exists':
      validateLiteral(operand, where);
      return;
    case '$regex':
      if (typeof operand !== 'string' && !(operand instanceof RegExp)) throw new TypeError(`${where} needs a string or RegExp`);
      if (typeof operand === 'string') {
        try {
          new RegExp(operand);
        } catch (err) {
          throw new TypeError(`${where}: invalid regular expression: ${(err as Error).message}`, { cause: err });
        }
      }
      return;
    case '$options':
      if (!('$regex' in all)) throw new TypeError(`${where} is only valid together with $regex`);
      // MongoDB's `x` (extended) flag has no JavaScript equivalent, so the engine cannot honour it.
      if (typeof operand !== 'string' || !/^[ims]*$/.test(operand)) throw new TypeError(`${where} must be a string of the flags i, m, s`);
      return;
    case '$elemMatch':
      if (!isPlainObject(operand)) throw new TypeError(`${where} needs a plain object`);
      if (isOperatorObject(operand) && Object.keys(operand).every((k) => k.startsWith('$') && !LOGICAL.has(k))) {
        validateCondition(operand, where);
      } else {
        validateQuery(operand, where);
      }
      return;
    case '$not':
      if (operand instanceof RegExp) return;
      if (!isOperatorObject(operand)) throw new TypeError(`${where} needs an operator object or a RegExp`);
      validateCondition(operand, where);
      return;
    case '$size':
      if (typeof operand !== 'number' || !Number.isInteger(operand) || operand < 0) throw new TypeError(`${where} needs a non-negative integer`);
      return;
    case '$type':
      if (typeof operand !== 'string' && typeof operand !== 'number' && !Array.isArray(operand)) throw new TypeError(`${where} needs a type name or number`);
      return;
    case '$mod':
      if (!Array.isArray(operand) || operand.length !== 2 || operand.some((n) => typeof n !== 'number')) {
        throw new TypeError(`${where} needs [divisor, remainder]`);
      }
      return;
    default:
      validateLiteral(operand, where);
  }
}

// ---- planner facts --------------------------------------------------------------------------

export interface RangeBound {
  value: unknown;
  inclusive: boolean;
}

export interface FieldCondition {
  /** The field must equal one of these scalar values (equality or `$in`). */
  eq?: unknown[];
  /** Range bounds, all of one BSON type bracket (`rank`). */
  range?: { rank: number; lower?: RangeBound; upper?: RangeBound };
}

/** Values an index can look up exactly: the index stores them as they are. */
function isIndexableScalar(value: unknown, dotted: boolean): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return !Number.isNaN(value);
    default:
      break;
  }
  if (value instanceof Date) return true;
  // `{a: null}` also matches documents whose path runs through array elements lacking the field;
  // only a top-level field's null is exactly what the index stores.
  return value === null && !dotted;
}

function isRangeScalar(value: unknown): boolean {
  return (typeof value === 'number' && !Number.isNaN(value)) || typeof value === 'string' || value instanceof Date;
}

/**
 * Conditions of a (validated) filter that must all hold: top-level fields and members of a
 * top-level `$and`. When a field is constrained twice, one of its constraints is kept: any one of
 * them still yields a superset of the matches, and the full filter is always applied afterwards.
 */
export function extractConditions(filter: Filter): Map<string, FieldCondition> {
  const out = new Map<string, FieldCondition>();
  const visit = (query: Record<string, unknown>): void => {
    for (const [key, value] of Object.entries(query)) {
      if (key === '$and') {
        for (const sub of value as Record<string, unknown>[]) visit(sub);
        continue;
      }
      if (key.startsWith('$')) continue;
      if (out.has(key)) continue;
      const cond = fieldCondition(value, key.includes('.'));
      if (cond) out.set(key, cond);
    }
  };
  visit(filter);
  return out;
}

function fieldCondition(value: unknown, dotted: boolean): FieldCondition | undefined {
  if (!isOperatorObject(value)) {
    return isIndexableScalar(value, dotted) ? { eq: [value] } : undefined;
  }
  const cond: FieldCondition = {};
  if ('$eq' in value) {
    if (isIndexableScalar(value.$eq, dotted)) cond.eq = [value.$eq];
  } else if ('$in' in value) {
    const list = value.$in as unknown[];
    if (list.every((v) => isIndexableScalar(v, dotted))) cond.eq = list;
  }
  const bounds: { op: string; value: unknown }[] = [];
  for (const op of ['$gt', '$gte', '$lt', '$lte']) if (op in value) bounds.push({ op, value: value[op] });
  if (bounds.length > 0 && bounds.every((b) => isRangeScalar(b.value))) {
    const rank = typeRank(bounds[0]?.value);
    if (bounds.every((b) => typeRank(b.value) === rank)) {
      const range: { rank: number; lower?: RangeBound; upper?: RangeBound } = { rank };
      for (const b of bounds) {
        if (b.op === '$gt' || b.op === '$gte') range.lower = { value: b.value, inclusive: b.op === '$gte' };
        else range.upper = { value: b.value, inclusive: b.op === '$lte' };
      }
      cond.range = range;
    }
  }
  return cond.eq || cond.range ? cond : undefined;
}

/**
 * Whether every document matching `filter` also matches `partial` (so a partial index holds all
 * candidates). Decided conservatively: each top-level condition of `partial` must appear verbatim
 * in the filter (or, for a scalar equality, as the same single equality).
 */
export function impliesPartial(filter: Filter, partial: Filter): boolean {
  const conjuncts: Record<string, unknown>[] = [];
  const gather = (q: Record<string, unknown>): void => {
    conjuncts.push(q);
    const and = q.$and;
    if (Array.isArray(and)) for (const sub of and) if (isPlainObject(sub)) gather(sub);
  };
  gather(filter);
  const conditions = extractConditions(filter);
  for (const [key, cond] of Object.entries(partial)) {
    if (key === '$and') {
      if (!(cond as Filter[]).every((sub) => impliesPartial(filter, sub))) return false;
      continue;
    }
    const verbatim = conjuncts.some((q) => key in q && deepEqualQuery(q[key], cond));
    if (verbatim) continue;
    const eq = conditions.get(key)?.eq;
    const wanted = isOperatorObject(cond) ? (Object.keys(cond).length === 1 && '$eq' in cond ? cond.$eq : undefined) : cond;
    const scalar = typeof wanted === 'string' || typeof wanted === 'number' || typeof wanted === 'boolean' || wanted instanceof Date;
    if (scalar && eq?.length === 1 && valuesEqual(eq[0], wanted)) continue;
    return false;
  }
  return true;
}

function deepEqualQuery(a: unknown, b: unknown): boolean {
  if (a instanceof RegExp || b instanceof RegExp) return a instanceof RegExp && b instanceof RegExp && String(a) === String(b);
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqualQuery(v, b[i]));
  }
  if (isPlainObject(a) || isPlainObject(b)) {
    if (!isPlainObject(a) || !isPlainObject(b)) return false;
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k, i) => k === kb[i] && deepEqualQuery(a[k], b[k]));
  }
  return valuesEqual(a, b);
}
