/**
 * A document's indexed text goes into the FTS5 trigram table in chunks, one FTS row each, so an
 * edit re-indexes the chunks it touched rather than the whole text (a task's title changed:
 * its first chunk, not the description after it). Chunk boundaries are content-defined: they
 * follow the words around them, not their distance from the start, so text inserted or removed
 * early in a document moves the boundaries of the chunks it lands in and leaves the ones after
 * it where they were, and each chunk's slot (the low bits of its row id) comes from its own text,
 * so the chunks after an edit keep their rows.
 *
 * What a text query may rely on (the planner's `textCandidate`):
 * - every trigram of the text lies wholly inside one row: a row also holds the first two
 *   characters of the next chunk;
 * - a piece of the text without whitespace of at most WORD_WINDOW code points lies wholly inside
 *   one row: a chunk ends right after a whitespace character, or (in a run of MAX_CHUNK
 *   characters with no boundary) anywhere, and then its row holds the next WORD_WINDOW - 1 code
 *   points too. So the trigrams of such a piece of a literal can be asked for together, in one
 *   row (FTS5's AND); trigrams from different pieces only one at a time.
 */

/** Low bits of an FTS row id: the chunk's slot; the rest is the document's `rid`. */
export const CHUNK_BITS = 10;
/** Slots per document; a longer text has its chunks joined in groups until they fit. */
export const MAX_CHUNKS = 1 << CHUNK_BITS;
/** A chunk ends at a word boundary once it is this long (UTF-16 code units)... */
const MIN_CHUNK = 48;
/**
 * ...after a space or line end where the word before it hashes to a multiple of this (about one
 * word in eight: a rule of the words alone, so two versions of a text find the same boundaries
 * again soon after an edit; "every line end" would not, in text that is all short lines)...
 */
const BOUNDARY_EVERY = 8;
/** ...and at the latest here, whatever the text (a run without spaces). */
const MAX_CHUNK = 512;
/** A whitespace-free piece of text this long (code points) lies inside one row (see above). */
export const WORD_WINDOW = 65;

/** Row ids past this would not fit the 53 bits of a JavaScript integer with the slot beside them. */
export const MAX_TEXT_RID = 2 ** (53 - CHUNK_BITS) - 1;

/**
 * The FTS row id of a document's chunk. A document's `rid` counts its table's rows (2^43 of them
 * is far beyond what a file holds), but past that two chunks would share a row id and a search
 * would answer for the wrong document: refused loudly instead.
 */
export function chunkRowid(rid: number, slot: number): number {
  if (!Number.isInteger(rid) || rid < 0 || rid > MAX_TEXT_RID || !Number.isInteger(slot) || slot < 0 || slot >= MAX_CHUNKS) {
    throw new RangeError(`text index: no row id for chunk ${slot} of row ${rid} (rows up to ${MAX_TEXT_RID}, slots below ${MAX_CHUNKS})`);
  }
  return rid * MAX_CHUNKS + slot;
}

const isHigh = (u: number): boolean => u >= 0xd800 && u <= 0xdbff;
const isLow = (u: number): boolean => u >= 0xdc00 && u <= 0xdfff;
const isSpace = (u: number): boolean => u === 0x20 || u === 0x0a || u === 0x09 || u === 0x0d;

/** End offsets of the chunks (the last is `text.length`), negative where a chunk was cut at MAX_CHUNK. */
function chunkEnds(text: string): number[] {
  const ends: number[] = [];
  let start = 0;
  let word = 0;
  for (let i = 0; i < text.length; i++) {
    const u = text.charCodeAt(i);
    const end = i + 1;
    if (isSpace(u)) {
      if (end - start >= MIN_CHUNK && (word >>> 0) % BOUNDARY_EVERY === 0) {
        ends.push(end);
        start = end;
      }
      word = 0;
      continue;
    }
    word = Math.imul(word ^ u, 0x01000193);
    // A forced end never splits a surrogate pair.
    if (end - start >= MAX_CHUNK && !(isHigh(u) && end < text.length && isLow(text.charCodeAt(end)))) {
      ends.push(-end);
      start = end;
      word = 0;
    }
  }
  if (start < text.length || ends.length === 0) ends.push(text.length);
  if (ends.length <= MAX_CHUNKS) return ends;
  // Very long text: every `group`-th end, so the chunks fit the slots.
  const group = Math.ceil(ends.length / MAX_CHUNKS);
  const joined = ends.filter((_, i) => (i + 1) % group === 0);
  if (Math.abs(joined.at(-1) ?? 0) !== text.length) joined.push(text.length);
  return joined;
}

/**
 * The text of each chunk's FTS row: the chunk and the next two characters, or the next
 * WORD_WINDOW - 1 after a chunk cut at MAX_CHUNK (code points).
 */
export function textChunks(text: string): string[] {
  const chunks: string[] = [];
  let start = 0;
  for (const signed of chunkEnds(text)) {
    const end = Math.abs(signed);
    const overlap = signed < 0 ? WORD_WINDOW - 1 : 2;
    let over = end;
    for (let k = 0; k < overlap && over < text.length; k++) over += isHigh(text.charCodeAt(over)) && isLow(text.charCodeAt(over + 1)) ? 2 : 1;
    chunks.push(text.slice(start, over));
    start = end;
  }
  return chunks;
}

/**
 * The slot of each chunk: from the chunk's own text (a hash, the next free slot on a clash), so
 * a chunk keeps its slot while it is unchanged, wherever chunks were added or removed around it.
 * A function of the text alone: the slots the FTS table holds for a document follow from the
 * text it was indexed with.
 */
export function chunkSlots(text: string): Map<number, string> {
  const slots = new Map<number, string>();
  for (const chunk of textChunks(text)) {
    let h = 0x811c9dc5;
    for (let i = 0; i < chunk.length; i++) h = Math.imul(h ^ chunk.charCodeAt(i), 0x01000193);
    let slot = (h >>> 0) % MAX_CHUNKS;
    while (slots.has(slot)) slot = (slot + 1) % MAX_CHUNKS;
    slots.set(slot, chunk);
  }
  return slots;
}

const NONE: ReadonlyMap<number, string> = new Map();

/**
 * What the FTS table must change for a document whose text went from `before` to `after` (either
 * absent): the slots whose row goes (`remove`) and the rows that come (`insert`). A chunk that is
 * in both keeps its row.
 */
export function chunkEdits(before: string | undefined, after: string | undefined): { remove: number[]; insert: [number, string][] } {
  const old = before === undefined ? NONE : chunkSlots(before);
  const now = after === undefined ? NONE : chunkSlots(after);
  const remove: number[] = [];
  const insert: [number, string][] = [];
  for (const [slot, chunk] of old) if (now.get(slot) !== chunk) remove.push(slot);
  for (const [slot, chunk] of now) if (old.get(slot) !== chunk) insert.push([slot, chunk]);
  return { remove, insert };
}

/**
 * The pieces of a literal whose trigrams may be asked for together (see above): its runs without
 * whitespace, cut into pieces of at most WORD_WINDOW code points.
 */
export function literalWindows(literal: string): string[] {
  const out: string[] = [];
  let run: string[] = [];
  const cut = () => {
    for (let i = 0; i < run.length; i += WORD_WINDOW) out.push(run.slice(i, i + WORD_WINDOW).join(''));
    run = [];
  };
  // Whitespace as chunkEnds sees it, by code point.
  for (const cp of literal) {
    if (cp.length === 1 && isSpace(cp.charCodeAt(0))) cut();
    else run.push(cp);
  }
  cut();
  return out;
}
