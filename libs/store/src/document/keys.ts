/**
 * Index keys as bytes whose plain byte order (SQLite compares BLOBs with memcmp) is MongoDB's
 * order for the same values: the type bracket first (null, numbers, strings, objects, arrays,
 * booleans, dates), then the value. Equal values encode to equal bytes, so a unique index is a
 * primary key over these bytes, and a missing field (encoded like null) collides like in MongoDB.
 */
import { isPlainObject } from './values.js';

const NULL = 0x10;
const NUMBER = 0x20;
const STRING = 0x30;
const OBJECT = 0x40;
const ARRAY = 0x50;
const BOOLEAN = 0x80;
const DATE = 0x90;
/** Ends a string, an object or an array: lower than every type byte, so shorter sorts first. */
const END = 0x00;

/** The first byte of each type bracket and of the one after it, for range bounds. */
export const KEY_BRACKETS = {
  null: [NULL, NULL + 1],
  number: [NUMBER, NUMBER + 1],
  string: [STRING, STRING + 1],
  date: [DATE, DATE + 1],
} as const;

class Writer {
  private buf = Buffer.allocUnsafe(64);
  private len = 0;

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.len++] = b;
  }

  /** A double whose bytes sort like its value; NaN sorts below every other number, as in MongoDB. */
  number(n: number): void {
    this.room(8);
    if (Number.isNaN(n)) {
      this.buf.fill(0, this.len, this.len + 8);
    } else {
      this.buf.writeDoubleBE(n === 0 ? 0 : n, this.len);
      if ((this.buf[this.len] as number) & 0x80) {
        for (let i = 0; i < 8; i++) this.buf[this.len + i] = ~(this.buf[this.len + i] as number) & 0xff;
      } else {
        this.buf[this.len] = (this.buf[this.len] as number) | 0x80;
      }
    }
    this.len += 8;
  }

  /** UTF-8 with 0x00 escaped as 0x00 0xFF, ended by 0x00 0x00 (so a prefix sorts first). */
  text(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.room(bytes.length * 2 + 2);
    for (const b of bytes) {
      this.buf[this.len++] = b;
      if (b === 0) this.buf[this.len++] = 0xff;
    }
    this.buf[this.len++] = END;
    this.buf[this.len++] = END;
  }

  done(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.len));
  }
}

function typeByte(value: unknown): number {
  if (value === null || value === undefined) return NULL;
  switch (typeof value) {
    case 'number':
      return NUMBER;
    case 'string':
      return STRING;
    case 'boolean':
      return BOOLEAN;
    default:
      break;
  }
  if (value instanceof Date) return DATE;
  if (Array.isArray(value)) return ARRAY;
  if (isPlainObject(value)) return OBJECT;
  throw new TypeError('value cannot be part of an index key');
}

function write(w: Writer, value: unknown): void {
  const t = typeByte(value);
  w.byte(t);
  switch (t) {
    case NULL:
      return;
    case NUMBER:
      w.number(value as number);
      return;
    case STRING:
      w.text(value as string);
      return;
    case BOOLEAN:
      w.byte(value ? 1 : 0);
      return;
    case DATE:
      w.number((value as Date).getTime());
      return;
    case ARRAY:
      for (const el of value as unknown[]) write(w, el);
      w.byte(END);
      return;
    default: {
      // MongoDB compares sub-documents element by element: type, then name, then value.
      const obj = value as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        w.byte(typeByte(obj[key]));
        w.text(key);
        write(w, obj[key]);
      }
      w.byte(END);
    }
  }
}

const NULL_KEY = Buffer.from([NULL]);

/** The sortable bytes of one index key value (missing encodes like null). */
export function encodeKey(value: unknown): Buffer {
  // Fast paths for what index keys mostly are: strings without NUL, numbers, null.
  if (typeof value === 'string' && !value.includes('\0')) {
    const len = Buffer.byteLength(value, 'utf8');
    const out = Buffer.allocUnsafe(len + 3);
    out[0] = STRING;
    out.write(value, 1, 'utf8');
    out[len + 1] = END;
    out[len + 2] = END;
    return out;
  }
  if (value === null || value === undefined) return NULL_KEY;
  const w = new Writer();
  write(w, value);
  return w.done();
}
