/**
 * A MongoDB filter as an SQL expression over the JSON document, in SQL's three-valued logic:
 * 1 where the document matches for sure, 0 where it does not, NULL where SQL cannot tell (an
 * operator without an SQL form, a path through an array, a value SQL cannot compare exactly).
 * SQL's AND, OR and NOT combine unknowns exactly as needed (`0 AND NULL` is 0, `1 OR NULL` is 1),
 * so the database drops every document that cannot match, and only the unknown ones are handed
 * to mingo for the full evaluation. Every sure answer follows MongoDB's rules: equality and
 * ranges within one type bracket, a condition on an array field met by any element, `null`
 * matching missing fields, strings compared by their UTF-8 bytes.
 */
import type { Filter } from '../port.js';
import { literalOfRegex } from '../document/filter.js';
import { isPlainObject } from '../document/values.js';

/** Named parameters of one statement (`@p0`, `@p1`, ...). */
export class Params {
  readonly values: Record<string, unknown> = {};
  private n = 0;

  add(value: unknown): string {
    const name = `p${this.n++}`;
    this.values[name] = value;
    return `@${name}`;
  }
}

export interface FilterSql {
  /**
   * Conditions on `_id` at the top level, in plain (two-valued) SQL the database can answer from
   * its `_id` index; they are not repeated in `residual`.
   */
  sargable: string[];
  /** Everything else, three-valued; `1` when nothing is left. */
  residual: string;
  /**
   * Where `residual` may be NULL (`0`: never): it is 1 on every document where this is 0 and the
   * residual is not 0. Cheaper than the residual (type lookups only), so a statement that already
   * dropped the documents whose residual is 0 tells the sure matches from the undecided ones
   * without evaluating the residual a second time.
   */
  unsure: string;
}

const UNKNOWN = 'NULL';

/** How one value of the field (the field itself, or one element of its array) is read. */
interface Operand {
  /** JSON type name: null, true, false, integer, real, text, object, array (NULL: missing). */
  t: string;
  /** The SQL value (numbers, text; objects as JSON text). */
  v: string;
  /** Milliseconds of a date (`{"$date": ms}`), NULL for anything else. */
  d: string;
}

/** A test of one value; `objectUnknown`: NULL on an object (a number test meeting a tagged NaN). */
type ElementTest = ((o: Operand) => string) & { objectUnknown?: boolean };

function and(parts: string[]): string {
  if (parts.length === 0) return '1';
  if (parts.length === 1) return parts[0] as string;
  return `(${parts.join(' AND ')})`;
}

function or(parts: string[]): string {
  if (parts.length === 0) return '0';
  if (parts.length === 1) return parts[0] as string;
  return `(${parts.join(' OR ')})`;
}

function not(expr: string): string {
  return `(NOT ${expr})`;
}

