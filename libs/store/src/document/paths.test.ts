import { describe, expect, it } from 'vitest';
import { compileProjection } from './paths.js';

describe('projections', () => {
  it('a frozen projection is compiled once; one that is not is compiled at each use, so a change to it counts', () => {
    const frozen = Object.freeze({ secret: 0 });
    const first = compileProjection(frozen);
    expect(compileProjection(frozen)).toBe(first);
    expect(first?.apply({ _id: 'a', secret: 1, kept: { n: 1 } })).toEqual({ _id: 'a', kept: { n: 1 } });

    const open: Record<string, 0 | 1> = { secret: 0 };
    const before = compileProjection(open);
    expect(compileProjection(open)).not.toBe(before);
    open.kept = 0;
    expect(compileProjection(open)?.apply({ _id: 'a', secret: 1, kept: 2, other: 3 })).toEqual({ _id: 'a', other: 3 });
  });

  it('a frozen projection that is not valid is refused at every use', () => {
    const mixed = Object.freeze({ a: 1, b: 0 });
    expect(() => compileProjection(mixed)).toThrow(/exclusion/);
    expect(() => compileProjection(mixed)).toThrow(/exclusion/);
  });
});
