import { describe, expect, it } from 'vitest';
import { seededRandom } from '../testing/seeded-random.js';
import { decodeJson, encodeJson } from './codec.js';

/** The encoding as it was defined first: every value through the replacer. */
function replacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? value : { $num: String(value) };
  if (typeof value === 'string' && this[key] instanceof Date) return { $date: (this[key] as Date).getTime() };
  if (value instanceof RegExp) return { $re: [value.source, value.flags] };
  return value;
}
const byReplacer = (value: unknown): string => JSON.stringify(value, replacer);

class WithToJson {
  constructor(private readonly at: Date) {}
  toJSON(): unknown {
    return { at: this.at, kind: 'custom' };
  }
}

describe('document codec', () => {
  it('encodes 3,000 random values exactly as the replacer does (dates, invalid dates, non-finite numbers, regular expressions, toJSON), and decodes them back', () => {
    const random = seededRandom(7);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    const leaf = (): unknown =>
      pick([
        () => new Date(Math.floor(random() * 2e12)),
        () => new Date(Number.NaN),
        () => pick([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 1.5, 42]),
        () => /a+b/gi,
        () => `s${Math.floor(random() * 100)} "quoted" {"$date":1}`,
        () => null,
        () => undefined,
        () => random() < 0.5,
        () => new WithToJson(new Date(1_000)),
      ])();
    const value = (depth: number): unknown => {
      if (depth === 0 || random() < 0.3) return leaf();
      if (random() < 0.4) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth - 1));
      return Object.fromEntries(Array.from({ length: Math.floor(random() * 5) }, (_, i) => [`k${i}`, value(depth - 1)]));
    };
    for (let i = 0; i < 3_000; i++) {
      const v = { _id: `d${i}`, body: value(4) };
      const before = JSON.stringify(v, (_k, x: unknown) => (x instanceof Date ? x.getTime() : x));
      const encoded = encodeJson(v);
      expect(encoded).toBe(byReplacer(v));
      // The value itself is never changed (tags go into copies).
      expect(JSON.stringify(v, (_k, x: unknown) => (x instanceof Date ? x.getTime() : x))).toBe(before);
      expect(encodeJson(decodeJson(encoded))).toBe(encoded);
    }
  });

  it('returns dates, non-finite numbers and regular expressions as they went in; a document without them encodes as plain JSON', () => {
    const doc = { _id: 'a', at: new Date(5), n: Number.NaN, inf: [Number.NEGATIVE_INFINITY], re: /x/m, nested: { at: new Date(7) }, plain: { s: 'x' } };
    const back = decodeJson(encodeJson(doc)) as typeof doc;
    expect(back.at).toEqual(new Date(5));
    expect(back.n).toBeNaN();
    expect(back.inf).toEqual([Number.NEGATIVE_INFINITY]);
    expect(back.re).toEqual(/x/m);
    expect(back.nested.at).toEqual(new Date(7));
    expect(encodeJson({ _id: 'b', s: 'text', list: [1, 2, { k: 'v' }] })).toBe('{"_id":"b","s":"text","list":[1,2,{"k":"v"}]}');
  });
});
