/**
 * `@planning/store`: the document store port, its two adapters and `createStore`, which picks
 * one from configuration.
 */
import { createEmbeddedStore } from './embedded/embedded-store.js';
import { createMongoStore } from './mongo/mongo-store.js';
import type { DocumentStore } from './port.js';

export * from './port.js';
export { escapeRegExp } from './regex.js';
export { MAX_TRANSACTION_ATTEMPTS } from './retry-policy.js';
export {
  createEmbeddedStore,
  type EmbeddedCollection,
  type EmbeddedDocumentStore,
  type EmbeddedStoreOptions,
  type EmbeddedTransaction,
  type QueryExplain,
} from './embedded/embedded-store.js';
export { createMongoStore, type MongoStoreOptions } from './mongo/mongo-store.js';

export type StoreConfig =
  | { kind: 'embedded'; dataDir?: string; name?: string }
  | { kind: 'mongodb'; uri: string; database: string; appName?: string };

/** Opens the store the configuration names. */
export function createStore(config: StoreConfig): DocumentStore {
  switch (config.kind) {
    case 'embedded': {
      const options: { dataDir?: string; name?: string } = {};
      if (config.dataDir !== undefined) options.dataDir = config.dataDir;
      if (config.name !== undefined) options.name = config.name;
      return createEmbeddedStore(options);
    }
    case 'mongodb': {
      const options: { uri: string; database: string; appName?: string } = { uri: config.uri, database: config.database };
      if (config.appName !== undefined) options.appName = config.appName;
      return createMongoStore(options);
    }
    default:
      throw new TypeError(`unknown store kind '${(config as { kind?: unknown }).kind as string}'`);
  }
}
