/**
 * Validation of the values every planning record takes (names, text, dates, ids, labels). Each
 * check throws 400 `invalid-input` naming the field as the REST API spells it, so the gateway,
 * the MCP endpoint and internal callers get the same answer for the same mistake.
 */
import { invalidInput } from '@planning/errors';

/** Ids are opaque to clients but always short, printable and free of separators we parse. */
const ID_PATTERN = /^[A-Za-z0-9_:.-]{1,64}$/;
/** C0/C1 control characters other than tab, line feed and carriage return. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;
const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;
const LABEL_PATTERN = /^[^,\s][^,]{0,49}$/;

export const LIMITS = {
  name: 200,
  title: 300,
  description: 20_000,
  goal: 2_000,
  labels: 20,
  label: 50,
  dependencies: 50,
  acceptanceChecks: 50,
  sectionText: 2_000,
  sectionItems: 30,
  sectionItem: 500,
  comment: 10_000,
  note: 1_000,
  evidenceBody: 20_000,
  url: 2_000,
  reason: 2_000,
  contextPack: 50,
  owners: 20,
  q: 200,
  estimate: 10_000,
  minutes: 24 * 60,
} as const;

export function requireString(value: unknown, field: string): string {
  if (typeof value !== 'string') throw invalidInput(field, `'${field}' must be a string`);
  return value;
}

/** A one-line name or title: whitespace collapsed, 1..max characters, no control characters. */
export function validateName(value: unknown, field: string, max: number = LIMITS.name): string {
  const text = requireString(value, field).replace(/\s+/g, ' ').trim();
  if (text.length === 0) throw invalidInput(field, `'${field}' must not be empty`);
  if (text.length > max) throw invalidInput(field, `'${field}' must be at most ${max} characters`);
  if (CONTROL.test(text)) throw invalidInput(field, `'${field}' must not contain control characters`);
  return text;
}

/** Free text (markdown): up to max characters, may be empty, no control characters but newlines and tabs. */
export function validateText(value: unknown, field: string, max: number, options: { required?: boolean } = {}): string {
  const text = requireString(value, field);
  if (text.length > max) throw invalidInput(field, `'${field}' must be at most ${max} characters`);
  if (CONTROL.test(text)) throw invalidInput(field, `'${field}' must not contain control characters`);
  if (options.required && text.trim().length === 0) throw invalidInput(field, `'${field}' must not be empty`);
  return text;
}

export function validateId(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) throw invalidInput(field, `'${field}' is required`);
  if (!ID_PATTERN.test(value)) throw invalidInput(field, `'${field}' is not a valid id`);
  return value;
}

export function optionalId(value: unknown, field: string): string | undefined {
  return value === undefined || value === null || value === '' ? undefined : validateId(value, field);
}

/** A calendar date `YYYY-MM-DD` that exists (no 2025-02-30). */
export function validateDate(value: unknown, field: string): string {
  if (typeof value !== 'string') throw invalidInput(field, `'${field}' must be a date (YYYY-MM-DD)`);
  const match = DATE_PATTERN.exec(value);
  if (!match) throw invalidInput(field, `'${field}' must be a date (YYYY-MM-DD)`);
  const [, y, m, d] = match.map(Number) as [number, number, number, number];
  const date = new Date(Date.UTC(y, m - 1, d));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== m - 1 || date.getUTCDate() !== d) {
    throw invalidInput(field, `'${field}' is not a calendar date`);
  }
  return value;
}

