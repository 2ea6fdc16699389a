/**
 * Server-side cursors: a query's whole answer is computed at once by the embedded engine; the
 * part that does not fit the first batch waits here for `getMore`. Batches stay under the BSON
 * size limit; idle cursors go away after MongoDB's default 10 minutes.
 */
import { calculateObjectSize, Long, type Document } from 'bson';
import { CommandError } from './errors.js';
import { MAX_BSON_OBJECT_SIZE } from './wire-protocol.js';

export const DEFAULT_FIRST_BATCH = 101;
export const CURSOR_TIMEOUT_MS = 10 * 60_000;
/** Room for the reply envelope around a batch. */
const BATCH_BYTES = MAX_BSON_OBJECT_SIZE - 64 * 1024;

interface OpenCursor {
  readonly ns: string;
  readonly docs: Document[];
  pos: number;
  lastUse: number;
  readonly sessionKey: string | undefined;
}

export interface Batch {
  id: Long;
  batch: Document[];
}

export class Cursors {
  private readonly open = new Map<number, OpenCursor>();
  // Ids stay below 2^53 so they survive the driver's Long → number promotion on the way back.
  private nextId = 1 + Math.floor(Math.random() * 2 ** 40);

  constructor(private readonly now: () => number = Date.now) {}

  private static slice(docs: readonly Document[], from: number, max: number): Document[] {
    const out: Document[] = [];
    let bytes = 0;
    for (let i = from; i < docs.length && out.length < max; i++) {
      const doc = docs[i] as Document;
      const size = calculateObjectSize(doc);
      if (out.length > 0 && bytes + size > BATCH_BYTES) break;
      out.push(doc);
      bytes += size;
    }
    return out;
  }

  /** The first batch of an answer; what is left stays behind the returned id (0: nothing left). */
  first(ns: string, docs: Document[], options: { batchSize?: number; singleBatch?: boolean; sessionKey?: string }): Batch {
    const max = options.batchSize ?? DEFAULT_FIRST_BATCH;
    const batch = max === 0 ? [] : Cursors.slice(docs, 0, max);
    if (options.singleBatch || batch.length >= docs.length) return { id: Long.ZERO, batch };
    const id = this.nextId++;
    this.open.set(id, { ns, docs, pos: batch.length, lastUse: this.now(), sessionKey: options.sessionKey });
    return { id: Long.fromNumber(id), batch };
  }

  next(id: number, ns: string, batchSize: number | undefined): Batch {
    const cursor = this.open.get(id);
    if (!cursor) throw new CommandError('CursorNotFound', `cursor id ${id} not found`);
    if (cursor.ns !== ns) throw new CommandError('Unauthorized', `Requested getMore on namespace '${ns}', but cursor ${id} belongs to '${cursor.ns}'`);
    const batch = Cursors.slice(cursor.docs, cursor.pos, batchSize && batchSize > 0 ? batchSize : Infinity);
    cursor.pos += batch.length;
    cursor.lastUse = this.now();
    if (cursor.pos >= cursor.docs.length) {
      this.open.delete(id);
      return { id: Long.ZERO, batch };
    }
    return { id: Long.fromNumber(id), batch };
  }

  kill(ids: readonly number[]): { killed: number[]; notFound: number[] } {
    const killed: number[] = [];
    const notFound: number[] = [];
    for (const id of ids) (this.open.delete(id) ? killed : notFound).push(id);
    return { killed, notFound };
  }

  killSessions(keys: readonly string[]): void {
    const set = new Set(keys);
    for (const [id, c] of this.open) if (c.sessionKey !== undefined && set.has(c.sessionKey)) this.open.delete(id);
  }

  sweep(): void {
    const now = this.now();
    for (const [id, c] of this.open) if (now - c.lastUse > CURSOR_TIMEOUT_MS) this.open.delete(id);
  }

  clear(): void {
    this.open.clear();
  }

  get size(): number {
    return this.open.size;
  }
}
