/**
 * File persistence: a snapshot (NDJSON, replaced atomically by write-to-temp + rename) plus an
 * append-only journal with one line per committed change set, written synchronously before the
 * operation resolves. On open the journal is replayed over the snapshot and compacted into it.
 *
 * Values are JSON with tags for what JSON cannot carry: `{"$date": ms}`, `{"$num": "NaN"}` and
 * `{"$re": [source, flags]}` (the latter only inside filters). Stored field names never start
 * with `$`, so a tag cannot be mistaken for a document.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { IndexSpec } from '../port.js';
import { isPlainObject } from '../document/values.js';

type Doc = Record<string, unknown>;

export type JournalOp =
  | { t: 'put'; c: string; d: Doc }
  | { t: 'del'; c: string; id: string }
  | { t: 'index'; c: string; spec: IndexSpec };

export interface LoadedCollection {
  indexes: Map<string, IndexSpec>;
  docs: Map<string, Doc>;
}

export interface LoadedState {
  seq: number;
  collections: Map<string, LoadedCollection>;
}

export interface SnapshotSource {
  name: string;
  indexes: IndexSpec[];
  docs: Iterable<Doc>;
}

const FORMAT = 'planning-store-snapshot';
const VERSION = 1;

export function encodeValue(value: unknown): unknown {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) return { $num: String(value) };
    return value;
  }
  if (value instanceof Date) return { $date: value.getTime() };
  if (value instanceof RegExp) return { $re: [value.source, value.flags] };
  if (Array.isArray(value)) return value.map(encodeValue);
  const out: Doc = {};
  for (const key of Object.keys(value)) out[key] = encodeValue((value as Doc)[key]);
  return out;
}

export function decodeValue(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(decodeValue);
  const obj = value as Doc;
  const keys = Object.keys(obj);
  if (keys.length === 1) {
    if (keys[0] === '$date' && typeof obj.$date === 'number') return new Date(obj.$date);
    if (keys[0] === '$num' && typeof obj.$num === 'string') return Number(obj.$num);
    if (keys[0] === '$re' && Array.isArray(obj.$re)) return new RegExp(String(obj.$re[0]), String(obj.$re[1]));
  }
  const out: Doc = {};
  for (const key of keys) out[key] = decodeValue(obj[key]);
  return out;
}

/** Names of open data files in this process: two stores on one journal would corrupt it. */
const openFiles = new Set<string>();

/** Splits a file into complete lines; `torn` is the unterminated tail, if any. */
function readLines(file: string): { lines: string[]; torn: boolean } {
  let buf: Buffer;
  try {
    buf = fs.readFileSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { lines: [], torn: false };
    throw err;
  }
  const lines: string[] = [];
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(10, start);
    if (nl === -1) break;
    lines.push(buf.toString('utf8', start, nl));
    start = nl + 1;
  }
  return { lines, torn: start < buf.length };
}

export class Persistence {
  private journalFd: number;
  private journalBytes = 0;
  private compactAt: number;
  private closed = false;

  private constructor(
    private readonly snapshotFile: string,
    private readonly journalFile: string,
    private readonly lockKey: string,
    private readonly compactAfterBytes: number,
  ) {
    this.journalFd = fs.openSync(journalFile, 'a');
    this.journalBytes = fs.fstatSync(this.journalFd).size;
    this.compactAt = compactAfterBytes;
  }

  /** Opens (creating if needed) the files of store `name` in `dir` and loads their state. */
  static open(dir: string, name: string, compactAfterBytes: number): { persistence: Persistence; loaded: LoadedState; replayed: number } {
    if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new TypeError(`store name '${name}' must use only letters, digits, '.', '_' and '-'`);
    fs.mkdirSync(dir, { recursive: true });
    const base = path.join(path.resolve(dir), name);
    const lockKey = base;
    if (openFiles.has(lockKey)) throw new Error(`embedded store '${base}' is already open in this process`);
    const snapshotFile = `${base}.snapshot`;
    const journalFile = `${base}.journal`;
    fs.rmSync(`${snapshotFile}.tmp`, { force: true });
    const loaded = readSnapshot(snapshotFile);
    const replayed = replayJournal(journalFile, loaded);
    openFiles.add(lockKey);
    try {
      return { persistence: new Persistence(snapshotFile, journalFile, lockKey, compactAfterBytes), loaded, replayed };
    } catch (err) {
      openFiles.delete(lockKey);
      throw err;
    }
  }

  get hasJournal(): boolean {
    return this.journalBytes > 0;
  }

  /** Appends one committed change set. Synchronous: the change is in the file before the caller resolves. */
  append(seq: number, ops: readonly JournalOp[]): void {
    if (this.closed) throw new Error('embedded store is closed');
    const encoded = ops.map((op) => {
      switch (op.t) {
        case 'put':
          return ['p', op.c, encodeValue(op.d)];
        case 'del':
          return ['d', op.c, op.id];
        case 'index':
          return ['i', op.c, encodeValue(op.spec)];
      }
    });
    const line = Buffer.from(`${JSON.stringify({ s: seq, o: encoded })}\n`, 'utf8');
    let off = 0;
    while (off < line.length) off += fs.writeSync(this.journalFd, line, off, line.length - off);
    this.journalBytes += line.length;
  }

