/**
 * Decoded documents of recent reads, so a page read again (or a document read before its update)
 * is not decoded from JSON again. An entry is keyed by the row (collection and rowid) and holds
 * the version it was decoded at: a row is found only at the exact version SQL reports, and
 * versions are never reused within a process (a write rolled back leaves its version unused), so
 * an entry can never stand for another content, whatever commits, rolls back or conflicts.
 *
 * The cached objects are the store's own: every document handed to a caller is a copy (a
 * projection's copy, or `cloneValue`), and the store itself only reads them. Bounded by the size
 * of the documents' JSON; the least recently used go first.
 */

type Doc = Record<string, unknown>;

interface Entry {
  v: number;
  doc: Doc;
  size: number;
}

/** Rowids up to this fit in the key beside the collection number. */
const MAX_RID = 2 ** 32;

export class DocCache {
  private readonly entries = new Map<number, Entry>();
  private bytes = 0;

  constructor(private readonly budget: number) {}

  private static key(coll: number, rid: number): number | undefined {
    return rid >= 0 && rid < MAX_RID && coll < 2 ** 20 ? coll * MAX_RID + rid : undefined;
  }

  /** The document of row `rid` at version `v`, if held (and marks it recently used). */
  get(coll: number, rid: number, v: number): Doc | undefined {
    const key = DocCache.key(coll, rid);
    if (key === undefined) return undefined;
    const e = this.entries.get(key);
    if (e === undefined || e.v !== v) return undefined;
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.doc;
  }

  /** Whether row `rid` is held at version `v` (for SQL: then it need not hand the document over). */
  has(coll: number, rid: number, v: number): boolean {
    const key = DocCache.key(coll, rid);
    return key !== undefined && this.entries.get(key)?.v === v;
  }

  /** Whether some version of the row is held (a write keeps such a row's new version). */
  holds(coll: number, rid: number): boolean {
    const key = DocCache.key(coll, rid);
    return key !== undefined && this.entries.has(key);
  }

  /** Keeps `doc` (which must not be shared with any caller) as row `rid` at version `v`. */
  set(coll: number, rid: number, v: number, doc: Doc, size: number): void {
    const key = DocCache.key(coll, rid);
    if (key === undefined || size > this.budget / 4) return;
    this.delete(coll, rid);
    this.entries.set(key, { v, doc, size });
    this.bytes += size;
    while (this.bytes > this.budget) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      const e = this.entries.get(oldest.value) as Entry;
      this.entries.delete(oldest.value);
      this.bytes -= e.size;
    }
  }

  delete(coll: number, rid: number): void {
    const key = DocCache.key(coll, rid);
    if (key === undefined) return;
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    this.bytes -= e.size;
  }

  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  /** JSON length of the documents held (what the budget bounds). */
  get heldBytes(): number {
    return this.bytes;
  }

  get size(): number {
    return this.entries.size;
  }
}