const TIMESTAMP_PATTERN = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-](\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 timestamp, normalised to UTC with milliseconds. Its parts must exist as written
 * (no 2026-02-30, no hour 24, no minute 60): Date.parse would roll them over to another instant.
 */
export function validateTimestamp(value: unknown, field: string): string {
  const match = typeof value === 'string' ? TIMESTAMP_PATTERN.exec(value) : null;
  if (!match) throw invalidInput(field, `'${field}' must be an RFC 3339 timestamp`);
  const [y, mo, d, h, mi, sec, , offH, offM] = [1, 2, 3, 4, 5, 6, 7, 9, 10].map((i) => Number(match[i] ?? 0)) as number[];
  const day = new Date(Date.UTC(y as number, (mo as number) - 1, d));
  const realDate = day.getUTCFullYear() === y && day.getUTCMonth() === (mo as number) - 1 && day.getUTCDate() === d;
  if (!realDate || (h as number) > 23 || (mi as number) > 59 || (sec as number) > 59 || (offH as number) > 23 || (offM as number) > 59) {
    throw invalidInput(field, `'${field}' is not a valid date and time`);
  }
  const ms = Date.parse(value as string);
  if (Number.isNaN(ms)) throw invalidInput(field, `'${field}' must be an RFC 3339 timestamp`);
  return new Date(ms).toISOString();
}

export function validateEnum<T extends string>(value: unknown, allowed: readonly T[], field: string): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw invalidInput(field, `'${field}' must be one of ${allowed.join(', ')}`);
  }
  return value as T;
}

export function validateUrl(value: unknown, field: string): string {
  const text = requireString(value, field).trim();
  if (text.length > LIMITS.url) throw invalidInput(field, `'${field}' must be at most ${LIMITS.url} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalidInput(field, `'${field}' must be an absolute http(s) URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalidInput(field, `'${field}' must be an absolute http(s) URL`);
  return text;
}

/** Labels: 1..50 characters without commas (the search takes comma-separated lists), deduplicated. */
export function validateLabels(value: unknown, field = 'labels'): string[] {
  if (!Array.isArray(value)) throw invalidInput(field, `'${field}' must be an array of strings`);
  const out: string[] = [];
  value.forEach((label, i) => {
    const where = `${field}[${i}]`;
    if (typeof label !== 'string') throw invalidInput(where, `'${where}' must be a string`);
    const text = label.trim();
    if (!LABEL_PATTERN.test(text) || CONTROL.test(text)) {
      throw invalidInput(where, `'${where}' must be 1 to ${LIMITS.label} characters without commas`);
    }
    if (!out.includes(text)) out.push(text);
  });
  if (out.length > LIMITS.labels) throw invalidInput(field, `'${field}' must hold at most ${LIMITS.labels} labels`);
  return out;
}

export function validateIdList(value: unknown, field: string, max: number): string[] {
  if (!Array.isArray(value)) throw invalidInput(field, `'${field}' must be an array of ids`);
  if (value.length > max) throw invalidInput(field, `'${field}' must hold at most ${max} ids`);
  const out: string[] = [];
  value.forEach((id, i) => {
    const valid = validateId(id, `${field}[${i}]`);
    if (!out.includes(valid)) out.push(valid);
  });
  return out;
}

/** A list of short text items (task contract sections). Blank items are dropped. */
export function validateTextList(value: unknown, field: string, maxItems: number, maxLength: number): string[] {
  if (!Array.isArray(value)) throw invalidInput(field, `'${field}' must be an array of strings`);
  if (value.length > maxItems) throw invalidInput(field, `'${field}' must hold at most ${maxItems} items`);
  const out: string[] = [];
  value.forEach((item, i) => {
    const text = validateText(item, `${field}[${i}]`, maxLength).trim();
    if (text) out.push(text);
  });
  return out;
}

/** Case-insensitive literal search text: trimmed, 1..200 characters; undefined when blank. */
export function validateQuery(value: unknown, field = 'q'): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = requireString(value, field).trim();
  if (text.length === 0) return undefined;
  if (text.length > LIMITS.q) throw invalidInput(field, `'${field}' must be at most ${LIMITS.q} characters`);
  return text;
}

/** The form text is searched in: case folded and Unicode-normalised, so matching is a plain substring test. */
export function normalizeForSearch(text: string): string {
  return text.normalize('NFKC').toLowerCase();
}
