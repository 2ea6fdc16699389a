/**
 * Documents as JSON text. JSON lacks dates and non-finite numbers, so they are written as tags:
 * `{"$date": ms}` and `{"$num": "NaN" | "Infinity" | "-Infinity"}` (and `{"$re": [source, flags]}`
 * inside filters kept in files). Stored field names never start with `$`, so a tag cannot be
 * mistaken for a document, and the text `{"$` appears in JSON output only where a tag starts (a
 * quote inside a string is escaped): documents without it are parsed without a second walk.
 */

type Doc = Record<string, unknown>;

function replacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? value : { $num: String(value) };
  if (typeof value === 'string') {
    // `Date#toJSON` already ran: the holder still has the Date itself.
    const raw = this[key];
    if (raw instanceof Date) return { $date: raw.getTime() };
  }
  if (value instanceof RegExp) return { $re: [value.source, value.flags] };
  return value;
}

/** Whether a value holds anything JSON cannot carry as it is (dates, non-finite numbers, regular expressions). */
function needsTags(value: unknown): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (value === null || typeof value !== 'object') return false;
  if (value instanceof Date || value instanceof RegExp) return true;
  if (Array.isArray(value)) {
    for (const v of value) if (needsTags(v)) return true;
    return false;
  }
  for (const key in value) if (needsTags((value as Record<string, unknown>)[key])) return true;
  return false;
}

export function encodeJson(value: unknown): string {
  // The replacer costs a call per value: most documents need none.
  return needsTags(value) ? JSON.stringify(value, replacer) : JSON.stringify(value);
}

function revive(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = revive(value[i]);
    return value;
  }
  const obj = value as Doc;
  const keys = Object.keys(obj);
  if (keys.length === 1) {
    const k = keys[0];
    if (k === '$date' && typeof obj.$date === 'number') return new Date(obj.$date);
    if (k === '$num' && typeof obj.$num === 'string') return Number(obj.$num);
    if (k === '$re' && Array.isArray(obj.$re)) return new RegExp(String(obj.$re[0]), String(obj.$re[1]));
  }
  for (const key of keys) obj[key] = revive(obj[key]);
  return obj;
}

export function decodeJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  return text.includes('{"$') ? revive(value) : value;
}

/** A value already parsed from tagged JSON (e.g. by another reader), with its tags turned back into values. */
export function reviveTags(value: unknown): unknown {
  return revive(value);
}