  get shouldCompact(): boolean {
    return this.journalBytes >= this.compactAt;
  }

  /** After a failed snapshot: try again only once the journal has doubled. */
  deferCompaction(): void {
    this.compactAt = Math.max(this.compactAt, this.journalBytes) * 2;
  }

  /** Writes a full snapshot atomically, then empties the journal it supersedes. */
  writeSnapshot(seq: number, collections: Iterable<SnapshotSource>): void {
    const tmp = `${this.snapshotFile}.tmp`;
    const fd = fs.openSync(tmp, 'w');
    try {
      let chunk = '';
      const flush = (): void => {
        if (chunk === '') return;
        const buf = Buffer.from(chunk, 'utf8');
        let off = 0;
        while (off < buf.length) off += fs.writeSync(fd, buf, off, buf.length - off);
        chunk = '';
      };
      const push = (obj: unknown): void => {
        chunk += `${JSON.stringify(obj)}\n`;
        if (chunk.length > 1 << 20) flush();
      };
      push({ format: FORMAT, version: VERSION, seq });
      let count = 0;
      for (const c of collections) {
        push({ c: c.name, i: c.indexes.map(encodeValue) });
        for (const d of c.docs) {
          push({ c: c.name, d: encodeValue(d) });
          count++;
        }
      }
      push({ end: count });
      flush();
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.snapshotFile);
    syncDir(path.dirname(this.snapshotFile));
    // Journal lines are sequence-numbered, so a crash between the rename and this truncate only
    // leaves lines the next open skips.
    fs.ftruncateSync(this.journalFd, 0);
    this.journalBytes = 0;
    this.compactAt = this.compactAfterBytes;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      fs.fsyncSync(this.journalFd);
    } finally {
      fs.closeSync(this.journalFd);
      openFiles.delete(this.lockKey);
    }
  }
}

function syncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // Directory fsync is not supported everywhere; the rename itself is still atomic.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

function collectionOf(state: LoadedState, name: string): LoadedCollection {
  let c = state.collections.get(name);
  if (!c) {
    c = { indexes: new Map(), docs: new Map() };
    state.collections.set(name, c);
  }
  return c;
}

function readSnapshot(file: string): LoadedState {
  const state: LoadedState = { seq: 0, collections: new Map() };
  const { lines, torn } = readLines(file);
  if (lines.length === 0 && !torn) return state;
  const fail = (why: string): never => {
    throw new Error(`embedded store snapshot ${file} is unreadable (${why}); it is only ever replaced atomically, so the file was changed from outside`);
  };
  if (torn) fail('unterminated last line');
  let header: Doc;
  try {
    header = JSON.parse(lines[0] as string) as Doc;
  } catch {
    return fail('bad header');
  }
  if (header.format !== FORMAT || header.version !== VERSION || typeof header.seq !== 'number') fail('unknown format');
  state.seq = header.seq as number;
  let ended = false;
  for (let i = 1; i < lines.length; i++) {
    let rec: Doc;
    try {
      rec = JSON.parse(lines[i] as string) as Doc;
    } catch {
      return fail(`bad line ${i + 1}`);
    }
    if ('end' in rec) {
      ended = true;
      break;
    }
    const c = collectionOf(state, String(rec.c));
    if (Array.isArray(rec.i)) {
      for (const spec of rec.i) {
        const s = decodeValue(spec) as IndexSpec;
        c.indexes.set(s.name, s);
      }
    } else if (isPlainObject(rec.d)) {
      const d = decodeValue(rec.d) as Doc;
      c.docs.set(String(d._id), d);
    } else {
      fail(`bad line ${i + 1}`);
    }
  }
  if (!ended) fail('missing end marker');
  return state;
}

/** Applies journal lines newer than the snapshot; returns how many were applied. */
function replayJournal(file: string, state: LoadedState): number {
  const { lines } = readLines(file);
  // An unterminated tail is a write cut short by a crash: that change never resolved, drop it.
  let applied = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line === '') continue;
    let entry: { s: number; o: unknown[][] };
    try {
      entry = JSON.parse(line) as { s: number; o: unknown[][] };
      if (typeof entry.s !== 'number' || !Array.isArray(entry.o)) throw new Error('shape');
    } catch {
      if (i === lines.length - 1) break;
      throw new Error(`embedded store journal ${file} is corrupt at line ${i + 1}`);
    }
    if (entry.s <= state.seq) continue;
    for (const op of entry.o) {
      const [t, c, payload] = op as [string, string, unknown];
      const coll = collectionOf(state, c);
      if (t === 'p') {
        const d = decodeValue(payload) as Doc;
        coll.docs.set(String(d._id), d);
      } else if (t === 'd') {
        coll.docs.delete(String(payload));
      } else if (t === 'i') {
        const spec = decodeValue(payload) as IndexSpec;
        coll.indexes.set(spec.name, spec);
      } else {
        throw new Error(`embedded store journal ${file}: unknown entry '${t}' at line ${i + 1}`);
      }
    }
    state.seq = entry.s;
    applied++;
  }
  return applied;
}
