/**
 * Substring indexes: the FTS5 trigram index must give exactly the literal-substring answer
 * (`text.includes(q)`) on text with Unicode and punctuation, for short and long queries, after
 * updates and deletes, and inside a transaction.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { escapeRegExp } from '../regex.js';
import { createSqliteStore } from './sqlite-store.js';
import { trigrams } from './planner.js';
import { CHUNK_BITS } from './text-chunks.js';
import { SQLITE_DRIVER } from './driver.js';
import { seededRandom as random } from '../testing/seeded-random.js';

const rnd = random(12345);
const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)] as T;
const WORDS = [
  'index', 'query', 'planner', 'Cursor', 'LEASE', 'deploy', 'fix', 'a.b', 'x(y)', '[z]', 'q?', '$home', '^caret', 'pipe|', 'back\\slash',
  'quote"d', "it's", 'semi;colon', 'naïve', 'Straße', 'ÜBER', 'e\u0301t\u00e9', '漢字', '検索エンジン', 'Σίσυφος', 'İstanbul', 'ıi', '🚀launch',
  '👍🏽ok', 'a\u200db', 'ｆｕｌｌ', 'ﬁle', '100%', '#42', 'C++', 'fooBarBaz', '  double  space', 'tab\tsep', 'new\nline', '-', '--', '...',
];
const sentence = (): string => Array.from({ length: 2 + Math.floor(rnd() * 12) }, () => pick(WORDS)).join(pick([' ', ' ', ', ', '/', '']));

function substringOf(text: string): string {
  const cps = Array.from(text);
  const len = 1 + Math.floor(rnd() * 8);
  const start = Math.floor(rnd() * Math.max(1, cps.length - len));
  return cps.slice(start, start + len).join('');
}

describe('substring index (FTS5 trigram)', () => {
  it('text: results equal the literal-substring definition on a generated corpus, through writes and a transaction', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    try {
      const c = store.collection('docs');
      await c.createIndexes([{ name: 'ws_text', keys: { ws: 1, text: 1 }, substring: true }]);
      const docs = new Map<string, { _id: string; ws: string; text?: unknown }>();
      for (let i = 0; i < 1500; i++) {
        const text = rnd() < 0.05 ? pick([undefined, 42, null, [sentence(), sentence()]]) : sentence();
        const doc = { _id: `d${i}`, ws: pick(['w1', 'w2']), ...(text === undefined ? {} : { text }) };
        docs.set(doc._id, doc);
      }
      await c.insertMany([...docs.values()]);

      const check = async (rounds: number, session?: Parameters<typeof store.withTransaction>[0] extends (s: infer S) => unknown ? S : never): Promise<void> => {
        const texts = [...docs.values()].map((d) => d.text).filter((t): t is string => typeof t === 'string');
        for (let i = 0; i < rounds; i++) {
          const q = rnd() < 0.85 ? substringOf(pick(texts)) : rnd() < 0.5 ? substringOf(pick(texts)).toUpperCase() : sentence().slice(0, 6);
          const ws = rnd() < 0.3 ? pick(['w1', 'w2']) : undefined;
          const filter = { ...(ws ? { ws } : {}), text: { $regex: escapeRegExp(q) } };
          const contains = (v: unknown): boolean => (typeof v === 'string' ? v.includes(q) : Array.isArray(v) && v.some((x) => typeof x === 'string' && x.includes(q)));
          const want = [...docs.values()].filter((d) => (ws === undefined || d.ws === ws) && contains(d.text)).map((d) => d._id).sort();
          const got = (await c.find(filter, session ? { session } : {})).map((d) => d._id).sort();
          expect(got, JSON.stringify(q)).toEqual(want);
          expect(await c.countDocuments(filter, session ? { session } : {}), JSON.stringify(q)).toBe(want.length);
          const page = await c.find(filter, { sort: { _id: 1 }, limit: 5, ...(session ? { session } : {}) });
          expect(page.map((d) => d._id), JSON.stringify(q)).toEqual([...want].sort().slice(0, 5));
        }
      };

      await check(250);
      // Rewrite, delete and add text; the index follows every write.
      const ids = [...docs.keys()];
      for (let i = 0; i < 300; i++) {
        const id = pick(ids);
        const r = rnd();
        if (r < 0.6) {
          const text = sentence();
          await c.updateOne({ _id: id }, { $set: { text } });
          const doc = docs.get(id);
          if (doc) docs.set(id, { ...doc, text });
        } else if (r < 0.8) {
          await c.updateOne({ _id: id }, { $unset: { text: '' } });
          const doc = docs.get(id);
          if (doc) {
            const { text: _gone, ...rest } = doc;
            docs.set(id, rest);
          }
        } else {
          await c.deleteOne({ _id: id });
          docs.delete(id);
        }
      }
      await check(150);
      // Inside a transaction: its own writes count, through the same queries.
      await store.withTransaction(async (session) => {
        await c.insertOne({ _id: 'tx-new', ws: 'w1', text: 'zqxjk unique needle ✓' }, { session });
        docs.set('tx-new', { _id: 'tx-new', ws: 'w1', text: 'zqxjk unique needle ✓' });
        const victim = [...docs.values()].find((d) => typeof d.text === 'string' && d._id !== 'tx-new') as { _id: string; ws: string; text: string };
        await c.deleteOne({ _id: victim._id }, { session });
        docs.delete(victim._id);
        expect((await c.find({ text: { $regex: 'needle ✓' } }, { session })).map((d) => d._id)).toEqual(['tx-new']);
        await check(50, session);
      });
      await check(50);
    } finally {
      await store.close();
    }
  }, 180_000);

  it('text: the trigram index holds what the decoded document holds, whatever the indexed field is (string, array, object, number, lone surrogate, U+FFFD, nested path)', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    type Internal = { db: { prepare(sql: string): { get(): unknown; all(...params: unknown[]): unknown[] } } };
    const db = (store as unknown as Internal).db;
    const pending = (table: string): number => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    // The documents the FTS5 table itself holds every trigram of `q` for, each in one of the
    // document's chunks (collection N's first substring index), by document id: the candidates
    // a text query starts from.
    const ftsIds = (coll: number, q: string): string[] => {
      const grams = trigrams(q);
      const per = grams.map(() => `SELECT rowid >> ${CHUNK_BITS} FROM f_${coll}_1 WHERE f_${coll}_1 MATCH ?`).join(' INTERSECT ');
      return (db.prepare(`SELECT c.id AS id FROM c_${coll} AS c WHERE c.rid IN (${per}) ORDER BY c.id`).all(...grams.map((t) => `"${t.replace(/"/g, '""')}"`)) as { id: string }[]).map(
        (r) => r.id,
      );
    };
    try {
      const c = store.collection('docs');
      await c.createIndexes([{ name: 'text', keys: { text: 1 }, substring: true }]);
      const values: unknown[] = [
        'a plain needle',
        ['an array needle', 'and more'],
        { inner: 'an object needle' },
        42,
        null,
        true,
        'a lone \ud800 surrogate needle',
        'a replacement \ufffd char needle',
        new Date(0),
        [],
      ];
      // More rows than a batch in one write: the trigram index catches up inside it.
      const docs = Array.from({ length: 200 }, (_, i) => ({ _id: `d${String(i).padStart(3, '0')}`, ...(i % 11 === 10 ? {} : { text: i < values.length ? values[i] : `filler ${i}` }) }));
      await c.insertMany(docs);
      expect(pending('q_1_1')).toBe(0);
      // A string, or the strings of an array at the leaf (what the store's text matching reads).
      const texts = (v: unknown): string[] => (typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
      for (const q of ['needle', 'plain need', 'array needle', 'object needle', 'lone', 'lone \ud800 surrogate', 'a replacement \ufffd', 'surrogate needle', 'replacement', 'char needle', 'filler 1']) {
        const want = docs.filter((d) => texts((d as { text?: unknown }).text).some((t) => t.includes(q))).map((d) => d._id);
        // Each document with the text among the candidates; none without text (the object, the number, ...).
        const candidates = ftsIds(1, q);
        expect(candidates, q).toEqual(expect.arrayContaining(want));
        expect(candidates.filter((id) => texts(docs.find((d) => d._id === id)?.text).length === 0), q).toEqual([]);
        expect((await c.explain({ text: { $regex: escapeRegExp(q) } })).plan, q).toBe('FTS');
        expect((await c.find({ text: { $regex: escapeRegExp(q) } }, { sort: { _id: 1 } })).map((d) => d._id), q).toEqual(want);
      }

      // The lone surrogate is indexed as the decoded document holds it, not as the three U+FFFD
      // SQLite's bytes for it turn into; and it is found by equality and by text on every driver.
      expect(ftsIds(1, '\ufffd\ufffd\ufffd')).toEqual([]);
      expect((await c.find({ text: 'a lone \ud800 surrogate needle' })).map((d) => d._id)).toEqual(['d006']);
      expect((await c.find({ text: { $in: ['x', 'a lone \ud800 surrogate needle'] } })).map((d) => d._id)).toEqual(['d006']);
      expect((await c.find({ text: { $regex: escapeRegExp('\ud800 surrogate') } })).map((d) => d._id)).toEqual(['d006']);
      expect(await c.countDocuments({ text: { $regex: '\ud800' } })).toBe(1);

      // A nested path passes through arrays: read from the decoded document.
      const n = store.collection('nested');
      await n.createIndexes([{ name: 'text', keys: { 'meta.text': 1 }, substring: true }]);
      const nested = Array.from({ length: 150 }, (_, i) => ({ _id: `n${String(i).padStart(3, '0')}`, meta: i % 2 ? [{ text: `odd needle ${i}` }, { text: 'x' }] : { text: `even needle ${i}` } }));
      await n.insertMany(nested);
      expect(pending('q_2_1')).toBe(0);
      const odd = nested.filter((d, i) => i % 2 === 1 && `odd needle ${i}`.includes('odd needle 1')).map((d) => d._id);
      expect(ftsIds(2, 'odd needle 1')).toEqual(odd);
      expect(ftsIds(2, 'even needle')).toHaveLength(75);
      expect(ftsIds(2, 'needle')).toHaveLength(150);
      expect((await n.find({ 'meta.text': { $regex: 'odd needle 1' } }, { sort: { _id: 1 } })).map((d) => d._id)).toEqual(odd);
    } finally {
      await store.close();
    }
  });

  it('text: long texts indexed in chunks give the literal-substring answer for queries across chunk boundaries, through edits anywhere in them', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    try {
      const c = store.collection('long');
      await c.createIndexes([{ name: 'text', keys: { text: 1 }, substring: true }]);
      // A title line and paragraphs of a few hundred to a few thousand characters: several chunks each.
      const longText = (): string => Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => Array.from({ length: 3 + Math.floor(rnd() * 5) }, sentence).join(' ')).join('\n');
      const docs = new Map<string, string>();
      for (let i = 0; i < 300; i++) docs.set(`l${i}`, longText());
      await c.insertMany([...docs].map(([_id, text]) => ({ _id, text })));
      const check = async (rounds: number): Promise<void> => {
        const texts = [...docs.values()];
        for (let i = 0; i < rounds; i++) {
          // Up to 40 characters from anywhere: many cross a chunk's end.
          const text = pick(texts);
          const cps = Array.from(text);
          const start = Math.floor(rnd() * cps.length);
          const q = cps.slice(start, start + 3 + Math.floor(rnd() * 38)).join('');
          const want = [...docs].filter(([, t]) => t.includes(q)).map(([id]) => id).sort();
          const got = (await c.find({ text: { $regex: escapeRegExp(q) } })).map((d) => String(d._id)).sort();
          expect(got, JSON.stringify(q)).toEqual(want);
        }
      };
      await check(150);
      // Edits as people make them: a new first line, words inserted or cut in the middle, a paragraph added.
      const ids = [...docs.keys()];
      for (let i = 0; i < 400; i++) {
        const id = pick(ids);
        const text = docs.get(id) as string;
        const at = Math.floor(rnd() * text.length);
        const r = rnd();
        const next =
          r < 0.25
            ? `${sentence()}${text.slice(Math.max(0, text.indexOf('\n')))}`
            : r < 0.5
              ? `${text.slice(0, at)} ${sentence()} ${text.slice(at)}`
              : r < 0.75
                ? `${text.slice(0, at)}${text.slice(at + 1 + Math.floor(rnd() * 60))}`
                : `${text}\n${longText()}`;
        docs.set(id, next);
        await c.updateOne({ _id: id }, { $set: { text: next } });
        // Every so often a query while rows are still pending.
        if (i % 50 === 0) await check(10);
      }
      await check(200);
    } finally {
      await store.close();
    }
  }, 180_000);

  it('text: a file in store format 1 (the whole text in one FTS5 row) is indexed again in chunks when it is opened', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'text-format-'));
    const file = path.join(dir, 'store.sqlite');
    const texts = Array.from({ length: 120 }, (_, i) => `${sentence()} ${i}\n${Array.from({ length: 20 }, sentence).join(' ')}`);
    try {
      const store = createSqliteStore({ path: file });
      const c = store.collection('docs');
      await c.createIndexes([{ name: 'text', keys: { text: 1 }, substring: true }]);
      await c.insertMany(texts.map((text, i) => ({ _id: `d${i}`, text })));
      await c.updateOne({ _id: 'd3' }, { $set: { text: 'left pending by format 1' } });
      texts[3] = 'left pending by format 1';
      await store.close();
      // Format 1 as an earlier version left it: one FTS5 row per document (row id = rid), and a
      // pending table that says whether the document had a row.
      const { default: Database } = (await import(SQLITE_DRIVER)) as { default: new (file: string) => { exec(sql: string): void; prepare(sql: string): { run(...p: unknown[]): unknown; all(): unknown[] }; close(): void } };
      const db = new Database(file);
      db.exec(`INSERT INTO f_1_1 (f_1_1) VALUES ('delete-all'); DROP TABLE q_1_1; CREATE TABLE q_1_1 (rid INTEGER PRIMARY KEY, indexed INTEGER NOT NULL)`);
      const insert = db.prepare('INSERT INTO f_1_1 (rowid, t) VALUES (?, ?)');
      for (const row of db.prepare(`SELECT rid, json_extract(doc, '$.text') AS text FROM c_1`).all() as { rid: number; text: string }[]) {
        if (row.text !== 'left pending by format 1') insert.run(row.rid, row.text);
        else db.prepare('INSERT INTO q_1_1 (rid, indexed) VALUES (?, 1)').run(row.rid);
      }
      db.exec(`UPDATE store_meta SET value = 1 WHERE key = 'format'`);
      db.close();

      const told: { details: Record<string, unknown>; message: string }[] = [];
      const log = (details: Record<string, unknown>, message: string) => told.push({ details, message });
      const reopened = createSqliteStore({ path: file, log });
      // The upgrade is told once (the process logs it), with what it rebuilt.
      expect(told).toEqual([{ details: expect.objectContaining({ path: file, from: 1, to: 2, substringIndexes: 1 }), message: expect.stringContaining('upgraded') }]);
      try {
        const d = reopened.collection('docs');
        for (let i = 0; i < 80; i++) {
          const q = substringOf(pick(texts)) + (rnd() < 0.5 ? '' : substringOf(pick(texts)));
          if (Array.from(q).length < 3) continue;
          const want = texts.flatMap((t, n) => (t.includes(q) ? [`d${n}`] : [])).sort();
          expect((await d.find({ text: { $regex: escapeRegExp(q) } })).map((x) => String(x._id)).sort(), JSON.stringify(q)).toEqual(want);
        }
        expect((await d.explain({ text: { $regex: 'pending by format' } })).plan).toBe('FTS');
        expect((await d.find({ text: { $regex: 'pending by format' } })).map((x) => x._id)).toEqual(['d3']);
        type Internal = { db: { prepare(sql: string): { get(): unknown } } };
        expect(((reopened as unknown as Internal).db.prepare("SELECT value FROM store_meta WHERE key = 'format'").get() as { value: number }).value).toBe(2);
        expect(((reopened as unknown as Internal).db.prepare('SELECT count(*) AS n FROM q_1_1').get() as { n: number }).n).toBe(0);
      } finally {
        await reopened.close();
      }
      // Opened again, the file is in the current format: nothing to tell.
      await createSqliteStore({ path: file, log }).close();
      expect(told).toHaveLength(1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('text: three or more characters use the trigram index; shorter text is tested on the documents', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    try {
      const c = store.collection('docs');
      await c.createIndexes([{ name: 'ws_text', keys: { ws: 1, text: 1 }, substring: true }, { name: 'ws_id', keys: { ws: 1, _id: 1 } }]);
      await c.insertMany(Array.from({ length: 2000 }, (_, i) => ({ _id: `d${String(i).padStart(4, '0')}`, ws: 'w', text: i === 77 ? 'the rare zanzibar word' : `common text ${i}` })));
      const rare = await c.explain({ ws: 'w', text: { $regex: 'zanzibar' } }, { sort: { _id: 1 }, limit: 10 });
      expect(rare).toMatchObject({ plan: 'FTS', index: 'ws_text', nReturned: 1, docsExamined: 1 });
      const short = await c.explain({ ws: 'w', text: { $regex: 'ar' } }, { sort: { _id: 1 }, limit: 10 });
      expect(short.plan).not.toBe('FTS');
      expect(short.nReturned).toBe(1);
      // Case matters (a literal `$regex` without the `i` flag): the trigrams are not case-folded.
      expect(await c.countDocuments({ text: { $regex: 'ZANZIBAR' } })).toBe(0);
      expect(trigrams('a👍🏽b')).toEqual(['a👍🏽', '👍🏽b']);
    } finally {
      await store.close();
    }
  });

  it('text: rows whose text changed are found at once, before the trigram index catches up in a batch; it has caught up after a pause and at close', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'text-pending-'));
    const file = path.join(dir, 'store.sqlite');
    type Internal = { db: { prepare(sql: string): { get(): unknown } } };
    const pendingRows = (store: unknown): number => ((store as Internal).db.prepare('SELECT count(*) AS n FROM q_1_1').get() as { n: number }).n;
    const ids = (docs: { _id: unknown }[]): string[] => docs.map((d) => String(d._id));
    try {
      // Pending rows wait for a batch, or for the end of the test's pause.
      let store = createSqliteStore({ path: file, textIndexDelayMs: 1500 });
      let c = store.collection('docs');
      await c.createIndexes([{ name: 'text', keys: { text: 1 }, substring: true }]);
      await c.insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: `d${String(i).padStart(3, '0')}`, text: `plain text ${i}` })));
      // 300 rows in one write: at least a batch, caught up inside the write.
      expect(pendingRows(store)).toBe(0);
      // Fewer than a batch: pending until the pause ends.
      await c.insertMany([{ _id: 'p1', text: 'plain pending one' }, { _id: 'p2', text: 'plain pending two' }]);
      expect(pendingRows(store)).toBe(2);
      expect(ids(await c.find({ text: { $regex: 'pending' } }, { sort: { _id: 1 } }))).toEqual(['p1', 'p2']);
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(pendingRows(store)).toBe(0);
      expect(ids(await c.find({ text: { $regex: 'pending' } }, { sort: { _id: 1 } }))).toEqual(['p1', 'p2']);
      expect(ids(await c.find({ text: { $regex: 'text 29' } }, { sort: { _id: 1 } }))).toEqual(['d029', 'd290', 'd291', 'd292', 'd293', 'd294', 'd295', 'd296', 'd297', 'd298', 'd299']);

      // Changed, deleted, a row id reused: found (or not) at once, while the rows are pending.
      await c.updateOne({ _id: 'd001' }, { $set: { text: 'now with a needle' } });
      await c.updateOne({ _id: 'd002' }, { $set: { other: 1 } });
      await c.deleteOne({ _id: 'd299' });
      await c.insertOne({ _id: 'e', text: 'another needle, plain text 299' });
      expect(pendingRows(store)).toBe(3);
      expect(await c.explain({ text: { $regex: 'needle' } })).toMatchObject({ plan: 'FTS', nReturned: 2 });
      expect(ids(await c.find({ text: { $regex: 'needle' } }, { sort: { _id: 1 } }))).toEqual(['d001', 'e']);
      expect(ids(await c.find({ text: { $regex: 'plain text 1' } }))).not.toContain('d001');
      expect(ids(await c.find({ text: { $regex: 'text 299' } }))).toEqual(['e']);
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(pendingRows(store)).toBe(0);
      expect(ids(await c.find({ text: { $regex: 'needle' } }, { sort: { _id: 1 } }))).toEqual(['d001', 'e']);
      expect(ids(await c.find({ text: { $regex: 'text 299' } }))).toEqual(['e']);

      // Pending at close: caught up before the file is let go; the reopened store agrees.
      await c.updateOne({ _id: 'd003' }, { $set: { text: 'a last needle' } });
      expect(pendingRows(store)).toBe(1);
      await store.close();
      store = createSqliteStore({ path: file, textIndexDelayMs: 1500 });
      c = store.collection('docs');
      expect(pendingRows(store)).toBe(0);
      expect(ids(await c.find({ text: { $regex: 'needle' } }, { sort: { _id: 1 } }))).toEqual(['d001', 'd003', 'e']);
      await store.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