function sqlString(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/** A JSON path as an SQL string literal (`'$."a"."b"'`), plus an optional last label. */
export function jsonPathSql(segs: readonly string[], last?: string): string {
  return sqlString(`$${[...segs, ...(last === undefined ? [] : [last])].map((s) => `."${s}"`).join('')}`);
}

/** Whether SQLite can address the path exactly (no numeric segments, no quotes or backslashes). */
export function addressable(segs: readonly string[]): boolean {
  return segs.every((s) => !/^\d+$/.test(s) && !/["\\]/.test(s));
}

function isOperatorObject(value: unknown): value is Record<string, unknown> {
  if (!isPlainObject(value)) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && keys.some((k) => k.startsWith('$'));
}

function compareBooleans(a: boolean, op: '=' | '>' | '>=' | '<' | '<=', b: boolean): boolean {
  const x = Number(a);
  const y = Number(b);
  return op === '=' ? x === y : op === '>' ? x > y : op === '>=' ? x >= y : op === '<' ? x < y : x <= y;
}

const isNumberType = (o: Operand): string => `coalesce(${o.t} IN ('integer','real'), 0)`;

/**
 * A lone surrogate (a string that is not well-formed UTF-16). SQLite returns one stored in a
 * document as bytes that are not UTF-8, while the driver binds one in a parameter as U+FFFD (or,
 * in older drivers, as those bytes): a comparison of the two in SQL depends on the driver, so
 * such strings have no SQL form and are tested on the decoded documents.
 */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** `value` compared with `op` on one operand; undefined when SQL cannot decide it exactly. */
function compareTest(op: '=' | '>' | '>=' | '<' | '<=', value: unknown, p: Params): ElementTest | undefined {
  if (typeof value === 'string') {
    if (LONE_SURROGATE.test(value)) return undefined;
    const param = p.add(value);
    return (o) => `(${o.t} IS 'text' AND ${o.v} ${op} ${param})`;
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return undefined;
    const param = p.add(value);
    // A stored NaN or infinity is a tagged object: SQL leaves it to mingo.
    const test: ElementTest = (o) => `(CASE WHEN ${o.t} IS 'object' THEN ${UNKNOWN} ELSE (${isNumberType(o)} AND ${o.v} ${op} ${param}) END)`;
    test.objectUnknown = true;
    return test;
  }
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) return undefined;
    const param = p.add(ms);
    return (o) => `(${o.t} IS 'object' AND coalesce(${o.d} ${op} ${param}, 0))`;
  }
  if (typeof value === 'boolean') {
    // Within the boolean bracket false < true: which booleans pass `op value`.
    const pass = { false: compareBooleans(false, op, value), true: compareBooleans(true, op, value) };
    if (pass.false && pass.true) return (o) => `coalesce(${o.t} IN ('true','false'), 0)`;
    if (pass.false || pass.true) return (o) => `(${o.t} IS '${pass.true ? 'true' : 'false'}')`;
    return () => '0';
  }
  if (value === null) {
    if (op === '=') return (o) => `(${o.t} IS NULL OR ${o.t} IS 'null')`;
    // Ranges against null: mingo matches nothing where MongoDB matches null and missing; left to mingo.
    return undefined;
  }
  return undefined;
}

function regexTest(source: unknown, options: unknown, p: Params): ElementTest | undefined {
  let pattern: string;
  let flags: string;
  if (source instanceof RegExp) {
    pattern = source.source;
    flags = source.flags;
    if (typeof options === 'string') flags += options;
  } else if (typeof source === 'string') {
    pattern = source;
    flags = typeof options === 'string' ? options : '';
  } else {
    return undefined;
  }
  // A literal's meaning does not depend on `m`, `s` or `g`; `i` would need Unicode case folding.
  if (/[^msg]/.test(flags)) return undefined;
  const literal = literalOfRegex(pattern);
  if (literal === undefined || literal.includes('\0') || LONE_SURROGATE.test(literal)) return undefined;
  if (literal === '') return (o) => `(${o.t} IS 'text')`;
  const param = p.add(literal);
  return (o) => `(${o.t} IS 'text' AND instr(${o.v}, ${param}) > 0)`;
}

/** A test of one value from a condition's value (equality or a regular expression). */
function matchTest(value: unknown, p: Params): ElementTest | undefined {
  if (value instanceof RegExp) return regexTest(value, undefined, p);
  return compareTest('=', value, p);
}

class FieldSql {
  private readonly segs: string[];
  private readonly path: string;

  constructor(
    field: string,
    private readonly doc: string,
    /** Records where a test of this field may be NULL (see `FilterSql.unsure`). */
    private readonly unsure: (where: string) => void,
  ) {
    this.segs = field.split('.');
    this.path = this.jsonPath(this.segs);
  }

  /** Paths SQLite can address exactly: no numeric segments (MongoDB reads them as positions too), no quotes. */
  get addressable(): boolean {
    return addressable(this.segs);
  }

  private jsonPath(segs: readonly string[]): string {
    return jsonPathSql(segs);
  }

  private get type(): string {
    return `json_type(${this.doc}, ${this.path})`;
  }

  private get direct(): Operand {
    const datePath = jsonPathSql(this.segs, '$date');
    return { t: this.type, v: `json_extract(${this.doc}, ${this.path})`, d: `json_extract(${this.doc}, ${datePath})` };
  }

  /** Some parent of the field is an array (MongoDB then reaches into its elements): unknown here. */
  private get throughArray(): string | undefined {
    if (this.segs.length < 2) return undefined;
    const parts: string[] = [];
    for (let i = 1; i < this.segs.length; i++) parts.push(`json_type(${this.doc}, ${this.jsonPath(this.segs.slice(0, i))}) IS 'array'`);
    return or(parts);
  }

  /** The field's value or, when it is an array, any of its elements passes `test`. */
  any(test: ElementTest): string {
    const element: Operand = { t: 'j.type', v: 'j.value', d: `(CASE WHEN j.type = 'object' THEN json_extract(j.value, '$."$date"') END)` };
    const through = this.throughArray;
    // The field's type is read once: a string or a number (what fields mostly hold) is tested
    // with its type known, so the value is the only further lookup in the document.
    const known = (t: string): Operand => ({ t: `'${t}'`, v: `json_extract(${this.doc}, ${this.path})`, d: 'NULL' });
    // NULL only from an array (its elements), an object (a tagged NaN or infinity compared as a
    // number), or a missing field under an array parent.
    this.unsure(test.objectUnknown === true ? `coalesce(${this.type} IN ('array','object'), 0)` : `(${this.type} IS 'array')`);
    if (through) this.unsure(`(${this.type} IS NULL AND ${through})`);
    return (
      // An array: 1 if an element passes; unknown if an element is undecided (or is itself an
      // array: mingo reads arrays nested in arrays its own way); 0 otherwise.
      `(CASE ${this.type} WHEN 'text' THEN ${test(known('text'))} WHEN 'integer' THEN ${test(known('integer'))} WHEN 'real' THEN ${test(known('real'))}` +
      ` WHEN 'array' THEN (CASE WHEN EXISTS (SELECT 1 FROM json_each(${this.doc}, ${this.path}) AS j WHERE (${test(element)}) IS 1) THEN 1` +
      ` WHEN EXISTS (SELECT 1 FROM json_each(${this.doc}, ${this.path}) AS j WHERE j.type = 'array' OR (${test(element)}) IS NULL) THEN ${UNKNOWN} ELSE 0 END)` +
      ` ELSE ${through ? `(CASE WHEN ${this.type} IS NULL AND ${through} THEN ${UNKNOWN} ELSE ${test(this.direct)} END)` : test(this.direct)} END)`
    );
  }

  /** The field exists (with any value, null included). */
  exists(): string {
    const through = this.throughArray;
    if (through) this.unsure(`(${this.type} IS NULL AND ${through})`);
    return through ? `(CASE WHEN ${this.type} IS NOT NULL THEN 1 WHEN ${through} THEN ${UNKNOWN} ELSE 0 END)` : `(${this.type} IS NOT NULL)`;
  }

  size(n: number): string {
    const through = this.throughArray;
    const direct = `(${this.type} IS 'array' AND json_array_length(${this.doc}, ${this.path}) = ${n})`;
    if (through) this.unsure(`(${this.type} IS NULL AND ${through})`);
    return through ? `(CASE WHEN ${this.type} IS NULL AND ${through} THEN ${UNKNOWN} ELSE ${direct} END)` : direct;
  }
}

class Translator {
  /** Where some part of the translation may be NULL (see `FilterSql.unsure`). */
  readonly unsure: string[] = [];
  private readonly addUnsure = (where: string): void => {
    if (!this.unsure.includes(where)) this.unsure.push(where);
  };

  /** A part SQL cannot decide: NULL on every document. */
  private get unknown(): string {
    this.addUnsure('1');
    return UNKNOWN;
  }

  constructor(
    private readonly p: Params,
    private readonly doc: string,
    private readonly id: string,
  ) {}

  query(query: Filter): string {
    const parts: string[] = [];
    for (const [key, value] of Object.entries(query)) {
      if (key === '$and') parts.push(and((value as Filter[]).map((q) => this.query(q))));
      else if (key === '$or') parts.push(or((value as Filter[]).map((q) => this.query(q))));
      else if (key === '$nor') parts.push(not(or((value as Filter[]).map((q) => this.query(q)))));
      else if (key.startsWith('$')) parts.push(this.unknown);
      else parts.push(this.field(key, value));
    }
    return and(parts);
  }

  field(key: string, cond: unknown): string {
    if (key === '_id') return this.idField(cond);
    const f = new FieldSql(key, this.doc, this.addUnsure);
    if (!f.addressable) return this.unknown;
    if (!isOperatorObject(cond)) {
      const test = matchTest(cond, this.p);
      return test ? f.any(test) : this.unknown;
    }
    const parts: string[] = [];
    for (const [op, operand] of Object.entries(cond)) parts.push(this.operator(f, op, operand, cond));
    return and(parts);
  }

  private operator(f: FieldSql, op: string, operand: unknown, cond: Record<string, unknown>): string {
    const p = this.p;
    const via = (test: ElementTest | undefined): string => (test ? f.any(test) : this.unknown);
    switch (op) {
      case '$eq':
        return via(compareTest('=', operand, p));
      case '$ne': {
        const test = compareTest('=', operand, p);
        return test ? not(f.any(test)) : this.unknown;
      }
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte': {
        const sqlOp = ({ $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' } as const)[op];
        return via(compareTest(sqlOp, operand, p));
      }
      case '$in':
      case '$nin': {
        const tests = (operand as unknown[]).map((v) => matchTest(v, p));
        if (tests.some((t) => t === undefined)) return this.unknown;
        const anyOf: ElementTest = (o) => or((tests as ElementTest[]).map((t) => t(o)));
        anyOf.objectUnknown = tests.some((t) => t?.objectUnknown === true);
        const inList = (operand as unknown[]).length === 0 ? '0' : f.any(anyOf);
        return op === '$in' ? inList : not(inList);
      }
      case '$exists':
        return operand ? f.exists() : not(f.exists());
      case '$regex':
        return via(regexTest(operand, cond.$options, p));
      case '$options':
        return '1'; // read with $regex
      case '$not': {
        if (operand instanceof RegExp) {
          const test = regexTest(operand, undefined, p);
          return test ? not(f.any(test)) : this.unknown;
        }
        const inner = Object.entries(operand as Record<string, unknown>).map(([o, v]) => this.operator(f, o, v, operand as Record<string, unknown>));
        return not(and(inner));
      }
      case '$size':
        return f.size(operand as number);
      default:
        // $all (mingo does not match a scalar field by it, MongoDB does: mingo's reading is kept),
        // $elemMatch, $type, $mod.
        return this.unknown;
    }
  }

  /** `_id` is always a string, stored in its own column. */
  private idField(cond: unknown): string {
    const eq = (v: unknown): string => (typeof v === 'string' ? `(${this.id} = ${this.p.add(v)})` : v instanceof RegExp ? this.idRegex(v, undefined) : '0');
    if (!isOperatorObject(cond)) return eq(cond);
    const parts: string[] = [];
    for (const [op, operand] of Object.entries(cond)) {
      switch (op) {
        case '$eq':
          parts.push(eq(operand));
          break;
        case '$ne':
          parts.push(not(eq(operand)));
          break;
        case '$in':
        case '$nin': {
          const list = operand as unknown[];
          const strings = list.filter((v): v is string => typeof v === 'string');
          const others = list.filter((v) => typeof v !== 'string').map(eq);
          const inList = or([...(strings.length > 0 ? [`(${this.id} IN (${strings.map((s) => this.p.add(s)).join(', ')}))`] : []), ...others]);
          parts.push(op === '$in' ? inList : not(inList));
          break;
        }
        case '$gt':
        case '$gte':
        case '$lt':
        case '$lte': {
          const sqlOp = ({ $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' } as const)[op];
          parts.push(typeof operand === 'string' ? `(${this.id} ${sqlOp} ${this.p.add(operand)})` : '0');
          break;
        }
        case '$exists':
          parts.push(operand ? '1' : '0');
          break;
        case '$regex':
          parts.push(this.idRegex(operand, cond.$options));
          break;
        case '$options':
          break;
        default:
          parts.push(this.unknown);
      }
    }
    return and(parts);
  }

  private idRegex(source: unknown, options: unknown): string {
    const test = regexTest(source, options, this.p);
    return test ? test({ t: "'text'", v: this.id, d: 'NULL' }) : this.unknown;
  }
}

/** `_id` equality or `$in` of strings: answerable by the `_id` index. */
function sargableId(cond: unknown, t: Translator): string | undefined {
  if (typeof cond === 'string') return t.field('_id', cond);
  if (isPlainObject(cond) && Object.keys(cond).length === 1) {
    if (typeof cond.$eq === 'string') return t.field('_id', cond);
    if (Array.isArray(cond.$in) && cond.$in.every((v) => typeof v === 'string')) return t.field('_id', cond);
  }
  return undefined;
}

/**
 * Translates a (validated) filter. `doc` and `id` are the SQL expressions of the document's JSON
 * and its `_id` column.
 */
export function translateFilter(filter: Filter, p: Params, doc = 'c.doc', id = 'c.id'): FilterSql {
  const t = new Translator(p, doc, id);
  const sargable: string[] = [];
  const rest: Filter = {};
  for (const [key, value] of Object.entries(filter)) {
    const s = key === '_id' ? sargableId(value, t) : undefined;
    if (s !== undefined) sargable.push(s);
    else rest[key] = value;
  }
  const residual = t.query(rest);
  return { sargable, residual, unsure: t.unsure.includes('1') ? '1' : or(t.unsure) };
}
