import { Query } from 'mingo';
import { describe, expect, it } from 'vitest';
import { escapeRegExp } from '../regex.js';
import { createEmbeddedStore } from './embedded-store.js';
import { compileFilter, literalConditions, literalOfRegex } from '../document/filter.js';

/** A small seeded generator so failures reproduce. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('embedded text search: literal regular expressions', () => {
  it('text search: escaped user text is recognised as its literal text', () => {
    for (const text of ['plain', 'a.b', '(x) [y] {z} *+?^$|\\/-', 'ünïcode ✓', 'line\nbreak']) {
      expect(literalOfRegex(escapeRegExp(text))).toBe(text);
    }
  });

  it('text search: any regular expression syntax is not a literal', () => {
    for (const source of ['a.b', '^start', 'end$', 'a*', 'a+', 'a?', '[ab]', '(a)', 'a|b', 'a{2}', '\\d', '\\w', '\\bword', 'trailing\\']) {
      expect(literalOfRegex(source), source).toBeUndefined();
    }
  });

  it('text search: literal conditions are top-level (or $and) regexes without the i flag', () => {
    expect(literalConditions({ a: { $regex: 'x\\.y' }, b: { $regex: 'q', $options: 'ms' } })).toEqual([
      { field: 'a', literal: 'x.y' },
      { field: 'b', literal: 'q' },
    ]);
    expect(literalConditions({ $and: [{ a: { $regex: 'in-and' } }] })).toEqual([{ field: 'a', literal: 'in-and' }]);
    expect(literalConditions({ a: { $regex: 'x', $options: 'i' } })).toEqual([]);
    expect(literalConditions({ 'a.b': { $regex: 'x' } })).toEqual([]);
    expect(literalConditions({ a: { $regex: 'x.' } })).toEqual([]);
    expect(literalConditions({ a: /x/ })).toEqual([]);
    expect(literalConditions({ $or: [{ a: { $regex: 'x' } }] })).toEqual([]);
    expect(literalConditions({ a: { $not: { $regex: 'x' } } })).toEqual([]);
  });

  it('text search: the compiled filter answers exactly as mingo does, whatever the field holds', () => {
    const rnd = random(7);
    const values: unknown[] = ['abc', 'xabcx', 'ABC', 'ab', '', ['abc'], ['x', 'yabc'], [], 42, null, undefined, { abc: 1 }, true];
    const filters = [
      { f: { $regex: 'abc' } },
      { f: { $regex: 'abc', $options: 'm' }, g: 1 },
      { $and: [{ f: { $regex: 'b' } }, { f: { $regex: 'c' } }] },
      { f: { $regex: 'abc', $ne: 'xabcx' } },
    ];
    for (const filter of filters) {
      const ours = compileFilter(filter);
      const mingo = new Query(filter, { scriptEnabled: false });
      for (let i = 0; i < 200; i++) {
        const value = values[Math.floor(rnd() * values.length)];
        const doc: Record<string, unknown> = { _id: `d${i}`, g: rnd() < 0.5 ? 1 : 2 };
        if (value !== undefined) doc.f = value;
        expect(ours(doc), `${JSON.stringify(filter)} on ${JSON.stringify(doc)}`).toBe(mingo.test(doc));
      }
    }
  });
});

describe('embedded text search: query plans', () => {
  async function seeded(count: number) {
    const store = createEmbeddedStore();
    const c = store.collection<{ _id: string; ws: string; text: string; rank: number }>('docs');
    await c.createIndexes([
      { name: 'ws_rank', keys: { ws: 1, rank: 1 } },
      { name: 'ws_text', keys: { ws: 1, text: 1 } },
    ]);
    const docs = Array.from({ length: count }, (_, i) => ({
      _id: `d${String(i).padStart(6, '0')}`,
      ws: i % 10 === 0 ? 'other' : 'w',
      text: `${i % 3 === 0 ? 'common ' : ''}word${i}${i % 1000 === 1 ? ' rare' : ''}`,
      rank: i % 17,
    }));
    await c.insertMany(docs);
    return { store, c, docs };
  }

  it('text search: a literal condition on an indexed field is tested on the index keys, fetching only matches', async () => {
    const { c, docs } = await seeded(5_000);
    const filter = { ws: 'w', text: { $regex: 'rare' } };
    const expected = docs.filter((d) => d.ws === 'w' && d.text.includes('rare')).length;
    const explain = await c.explain(filter);
    expect(explain).toMatchObject({ plan: 'IXSCAN', index: 'ws_text', nReturned: expected, docsExamined: expected });
    expect(explain.keysExamined).toBe(docs.filter((d) => d.ws === 'w').length);
    expect(await c.countDocuments(filter)).toBe(expected);
  });

  it('text search: frequent text with a sort and limit is an ordered walk that stops early', async () => {
    const { c } = await seeded(5_000);
    const explain = await c.explain({ ws: 'w', text: { $regex: 'common' } }, { sort: { rank: -1 }, limit: 20 });
    expect(explain).toMatchObject({ plan: 'IXSCAN', index: 'ws_rank', inMemorySort: false, nReturned: 20 });
    expect(explain.docsExamined).toBeLessThan(200);
  });

  it('text search: rare text with a sort and limit gives up the ordered walk and tests index keys', async () => {
    const { c, docs } = await seeded(20_000);
    const found = await c.find({ ws: 'w', text: { $regex: 'rare' } }, { sort: { rank: -1 }, limit: 20 });
    const expected = docs
      .filter((d) => d.ws === 'w' && d.text.includes('rare'))
      .sort((a, b) => b.rank - a.rank || (a._id < b._id ? 1 : -1))
      .slice(0, 20)
      .map((d) => d._id);
    expect(found.map((d) => d._id)).toEqual(expected);
    const explain = await c.explain({ ws: 'w', text: { $regex: 'rare' } }, { sort: { rank: -1 }, limit: 20 });
    expect(explain).toMatchObject({ plan: 'IXSCAN', index: 'ws_text', inMemorySort: true });
    // The trial walk's documents plus the matches; never every document of the workspace.
    expect(explain.docsExamined).toBeLessThan(2_000 + 100);
  });

  it('text search: answers are the same with and without indexes, across writes and inside transactions', async () => {
    const rnd = random(11);
    const store = createEmbeddedStore();
    const indexed = store.collection<{ _id: string; ws: string; text?: unknown; rank: number }>('indexed');
    const plain = store.collection<{ _id: string; ws: string; text?: unknown; rank: number }>('plain');
    // The text after another key: entries are tested on their third key.
    await indexed.createIndexes([
      { name: 'ws_rank', keys: { ws: 1, rank: 1 } },
      { name: 'ws_id_text', keys: { ws: 1, _id: 1, text: 1 } },
    ]);
    const pieces = ['alpha', 'beta', 'gam.ma', '(x)', 'Alpha'];
    const value = (): unknown => {
      const r = rnd();
      if (r < 0.05) return undefined;
      if (r < 0.1) return 7;
      return Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pieces[Math.floor(rnd() * pieces.length)]).join(' ');
    };
    const doc = (i: number) => {
      const text = value();
      return { _id: `d${i}`, ws: rnd() < 0.8 ? 'w' : 'v', rank: Math.floor(rnd() * 5), ...(text === undefined ? {} : { text }) };
    };
    for (let i = 0; i < 3_000; i++) {
      const d = doc(i);
      await indexed.insertOne(d);
      await plain.insertOne(d);
    }
    const compare = async (session?: Parameters<typeof indexed.find>[1]) => {
      for (const text of pieces) {
        for (const options of [{}, { sort: { rank: 1 as const }, limit: 15 }, { sort: { rank: -1 as const }, limit: 3, skip: 2 }]) {
          const filter = { ws: 'w', text: { $regex: escapeRegExp(text) } };
          const a = await indexed.find(filter, { ...options, ...session });
          const b = await plain.find(filter, { ...options, ...session });
          // Without a sort the order is unspecified (as in MongoDB): compare the sets.
          const ids = (rows: { _id: string }[]) => ('sort' in options ? rows.map((d) => d._id) : rows.map((d) => d._id).sort());
          expect(ids(a), `${text} ${JSON.stringify(options)}`).toEqual(ids(b));
          expect(await indexed.countDocuments(filter, session)).toBe(await plain.countDocuments(filter, session));
        }
      }
    };
    await compare();
    const explain = await indexed.explain({ ws: 'w', text: { $regex: 'gam\\.ma' } });
    expect(explain).toMatchObject({ plan: 'IXSCAN', index: 'ws_id_text' });
    // Only matching texts (and the few documents whose text is not a string) are fetched.
    expect(explain.docsExamined).toBeGreaterThanOrEqual(explain.nReturned);
    expect(explain.docsExamined).toBeLessThan(explain.keysExamined / 2);
    for (let i = 0; i < 300; i++) {
      const id = `d${Math.floor(rnd() * 3_000)}`;
      const text = value();
      const update = text === undefined ? { $unset: { text: '' } } : { $set: { text } };
      await indexed.updateOne({ _id: id }, update);
      await plain.updateOne({ _id: id }, update);
    }
    await compare();
    await store.withTransaction(async (session) => {
      await indexed.updateOne({ _id: 'd1' }, { $set: { ws: 'w', text: 'alpha inside' } }, { session });
      await plain.updateOne({ _id: 'd1' }, { $set: { ws: 'w', text: 'alpha inside' } }, { session });
      await compare({ session });
    });
  });
});
