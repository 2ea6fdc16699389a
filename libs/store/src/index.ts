/**
 * `@planning/store`: the document store port, the embedded adapter on SQLite and `createStore`,
 * which picks an adapter from configuration. The MongoDB adapter (and the driver) is loaded only
 * when configured; import `@planning/store/mongo` to use it directly.
 */
import { createSqliteStore, MEMORY, type SqliteDocumentStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';
import type { DocumentStore } from './port.js';
import type { StoreWarn } from './on-committed.js';

export * from './port.js';
export { deepFreeze } from './document/values.js';
export { escapeRegExp } from './regex.js';
export { MAX_TRANSACTION_ATTEMPTS } from './retry-policy.js';
export {
  createSqliteStore,
  MEMORY,
  type QueryExplain,
  type SqliteCollection,
  type SqliteDocumentStore,
  type SqliteStoreOptions,
  type StoreMemoryUse,
  type StoreTransaction,
} from './sqlite/sqlite-store.js';
export type { StoreWarn } from './on-committed.js';
export { importLegacyStore, type LegacyImportResult } from './sqlite/legacy-import.js';
export type { SqliteCollection as EmbeddedCollection, SqliteDocumentStore as EmbeddedDocumentStore, StoreTransaction as EmbeddedTransaction } from './sqlite/sqlite-store.js';

export type EmbeddedStoreOptions = Partial<SqliteStoreOptions>;

/** The embedded store: SQLite in the file `path`, or in memory (the default, for tests). */
export function createEmbeddedStore(options: EmbeddedStoreOptions = {}): SqliteDocumentStore {
  return createSqliteStore({ ...options, path: options.path ?? MEMORY });
}

export type StoreConfig =
  | {
      kind: 'embedded';
      /** SQLite file, or `:memory:`. */
      path: string;
      /** Told what opening the file changed in it (a format upgrade). */
      log?: (details: Record<string, unknown>, message: string) => void;
      /** Told each flush of the write-ahead log: seconds it took, commits it made durable. */
      onFlush?: (seconds: number, commits: number) => void;
      /** Told what failed in the store's housekeeping (default: process.emitWarning). */
      warn?: StoreWarn;
    }
  | { kind: 'mongodb'; uri: string; database: string; appName?: string; warn?: StoreWarn };

/** Opens the store the configuration names. */
export async function createStore(config: StoreConfig): Promise<DocumentStore> {
  switch (config.kind) {
    case 'embedded':
      return createSqliteStore({
        path: config.path,
        ...(config.log ? { log: config.log } : {}),
        ...(config.warn ? { warn: config.warn } : {}),
        ...(config.onFlush ? { onFlush: config.onFlush } : {}),
      });
    case 'mongodb': {
      // Loaded here only: a process on the embedded store never loads the MongoDB driver.
      const { createMongoStore } = await import('./mongo/mongo-store.js');
      const options: { uri: string; database: string; appName?: string; warn?: StoreWarn } = { uri: config.uri, database: config.database };
      if (config.appName !== undefined) options.appName = config.appName;
      if (config.warn !== undefined) options.warn = config.warn;
      return createMongoStore(options);
    }
    default:
      throw new TypeError(`unknown store kind '${(config as { kind?: unknown }).kind as string}'`);
  }
}
