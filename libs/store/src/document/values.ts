/**
 * Value rules of the embedded engine: what a document may hold, how it is copied, and how values
 * order (MongoDB's BSON comparison order, used by sorts and indexes alike so an index walk and an
 * in-memory sort agree).
 */

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function describePath(path: string): string {
  return path === '' ? 'the document' : `'${path}'`;
}

/**
 * Copies a value into the store's representation and rejects what MongoDB documents here cannot
 * hold. Object fields set to `undefined` are dropped (the MongoDB adapter runs the driver with
 * `ignoreUndefined`), array holes and `undefined` elements become `null` as BSON would store them.
 */
export function normalizeValue(value: unknown, path: string): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return value;
    case 'undefined':
      return null;
    case 'object':
      break;
    default:
      throw new TypeError(`unsupported value of type ${typeof value} at ${describePath(path)}`);
  }
  if (value === null) return null;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError(`invalid Date at ${describePath(path)}`);
    return new Date(value.getTime());
  }
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = normalizeValue(value[i], path === '' ? String(i) : `${path}.${i}`);
    return out;
  }
  if (!isPlainObject(value)) {
    const ctor = (value as { constructor?: { name?: string } }).constructor?.name ?? 'unknown';
    throw new TypeError(`unsupported value (${ctor} instance) at ${describePath(path)}: store plain objects, arrays, strings, numbers, booleans, null and Dates`);
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const child = path === '' ? key : `${path}.${key}`;
    assertFieldName(key, child);
    const v = value[key];
    if (v === undefined) continue;
    out[key] = normalizeValue(v, child);
  }
  return out;
}

export function assertFieldName(key: string, path: string): void {
  if (key === '') throw new TypeError(`empty field name at '${path}'`);
  if (key.startsWith('$')) throw new TypeError(`field names must not start with '$' ('${path}'); update operators belong in update documents only`);
  if (key.includes('.')) throw new TypeError(`field names must not contain '.' ('${path}')`);
  if (key === '__proto__') throw new TypeError(`field name '__proto__' is not allowed ('${path}')`);
}

/**
 * Deep copy of a value already in store representation (no validation: it was validated on the
 * way in). Stored objects are plain (own enumerable fields only), so `for...in` visits exactly
 * `Object.keys` in the same order, without allocating the key array (reads copy every document
 * they hand out: this is on every read's path).
 */
export function cloneValue<V>(value: V): V {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = cloneValue(value[i]);
    return out as V;
  }
  if (value instanceof Date) return new Date(value.getTime()) as V;
  const out: Record<string, unknown> = {};
  for (const key in value) out[key] = cloneValue((value as Record<string, unknown>)[key]);
  return out as V;
}

/**
 * Freezes `value` and every plain object, array and date inside it; returns it. Instances of
 * other classes (a driver's ObjectId, say) are left as they are.
 */
export function deepFreeze<V>(value: V): V {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  if (Array.isArray(value)) {
    Object.freeze(value);
    for (let i = 0; i < value.length; i++) deepFreeze(value[i]);
  } else if (value instanceof Date) Object.freeze(value);
  else if (isPlainObject(value)) {
    Object.freeze(value);
    for (const key in value) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

/** BSON type brackets, in MongoDB's comparison order. Missing and null share a bracket. */
export const TypeRank = {
  null: 1,
  number: 2,
  string: 3,
  object: 4,
  array: 5,
  boolean: 8,
  date: 9,
  regex: 11,
} as const;

export function typeRank(value: unknown): number {
  switch (typeof value) {
    case 'undefined':
      return TypeRank.null;
    case 'number':
      return TypeRank.number;
    case 'string':
      return TypeRank.string;
    case 'boolean':
      return TypeRank.boolean;
    default:
      break;
  }
  if (value === null) return TypeRank.null;
  if (value instanceof Date) return TypeRank.date;
  if (Array.isArray(value)) return TypeRank.array;
  if (value instanceof RegExp) return TypeRank.regex;
  return TypeRank.object;
}

function cmpPrimitive(a: number | string | boolean, b: number | string | boolean): number {
  if (typeof a === 'string' && typeof b === 'string') return compareStrings(a, b);
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Strings in code point order, which is UTF-8 byte order: what MongoDB, SQLite and index keys
 * use. JavaScript's `<` compares UTF-16 units, which differs only where a surrogate pair meets a
 * character from U+E000 to U+FFFF.
 */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x < y ? -1 : 1;
  }
  return a.length < b.length ? -1 : 1;
}

function cmpNumber(a: number, b: number): number {
  // MongoDB orders NaN below every other number.
  const an = Number.isNaN(a);
  const bn = Number.isNaN(b);
  if (an || bn) return an && bn ? 0 : an ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Total order over store values following MongoDB's cross-type comparison order. */
export function compareValues(a: unknown, b: unknown): number {
  if (a === b) return 0;
  // Fast paths for the common same-type cases (index maintenance compares a lot).
  const ta = typeof a;
  if (ta === typeof b) {
    if (ta === 'string') return compareStrings(a as string, b as string);
    if (ta === 'number' && a === a && b === b) return (a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0;
    if (a instanceof Date && b instanceof Date) return cmpNumber(a.getTime(), b.getTime());
  }
  const ra = typeRank(a);
  const rb = typeRank(b);
  if (ra !== rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case TypeRank.null:
      return 0;
    case TypeRank.number:
      return cmpNumber(a as number, b as number);
    case TypeRank.string:
    case TypeRank.boolean:
      return cmpPrimitive(a as string | boolean, b as string | boolean);
    case TypeRank.date:
      return cmpNumber((a as Date).getTime(), (b as Date).getTime());
    case TypeRank.array: {
      const xa = a as unknown[];
      const xb = b as unknown[];
      const n = Math.min(xa.length, xb.length);
      for (let i = 0; i < n; i++) {
        const c = compareValues(xa[i], xb[i]);
        if (c !== 0) return c;
      }
      return cmpNumber(xa.length, xb.length);
    }
    case TypeRank.regex:
      return cmpPrimitive(String(a), String(b));
    default: {
      // Objects compare field by field in stored order: name, then value (BSON document order).
      const oa = a as Record<string, unknown>;
      const ob = b as Record<string, unknown>;
      const ka = Object.keys(oa);
      const kb = Object.keys(ob);
      const n = Math.min(ka.length, kb.length);
      for (let i = 0; i < n; i++) {
        const nameA = ka[i] as string;
        const nameB = kb[i] as string;
        const ct = compareValues(typeRank(oa[nameA]), typeRank(ob[nameB]));
        if (ct !== 0) return ct;
        const cn = cmpPrimitive(nameA, nameB);
        if (cn !== 0) return cn;
        const cv = compareValues(oa[nameA], ob[nameB]);
        if (cv !== 0) return cv;
      }
      return cmpNumber(ka.length, kb.length);
    }
  }
}

export function valuesEqual(a: unknown, b: unknown): boolean {
  return compareValues(a, b) === 0 && typeRank(a) === typeRank(b);
}

export function compareIds(a: string, b: string): number {
  return compareStrings(a, b);
}
