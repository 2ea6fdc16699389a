/**
 * Cheap argument checks both adapters make, so a mistake fails loudly on MongoDB too instead of
 * meaning something else there (an `undefined` filter value would be dropped by the driver and
 * widen the filter; a replacement document is not an update).
 */

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function assertNoUndefined(value: unknown, where: string): void {
  if (value === undefined) {
    throw new TypeError(`${where}: undefined in a filter (use null to match a missing field, or leave the condition out)`);
  }
  if (Array.isArray(value)) {
    value.forEach((v, i) => assertNoUndefined(v, `${where}[${i}]`));
  } else if (isPlainObject(value)) {
    for (const [k, v] of Object.entries(value)) assertNoUndefined(v, `${where}.${k}`);
  }
}

export function assertFilterShape(filter: unknown, what = 'filter'): void {
  if (!isPlainObject(filter)) throw new TypeError(`${what} must be a plain object`);
  assertNoUndefined(filter, what);
}

export function assertUpdateShape(update: unknown): void {
  if (!isPlainObject(update)) throw new TypeError('update must be a plain object of update operators');
  const keys = Object.keys(update);
  if (keys.length === 0) throw new TypeError('update document is empty: use operators such as $set');
  const nonOperator = keys.find((k) => !k.startsWith('$'));
  if (nonOperator !== undefined) {
    throw new TypeError(`replacement documents are not supported ('${nonOperator}'): use update operators such as $set`);
  }
}

export function assertStringId(doc: unknown): void {
  if (!isPlainObject(doc)) throw new TypeError('document must be a plain object');
  if (typeof doc._id !== 'string') throw new TypeError('document _id must be a string chosen by the application');
}
