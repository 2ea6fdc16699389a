import { Query } from 'mingo';
import { describe, expect, it } from 'vitest';
import { compileFilter } from './filter.js';

/** A small deterministic generator (the same cases every run). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('compileFilter: conditions tested without mingo', () => {
  it('give mingo\'s answer for 3,000 random filters of top-level conditions on 60 documents of every value kind', () => {
    const r = rng(11);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(r() * list.length)] as T;
    const scalars: unknown[] = ['a', 'b', 'ab', '', 'B', 0, 1, -1, 2.5, 10, true, false, null, Number.NaN, Infinity, new Date(0), new Date(86_400_000), new Date(Number.NaN), '2026-01-01T00:00:00.000Z', '2025-06-01T00:00:00.000Z'];
    const stored = (): unknown => {
      const k = r();
      if (k < 0.6) return pick(scalars);
      if (k < 0.8) return Array.from({ length: Math.floor(r() * 3) }, () => (r() < 0.9 ? pick(scalars) : [pick(scalars)]));
      return { c: pick(scalars) };
    };
    const docs = Array.from({ length: 60 }, (_, i) => {
      const d: Record<string, unknown> = { _id: `d${i}` };
      for (const f of ['a', 'b', 'c']) if (r() < 0.8) d[f] = stored();
      return d;
    });
    const condition = (): unknown => {
      const v = pick(scalars);
      switch (Math.floor(r() * 9)) {
        case 0:
          return v;
        case 1:
          return { $eq: v };
        case 2:
          return { $ne: v };
        case 3:
          return { $in: [v, pick(scalars)] };
        case 4:
          return { $nin: [v, pick(scalars)] };
        case 5:
          return { [pick(['$gt', '$gte', '$lt', '$lte'])]: v };
        case 6:
          return { $exists: r() < 0.5 };
        case 7:
          return { $gte: pick(scalars), $lt: pick(scalars) };
        default:
          return { $gt: pick(['2026-01-01T00:00:00.000Z', 0, 'a', new Date(0)]), $ne: v };
      }
    };
    for (let i = 0; i < 3_000; i++) {
      const filter: Record<string, unknown> = {};
      for (const f of ['_id', 'a', 'b', 'c']) if (r() < (f === '_id' ? 0.2 : 0.5)) filter[f] = f === '_id' ? pick(['d1', 'd2', 'x']) : condition();
      const matcher = compileFilter(filter);
      const q = new Query(filter, { scriptEnabled: false });
      const want = docs.filter((d) => q.test(d)).map((d) => d._id);
      expect(docs.filter((d) => matcher(d)).map((d) => d._id), JSON.stringify(filter)).toEqual(want);
    }
  });
});
