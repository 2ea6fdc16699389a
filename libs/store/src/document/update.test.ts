import { describe, expect, it } from 'vitest';
import { applyUpdate, compileUpdate, type CompiledUpdate } from './update.js';
import { deepFreeze } from './values.js';

type Doc = Record<string, unknown>;

/** A small deterministic generator (the same cases every run). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const FIELDS = ['a', 'b', 'c', 'tags', 'meta', 'when', 'n'];

function value(r: () => number): unknown {
  switch (Math.floor(r() * 8)) {
    case 0:
      return null;
    case 1:
      return Math.floor(r() * 3);
    case 2:
      return ['x', 'y', 'z'][Math.floor(r() * 3)];
    case 3:
      return r() < 0.5;
    case 4:
      return [Math.floor(r() * 2), 'x'];
    case 5:
      return { p: Math.floor(r() * 2), q: ['x'] };
    case 6:
      return new Date(Date.UTC(2026, 0, 1 + Math.floor(r() * 2)));
    default:
      return 'x';
  }
}

function doc(r: () => number): Doc {
  const d: Doc = { _id: 't1' };
  for (const f of FIELDS) if (r() < 0.6) d[f] = value(r);
  return d;
}

function update(r: () => number): Doc {
  const u: Record<string, Doc> = {};
  const fields = FIELDS.filter(() => r() < 0.4);
  for (const f of fields) {
    const op = r() < 0.25 ? '$unset' : r() < 0.15 ? '$setOnInsert' : '$set';
    (u[op] ??= {})[f] = op === '$unset' ? '' : value(r);
  }
  if (Object.keys(u).length === 0) u.$set = { a: value(r) };
  return u;
}

/** The same compiled update forced through mingo's path. */
const viaMingo = (u: CompiledUpdate): CompiledUpdate => ({ ...u, flat: false });

describe('applyUpdate: flat updates ($set, $setOnInsert, $unset of top-level fields)', () => {
  it('give what mingo gives on 2,000 random documents and updates, on insert and on update', () => {
    const r = rng(7);
    let flats = 0;
    for (let i = 0; i < 2_000; i++) {
      const before = deepFreeze(doc(r));
      const compiled = compileUpdate(update(r));
      if (compiled.flat) flats++;
      for (const insert of [false, true]) {
        const fast = applyUpdate(before, compiled, { insert, filter: { _id: 't1' } });
        const slow = applyUpdate(before, viaMingo(compiled), { insert, filter: { _id: 't1' } });
        expect(fast).toEqual(slow);
        expect(Object.keys(fast.doc)).toEqual(Object.keys(slow.doc));
      }
    }
    expect(flats).toBe(2_000);
  });

  it('leave the stored version as it was and share no value with the update', () => {
    const before = deepFreeze({ _id: 't1', a: { p: 1 }, b: [1], c: 'keep' });
    const compiled = compileUpdate({ $set: { a: { p: 2 }, b: [1] }, $unset: { c: '' } });
    const { doc: after, changed } = applyUpdate(before, compiled, { insert: false, filter: {} });
    expect(changed).toBe(true);
    expect(after).toEqual({ _id: 't1', a: { p: 2 }, b: [1] });
    expect(before).toEqual({ _id: 't1', a: { p: 1 }, b: [1], c: 'keep' });
    // The changed value is the update's copy, not the update's own object.
    expect(after.a).not.toBe(compiled.ops.get('$set')?.a);
    (after.a as { p: number }).p = 3;
    expect(compiled.ops.get('$set')?.a).toEqual({ p: 2 });
  });

  it('refuse changing _id, allow setting it to its own value', () => {
    const before = { _id: 't1', a: 1 };
    expect(() => applyUpdate(before, compileUpdate({ $set: { _id: 't2' } }), { insert: false, filter: {} })).toThrow(/immutable field '_id'/);
    expect(() => applyUpdate(before, compileUpdate({ $unset: { _id: '' } }), { insert: false, filter: {} })).toThrow(/immutable field '_id'/);
    expect(applyUpdate(before, compileUpdate({ $set: { _id: 't1', a: 1 } }), { insert: false, filter: {} })).toEqual({ doc: before, changed: false });
  });

  it('leave nested paths and other operators to mingo', () => {
    expect(compileUpdate({ $set: { 'a.b': 1 } }).flat).toBe(false);
    expect(compileUpdate({ $set: { a: 1 }, $inc: { n: 1 } }).flat).toBe(false);
    expect(compileUpdate({ $set: { a: 1 }, $unset: { b: '' }, $setOnInsert: { c: 1 } }).flat).toBe(true);
  });
});

describe('compileUpdate: paths', () => {
  it('refuses the same field paths, with the same messages, whether a path is one segment (checked without splitting) or dotted', () => {
    expect(() => compileUpdate({ $set: { '': 1 } })).toThrow("$set: empty field path");
    const own = Object.defineProperty({}, '__proto__', { value: 1, enumerable: true });
    expect(() => compileUpdate({ $set: own })).toThrow("$set: field path '__proto__' is not allowed");
    expect(() => compileUpdate({ $set: { 'a.__proto__': 1 } })).toThrow("$set: field path 'a.__proto__' is not allowed");
    expect(() => compileUpdate({ $set: { $x: 1 } })).toThrow("$set: field path '$x' must not contain '$' segments other than positional operators");
    expect(() => compileUpdate({ $set: { $: 1 } })).toThrow("$set: field path '$' must not contain '$' segments other than positional operators");
    expect(() => compileUpdate({ $set: { 'a.$x': 1 } })).toThrow("$set: field path 'a.$x' must not contain '$' segments other than positional operators");
    expect(() => compileUpdate({ $set: { 'a..b': 1 } })).toThrow("$set: invalid field path 'a..b'");
  });

  it('finds conflicts between top-level fields across operators as between dotted paths', () => {
    expect(() => compileUpdate({ $set: { a: 1 }, $unset: { a: '' } })).toThrow("Updating the path 'a' would create a conflict at 'a'");
    expect(() => compileUpdate({ $set: { a: 1 }, $inc: { a: 1 } })).toThrow("Updating the path 'a' would create a conflict at 'a'");
    expect(() => compileUpdate({ $set: { a: 1, 'a.b': 2 } })).toThrow("Updating the path 'a.b' would create a conflict at 'a'");
    expect(() => compileUpdate({ $set: { a: 1, b: 2 }, $unset: { c: '' } })).not.toThrow();
    // A field given as undefined is dropped before the check (the driver's ignoreUndefined).
    expect(() => compileUpdate({ $set: { a: undefined }, $inc: { a: 1 } })).not.toThrow();
  });

  it('marks what the flat fast path cannot take: numeric segments, positional operators, dotted paths, other operators', () => {
    expect(compileUpdate({ $set: { a: 1, b: 'x' }, $unset: { c: '' } })).toMatchObject({ flat: true, numeric: false, positional: false });
    expect(compileUpdate({ $set: { '0': 1 } })).toMatchObject({ flat: true, numeric: true });
    expect(compileUpdate({ $set: { 'a.0': 1 } })).toMatchObject({ flat: false, numeric: true });
    expect(compileUpdate({ $set: { 'a.$': 1 } })).toMatchObject({ flat: false, positional: true });
    expect(compileUpdate({ $set: { 'a.b': 1 } })).toMatchObject({ flat: false, numeric: false, positional: false });
    expect(compileUpdate({ $inc: { a: 1 } })).toMatchObject({ flat: false });
    expect(() => compileUpdate({ $inc: { a: 'one' } })).toThrow('$inc.a: Cannot increment with non-numeric argument');
  });
});
