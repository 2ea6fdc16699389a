/**
 * Imports a store folder of the former embedded engine (`<name>.snapshot`, NDJSON, plus
 * `<name>.journal`, one JSON line per committed change set) into an SQLite file, once: the
 * folder's old files are then moved into a backup folder beside the new file and never read
 * again. The import is all or nothing: it builds the database under a temporary name and
 * renames it into place only when complete; a crash part-way leaves the old files untouched and
 * the next start imports again.
 *
 * Reading follows the old engine's rules: journal lines newer than the snapshot (by sequence
 * number) replay over it; an unterminated or unreadable last line is a write cut short by a crash
 * and is dropped; a bad line before the end is corruption and stops the import.
 */
import fs from 'node:fs';
import path from 'node:path';
import { reviveTags } from '../document/codec.js';
import { isPlainObject } from '../document/values.js';
import type { IndexSpec, StoredDocument } from '../port.js';
import { syncDirectory } from './durability.js';
import { createSqliteStore } from './sqlite-store.js';

type Doc = Record<string, unknown>;

interface LegacyCollection {
  indexes: Map<string, IndexSpec>;
  docs: Map<string, Doc>;
}

const SNAPSHOT_FORMAT = 'planning-store-snapshot';

function lines(file: string): { lines: string[]; torn: boolean } {
  let buf: Buffer;
  try {
    buf = fs.readFileSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { lines: [], torn: false };
    throw err;
  }
  const out: string[] = [];
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(10, start);
    if (nl === -1) break;
    out.push(buf.toString('utf8', start, nl));
    start = nl + 1;
  }
  return { lines: out, torn: start < buf.length };
}

/** The collections of an old-format store folder, as the old engine would have loaded them. */
export function readLegacyStore(dir: string, name: string): Map<string, LegacyCollection> {
  const collections = new Map<string, LegacyCollection>();
  const coll = (c: string): LegacyCollection => {
    let got = collections.get(c);
    if (!got) {
      got = { indexes: new Map(), docs: new Map() };
      collections.set(c, got);
    }
    return got;
  };
  const snapshotFile = path.join(dir, `${name}.snapshot`);
  const journalFile = path.join(dir, `${name}.journal`);
  let seq = 0;
  const snapshot = lines(snapshotFile);
  if (snapshot.lines.length > 0 || snapshot.torn) {
    const fail = (why: string): never => {
      throw new Error(`old store snapshot ${snapshotFile} is unreadable (${why}); it is left as it is`);
    };
    if (snapshot.torn) fail('unterminated last line');
    let header: Doc;
    try {
      header = JSON.parse(snapshot.lines[0] as string) as Doc;
    } catch {
      return fail('bad header');
    }
    if (header.format !== SNAPSHOT_FORMAT || header.version !== 1 || typeof header.seq !== 'number') fail('unknown format');
    seq = header.seq as number;
    let ended = false;
    for (let i = 1; i < snapshot.lines.length; i++) {
      let rec: Doc;
      try {
        rec = JSON.parse(snapshot.lines[i] as string) as Doc;
      } catch {
        return fail(`bad line ${i + 1}`);
      }
      if ('end' in rec) {
        ended = true;
        break;
      }
      const c = coll(String(rec.c));
      if (Array.isArray(rec.i)) {
        for (const spec of rec.i) {
          const s = reviveTags(spec) as IndexSpec;
          c.indexes.set(s.name, s);
        }
      } else if (isPlainObject(rec.d)) {
        const d = reviveTags(rec.d) as Doc;
        c.docs.set(String(d._id), d);
      } else {
        fail(`bad line ${i + 1}`);
      }
    }
    if (!ended) fail('missing end marker');
  }
  const journal = lines(journalFile);
  for (let i = 0; i < journal.lines.length; i++) {
    const line = journal.lines[i] as string;
    if (line === '') continue;
    let entry: { s: number; o: unknown[][] };
    try {
      entry = JSON.parse(line) as { s: number; o: unknown[][] };
      if (typeof entry.s !== 'number' || !Array.isArray(entry.o)) throw new Error('shape');
    } catch {
      if (i === journal.lines.length - 1) break;
      throw new Error(`old store journal ${journalFile} is corrupt at line ${i + 1}; it is left as it is`);
    }
    if (entry.s <= seq) continue;
    for (const op of entry.o) {
      const [t, c, payload] = op as [string, string, unknown];
      const target = coll(c);
      if (t === 'p') {
        const d = reviveTags(payload) as Doc;
        target.docs.set(String(d._id), d);
      } else if (t === 'd') {
        target.docs.delete(String(payload));
      } else if (t === 'i') {
        const spec = reviveTags(payload) as IndexSpec;
        target.indexes.set(spec.name, spec);
      } else {
        throw new Error(`old store journal ${journalFile}: unknown entry '${t}' at line ${i + 1}`);
      }
    }
    seq = entry.s;
  }
  return collections;
}

export interface LegacyImportResult {
  /** Old files were found and imported now. */
  imported: boolean;
  collections: number;
  documents: number;
  /** Where the old files were moved. */
  backup?: string;
}

const legacyFiles = (dir: string, name: string): string[] =>
  [`${name}.snapshot`, `${name}.journal`].map((f) => path.join(dir, f)).filter((f) => fs.existsSync(f));

/**
 * Imports `<dir>/<name>.snapshot|.journal` into the SQLite file `target`, if those files exist
 * and `target` does not yet; then moves them into `<dir>/pre-sqlite-backup-<time>/`.
 */
export async function importLegacyStore(options: { dir: string; name: string; target: string; now?: Date }): Promise<LegacyImportResult> {
  const { dir, name, target } = options;
  const old = legacyFiles(dir, name);
  if (old.length === 0) return { imported: false, collections: 0, documents: 0 };
  const stamp = (options.now ?? new Date()).toISOString().replace(/[:.]/g, '-');
  const backup = path.join(dir, `pre-sqlite-backup-${stamp}`);
  const moveAside = (): void => {
    fs.mkdirSync(backup, { recursive: true });
    for (const file of old) fs.renameSync(file, path.join(backup, path.basename(file)));
    syncDirectory(backup);
    syncDirectory(dir);
  };
  if (fs.existsSync(target)) {
    // Imported before, and stopped before moving the old files aside.
    moveAside();
    return { imported: false, collections: 0, documents: 0, backup };
  }
  const collections = readLegacyStore(dir, name);
  const partial = `${target}.importing`;
  for (const f of [partial, `${partial}-wal`, `${partial}-shm`]) fs.rmSync(f, { force: true });
  const store = createSqliteStore({ path: partial });
  let documents = 0;
  try {
    for (const [collName, c] of collections) {
      const handle = store.collection(collName);
      const docs = [...c.docs.values()] as StoredDocument[];
      for (let i = 0; i < docs.length; i += 1_000) await handle.insertMany(docs.slice(i, i + 1_000));
      // After the documents: each index is built in one pass.
      await handle.createIndexes([...c.indexes.values()]);
      documents += docs.length;
    }
  } finally {
    // Closing checkpoints the write-ahead log into the file and removes it.
    await store.close();
  }
  fs.renameSync(partial, target);
  syncDirectory(path.dirname(target));
  moveAside();
  return { imported: true, collections: collections.size, documents, backup };
}
