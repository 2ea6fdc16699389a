/**
 * An ordered list of unique items kept as a list of bounded chunks (the idea of Python's
 * sortedcontainers): insert and remove cost a binary search plus a splice inside one small chunk,
 * so indexes stay sorted incrementally even at hundreds of thousands of entries.
 */

const LOAD = 512;

/** A position between items: chunk number and offset inside it. */
export interface Cursor {
  chunk: number;
  offset: number;
}

export class SortedList<T> {
  private chunks: T[][] = [];
  private count = 0;

  constructor(private readonly cmp: (a: T, b: T) => number) {}

  get size(): number {
    return this.count;
  }

  /** Replaces the content with `items` (any order). */
  load(items: T[]): void {
    const sorted = items.slice().sort(this.cmp);
    this.chunks = [];
    for (let i = 0; i < sorted.length; i += LOAD) this.chunks.push(sorted.slice(i, i + LOAD));
    this.count = sorted.length;
  }

  /** First position whose item is not `before` (the predicate must hold for a prefix of the list). */
  bisect(before: (item: T) => boolean): Cursor {
    const chunks = this.chunks;
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = chunks[mid] as T[];
      if (before(chunk[chunk.length - 1] as T)) lo = mid + 1;
      else hi = mid;
    }
    if (lo === chunks.length) return { chunk: lo, offset: 0 };
    const chunk = chunks[lo] as T[];
    let a = 0;
    let b = chunk.length;
    while (a < b) {
      const mid = (a + b) >>> 1;
      if (before(chunk[mid] as T)) a = mid + 1;
      else b = mid;
    }
    return { chunk: lo, offset: a };
  }

  /** Number of items before a position. */
  rank(pos: Cursor): number {
    let n = 0;
    for (let i = 0; i < pos.chunk && i < this.chunks.length; i++) n += (this.chunks[i] as T[]).length;
    return n + pos.offset;
  }

  insert(item: T): void {
    const cmp = this.cmp;
    if (this.chunks.length === 0) {
      this.chunks.push([item]);
      this.count = 1;
      return;
    }
    const pos = this.bisect((x) => cmp(x, item) < 0);
    let ci = pos.chunk;
    let offset = pos.offset;
    if (ci === this.chunks.length) {
      ci = this.chunks.length - 1;
      offset = (this.chunks[ci] as T[]).length;
    }
    const chunk = this.chunks[ci] as T[];
    if (offset < chunk.length && cmp(chunk[offset] as T, item) === 0) throw new Error('SortedList: duplicate item');
    chunk.splice(offset, 0, item);
    this.count++;
    if (chunk.length > 2 * LOAD) this.chunks.splice(ci + 1, 0, chunk.splice(LOAD));
  }

  /** Removes the item equal to `item`; returns whether it was there. */
  remove(item: T): boolean {
    const cmp = this.cmp;
    const pos = this.bisect((x) => cmp(x, item) < 0);
    const chunk = this.chunks[pos.chunk];
    if (!chunk || pos.offset >= chunk.length || cmp(chunk[pos.offset] as T, item) !== 0) return false;
    chunk.splice(pos.offset, 1);
    this.count--;
    if (chunk.length === 0) this.chunks.splice(pos.chunk, 1);
    return true;
  }

  /** Items from `start` (inclusive) up to `end` (exclusive), ascending. */
  *forward(start: Cursor, end: Cursor): Generator<T> {
    let { chunk: ci, offset } = start;
    while (ci < end.chunk || (ci === end.chunk && offset < end.offset)) {
      const chunk = this.chunks[ci];
      if (!chunk) return;
      if (offset >= chunk.length) {
        ci++;
        offset = 0;
        continue;
      }
      yield chunk[offset] as T;
      offset++;
    }
  }

  /** Items from just before `end` down to `start` (inclusive), descending. */
  *backward(start: Cursor, end: Cursor): Generator<T> {
    let ci = end.chunk;
    let offset = end.offset - 1;
    for (;;) {
      if (offset < 0) {
        ci--;
        if (ci < 0) return;
        offset = (this.chunks[ci] as T[]).length - 1;
        continue;
      }
      if (ci < start.chunk || (ci === start.chunk && offset < start.offset)) return;
      const chunk = this.chunks[ci];
      if (!chunk) {
        ci--;
        if (ci < 0) return;
        offset = (this.chunks[ci] as T[]).length - 1;
        continue;
      }
      if (offset >= chunk.length) offset = chunk.length - 1;
      yield chunk[offset] as T;
      offset--;
    }
  }

  /**
   * Calls `visit` on the items between `start` (inclusive) and `end` (exclusive), ascending or
   * descending, until it returns false. Returns false when stopped early. (Plain loops: this is
   * the planner's hot path.)
   */
  scan(start: Cursor, end: Cursor, reverse: boolean, visit: (item: T) => boolean): boolean {
    const chunks = this.chunks;
    if (!reverse) {
      for (let ci = start.chunk; ci <= end.chunk && ci < chunks.length; ci++) {
        const chunk = chunks[ci] as T[];
        const from = ci === start.chunk ? start.offset : 0;
        const to = ci === end.chunk ? Math.min(end.offset, chunk.length) : chunk.length;
        for (let i = from; i < to; i++) if (!visit(chunk[i] as T)) return false;
      }
      return true;
    }
    for (let ci = Math.min(end.chunk, chunks.length - 1); ci >= start.chunk; ci--) {
      const chunk = chunks[ci] as T[];
      const from = ci === start.chunk ? start.offset : 0;
      const to = ci === end.chunk ? Math.min(end.offset, chunk.length) : chunk.length;
      for (let i = to - 1; i >= from; i--) if (!visit(chunk[i] as T)) return false;
    }
    return true;
  }

  start(): Cursor {
    return { chunk: 0, offset: 0 };
  }

  end(): Cursor {
    return { chunk: this.chunks.length, offset: 0 };
  }

  *[Symbol.iterator](): Generator<T> {
    for (const chunk of this.chunks) yield* chunk;
  }
}
