/**
 * Chunks of indexed text: together they hold every trigram of the text, and an edit changes
 * the rows of the chunks it touched, not the rest.
 */
import { describe, expect, it } from 'vitest';
import { chunkEdits, chunkRowid, chunkSlots, literalWindows, MAX_CHUNKS, MAX_TEXT_RID, textChunks, WORD_WINDOW } from './text-chunks.js';
import { seededRandom as random } from '../testing/seeded-random.js';

const rnd = random(7);
const WORDS = ['lease', 'claim', 'Straße', '漢字', '🚀launch', '👍🏽ok', 'a\u200db', 'x(y)', 'deploy', 'index', 'naïve', 'ÜBER', 'q?', '100%', '-', 'fooBarBaz'];
const words = (n: number): string => Array.from({ length: n }, () => WORDS[Math.floor(rnd() * WORDS.length)]).join(rnd() < 0.9 ? ' ' : '\n');
/** A title line and paragraphs: about what a task's searchable text looks like. */
const document = (paragraphs: number): string => [words(6), ...Array.from({ length: paragraphs }, () => words(20 + Math.floor(rnd() * 60)))].join('\n');

/** Trigrams by code point, as FTS5's trigram tokenizer reads them. */
function grams(text: string): Set<string> {
  const cps = Array.from(text);
  const out = new Set<string>();
  for (let i = 0; i + 3 <= cps.length; i++) out.add(cps.slice(i, i + 3).join(''));
  return out;
}

describe('text chunks', () => {
  it('text chunks: every trigram of the text is inside one chunk, chunks follow the text in order, and no surrogate pair is split', () => {
    const texts = [
      '',
      'ab',
      'short text',
      document(1),
      document(12),
      '🚀'.repeat(3000),
      'x'.repeat(5000),
      `${'a'.repeat(511)}🚀${'b'.repeat(600)}`,
    ];
    for (const text of texts) {
      const chunks = textChunks(text);
      const covered = new Set(chunks.flatMap((c) => [...grams(c)]));
      for (const g of grams(text)) expect(covered.has(g), `${JSON.stringify(g)} of ${text.slice(0, 40)}`).toBe(true);
      // Each chunk is the text from where the one before ended: the one before holds two code
      // points of it (or WORD_WINDOW - 1 after a cut at MAX_CHUNK).
      let at = 0;
      for (const [i, chunk] of chunks.entries()) {
        expect(text.startsWith(chunk, at)).toBe(true);
        expect(/^[\udc00-\udfff]/.test(chunk)).toBe(false);
        const next = chunks[i + 1];
        if (next === undefined) {
          expect(at + chunk.length).toBe(text.length);
          break;
        }
        const starts = [WORD_WINDOW - 1, 2].map((k) => at + chunk.length - Array.from(chunk).slice(-k).join('').length);
        const start = starts.find((p) => p > at && text.startsWith(next, p));
        expect(start, `chunk ${i + 1} of ${text.slice(0, 30)}`).toBeDefined();
        at = start as number;
      }
      expect(chunks.length).toBeLessThanOrEqual(MAX_CHUNKS);
    }
  });

  it('text chunks: a piece of text without whitespace of up to WORD_WINDOW code points lies inside one row, wherever it is cut', () => {
    const texts = [document(12), 'x'.repeat(3000), `${'🚀'.repeat(700)} ${document(3)} ${'ab'.repeat(900)}`, Array.from({ length: 400 }, () => words(1)).join('')];
    for (const text of texts) {
      const chunks = textChunks(text);
      const cps = Array.from(text);
      for (let i = 0; i < 400; i++) {
        const start = Math.floor(rnd() * cps.length);
        const piece = cps.slice(start, start + 1 + Math.floor(rnd() * WORD_WINDOW)).join('').split(/[ \n\t\r]/)[0] as string;
        expect(chunks.some((c) => c.includes(piece)), JSON.stringify(piece)).toBe(true);
      }
    }
    expect(literalWindows('lease  expired\nat 12:00')).toEqual(['lease', 'expired', 'at', '12:00']);
    expect(literalWindows('y'.repeat(WORD_WINDOW + 3))).toEqual(['y'.repeat(WORD_WINDOW), 'yyy']);
    expect(literalWindows(' ')).toEqual([]);
  });

  it('text chunks: a text longer than the slots have room for is cut into at most MAX_CHUNKS chunks, each with a slot of its own', () => {
    const long = document(3000);
    const slots = chunkSlots(long);
    expect(textChunks(long).length).toBeLessThanOrEqual(MAX_CHUNKS);
    expect(slots.size).toBe(textChunks(long).length);
    expect(Math.max(...slots.keys())).toBeLessThan(MAX_CHUNKS);
  });

  it('text chunks: an edit rewrites the rows of the chunks around it, not the rest of the text', () => {
    let worst = 0;
    for (let round = 0; round < 200; round++) {
      const before = document(15);
      const chunks = textChunks(before).length;
      expect(chunks).toBeGreaterThan(15);
      const firstLine = before.indexOf('\n');
      const edits: string[] = [
        // A new title.
        `${words(5)}${before.slice(firstLine)}`,
        // A word inserted, or a sentence removed, somewhere in the middle.
        ((at) => `${before.slice(0, at)} ${words(1)} ${before.slice(at)}`)(Math.floor(rnd() * before.length)),
        ((at) => `${before.slice(0, at)}${before.slice(at + 40)}`)(Math.floor(rnd() * (before.length - 40))),
        // A paragraph added at the end.
        `${before}\n${words(30)}`,
      ];
      for (const after of edits) {
        const { remove, insert } = chunkEdits(before, after);
        worst = Math.max(worst, remove.length, insert.length);
        // Applying the edit to the old rows gives the new text's rows.
        const rows = new Map(chunkSlots(before));
        for (const slot of remove) rows.delete(slot);
        for (const [slot, chunk] of insert) {
          expect(rows.has(slot)).toBe(false);
          rows.set(slot, chunk);
        }
        expect(rows).toEqual(chunkSlots(after));
      }
    }
    // Most edits touch one or two chunks; a boundary that moves can take a neighbour or two along.
    expect(worst).toBeLessThanOrEqual(6);
    expect(chunkEdits(undefined, 'abc')).toEqual({ remove: [], insert: [[[...chunkSlots('abc').keys()][0], 'abc']] });
    expect(chunkEdits('abc', undefined)).toEqual({ remove: [...chunkSlots('abc').keys()], insert: [] });
    expect(chunkEdits('same', 'same')).toEqual({ remove: [], insert: [] });
  });

  it('text chunks: every row and slot has a row id of its own, exact in a JavaScript number; past the last row it is refused, never shared', () => {
    const ids = new Set<number>();
    for (const rid of [0, 1, 2, 1_000_003, MAX_TEXT_RID - 1, MAX_TEXT_RID]) {
      for (const slot of [0, 1, MAX_CHUNKS - 1]) {
        const id = chunkRowid(rid, slot);
        expect(Number.isSafeInteger(id)).toBe(true);
        expect(Math.floor(id / MAX_CHUNKS)).toBe(rid);
        expect(id % MAX_CHUNKS).toBe(slot);
        ids.add(id);
      }
    }
    expect(ids.size).toBe(18);
    expect(() => chunkRowid(MAX_TEXT_RID + 1, 0)).toThrow(RangeError);
    expect(() => chunkRowid(1, MAX_CHUNKS)).toThrow(RangeError);
    expect(() => chunkRowid(-1, 0)).toThrow(RangeError);
    expect(() => chunkRowid(1.5, 0)).toThrow(RangeError);
  });
});
