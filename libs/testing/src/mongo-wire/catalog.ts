/**
 * Which MongoDB namespaces (database + collection) exist, where each one lives in the embedded
 * store, and its indexes. All databases share one embedded store (so one transaction can span
 * them, as in MongoDB): collection `c` of database `d` is the embedded collection `d.c`.
 *
^ * The embedded store cannot drop a collection's indexes, so `drop` moves the namespace to a
 * fresh embedded collection (`d.c` + U+0001 + generation; control characters are refused in
 * names, so this never collides) and empties the old one. The catalog itself is a collection of
 * the store (it persists with `dataDir`); index specs are kept as Extended JSON because stored
 * field names cannot start with `$` and partial filter expressions are full of them.
 */
import { EJSON, type Document } from 'bson';
import type { Collection, EmbeddedDocumentStore, IndexSpec, StoredDocument } from '@planning/store';
import { CommandError } from './errors.js';

const CATALOG_COLLECTION = '__mongo_wire_catalog';
const GENERATION_SEPARATOR = '\u0001';
/** The embedded store's limit on collection names, less room for a generation suffix. */
const MAX_NAMESPACE_LENGTH = 180;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const INVALID_DB_CHARS = /[/\\. "$*<>:|?\u0000-\u001f]/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL_CHARS = /[\u0000-\u001f]/;

interface Entry {
  db: string;
  coll: string;
  physical: string;
  generation: number;
  dropped: boolean;
  indexes: IndexSpec[];
}

interface CatalogRecord extends StoredDocument {
  _id: string;
  db: string;
  coll: string;
  physical: string;
  generation: number;
  dropped: boolean;
  indexes: string;
}

export function assertDatabaseName(db: unknown): asserts db is string {
  if (typeof db !== 'string' || db === '' || db.length > 63 || INVALID_DB_CHARS.test(db)) {
    throw new CommandError('InvalidNamespace', `Invalid database name: '${String(db)}'`);
  }
}

export function assertCollectionName(db: string, coll: unknown): asserts coll is string {
  if (typeof coll !== 'string' || coll === '') throw new CommandError('InvalidNamespace', `Invalid collection name: '${String(coll)}'`);
  if (coll.includes('$') || CONTROL_CHARS.test(coll) || coll.startsWith('system.')) {
    throw new CommandError('InvalidNamespace', `Invalid collection name: '${coll}'`);
  }
  if (db.length + 1 + coll.length > MAX_NAMESPACE_LENGTH) {
    throw new CommandError('InvalidNamespace', `namespace ${db}.${coll} is longer than ${MAX_NAMESPACE_LENGTH} characters`);
  }
}

export class Catalog {
  private readonly entries = new Map<string, Entry>();
  private readonly records: Collection<CatalogRecord>;

  private constructor(store: EmbeddedDocumentStore) {
    this.records = store.collection<CatalogRecord>(CATALOG_COLLECTION);
  }

  static async open(store: EmbeddedDocumentStore): Promise<Catalog> {
    const catalog = new Catalog(store);
    for (const rec of await catalog.records.find({})) {
      catalog.entries.set(rec._id, {
        db: rec.db,
        coll: rec.coll,
        physical: rec.physical,
        generation: rec.generation,
        dropped: rec.dropped,
        indexes: EJSON.parse(rec.indexes) as IndexSpec[],
      });
    }
    return catalog;
  }

  /** The embedded collection holding `db.coll` (whether or not it exists yet). */
  physical(db: string, coll: string): string {
    return this.entries.get(`${db}.${coll}`)?.physical ?? `${db}.${coll}`;
  }

  exists(db: string, coll: string): boolean {
    const entry = this.entries.get(`${db}.${coll}`);
    return entry !== undefined && !entry.dropped;
  }

  /** Secondary indexes (not `_id_`) of an existing collection. */
  indexes(db: string, coll: string): readonly IndexSpec[] {
    const entry = this.entries.get(`${db}.${coll}`);
    return entry && !entry.dropped ? entry.indexes : [];
  }

  /** Records that the collection exists (MongoDB creates collections on first write). */
  async ensure(db: string, coll: string): Promise<boolean> {
    const key = `${db}.${coll}`;
    const entry = this.entries.get(key);
    if (entry && !entry.dropped) return false;
    const next: Entry = entry
      ? { ...entry, dropped: false, indexes: [] }
      : { db, coll, physical: key, generation: 0, dropped: false, indexes: [] };
    this.entries.set(key, next);
    await this.persist(next);
    return true;
  }

  async addIndexes(db: string, coll: string, specs: readonly IndexSpec[]): Promise<void> {
    const entry = this.entries.get(`${db}.${coll}`);
    if (!entry || entry.dropped) throw new Error(`catalog: ${db}.${coll} does not exist`);
    entry.indexes.push(...specs);
    await this.persist(entry);
  }

  async removeIndex(db: string, coll: string, name: string): Promise<void> {
    const entry = this.entries.get(`${db}.${coll}`);
    if (!entry || entry.dropped) throw new Error(`catalog: ${db}.${coll} does not exist`);
    entry.indexes = entry.indexes.filter((spec) => spec.name !== name);
    await this.persist(entry);
  }

  /**
   * Drops the collection: the namespace moves to an empty embedded collection without indexes
   * first (so no write lands in the old one afterwards), then the old one is emptied. Returns the
   * number of indexes it had (with `_id_`), or undefined when it did not exist.
   */
  async drop(store: EmbeddedDocumentStore, db: string, coll: string): Promise<number | undefined> {
    const key = `${db}.${coll}`;
    const entry = this.entries.get(key);
    if (!entry || entry.dropped) return undefined;
    const old = entry.physical;
    const indexCount = entry.indexes.length + 1;
    const generation = entry.generation + 1;
    const next: Entry = { db, coll, physical: `${key}${GENERATION_SEPARATOR}${generation}`, generation, dropped: true, indexes: [] };
    this.entries.set(key, next);
    await this.persist(next);
    await store.collection(old).deleteMany({});
    return indexCount;
  }

  collections(db: string): string[] {
    return [...this.entries.values()].filter((e) => e.db === db && !e.dropped).map((e) => e.coll);
  }

  databases(): string[] {
    return [...new Set([...this.entries.values()].filter((e) => !e.dropped).map((e) => e.db))];
  }

  private async persist(entry: Entry): Promise<void> {
    const { db, coll, physical, generation, dropped } = entry;
    const indexes = EJSON.stringify(entry.indexes as unknown as Document[], { relaxed: false });
    await this.records.updateOne(
      { _id: `${db}.${coll}` },
      { $set: { db, coll, physical, generation, dropped, indexes } },
      { upsert: true },
    );
  }
}
