/**
 * The former embedded engine, for benchmarks that measure it beside the SQLite store in the same
 * run. Its source is taken from git at a pinned commit (the last one before SQLite) into
 * `libs/store/.old-engine/<commit>/` (git-ignored; inside libs/store so `mingo` resolves), and
 * loaded from there through tsx. Needs the repository's history (`git`).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { DocumentStore, Filter, FindOptions, IndexSpec } from '@planning/store';
import { ROOT } from '../test/support/service-process.js';

/** main before the SQLite adapter: `libs/store/src/embedded` is the engine the issue replaces. */
export const OLD_ENGINE_COMMIT = '5693c1d07f4bf47f7aeaf2d596917e13dae4e335';

export interface OldEngine {
  createEmbeddedStore(options?: { dataDir?: string; name?: string }): DocumentStore & { close(): Promise<void> };
}

/**
 * `libs/store/src` as it was at `commit`, in `libs/store/.old-engine/<commit>/src` (git-ignored;
 * inside libs/store so its dependencies resolve): for benchmarks that measure a former version of
 * the store beside the current one. Needs the repository's history (`git`).
 */
export function storeSourceAt(commit: string): string {
  const dir = join(ROOT, 'libs/store/.old-engine', commit);
  if (!existsSync(join(dir, 'src/index.ts'))) {
    const tmp = `${dir}.partial`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    execFileSync('sh', ['-c', `git archive ${commit} libs/store/src | tar -x -C "${tmp}"`], { cwd: ROOT });
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(tmp, 'libs/store/src'), join(tmp, 'src'));
    renameSync(tmp, dir);
  }
  return join(dir, 'src');
}

export async function loadOldEngine(): Promise<OldEngine> {
  return (await import(pathToFileURL(join(storeSourceAt(OLD_ENGINE_COMMIT), 'embedded/embedded-store.ts')).href)) as OldEngine;
}

/**
 * The old engine as the issues service used it: the substring index was then two key-scanned
 * indexes, and a text search in priority order named `searchText` as a second sort key so the
 * priority walk could test it on index keys (what `searchQuery` did before SQLite).
 */
export function asBefore<S extends DocumentStore>(store: S): S {
  const OLD_TEXT_INDEXES: IndexSpec[] = [
    { name: 'ws_search', keys: { workspaceId: 1, _id: 1, searchText: 1 } },
    { name: 'ws_priority_search', keys: { workspaceId: 1, 'sortKeys.priority': 1, searchText: 1 } },
  ];
  return new Proxy(store, {
    get(target, prop) {
      if (prop !== 'collection') {
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      }
      return (name: string) => {
        const coll = target.collection(name);
        return new Proxy(coll, {
          get(c, p) {
            if (p === 'createIndexes') {
              return (specs: IndexSpec[]) => c.createIndexes(specs.flatMap((s) => (s.substring ? OLD_TEXT_INDEXES : [s])));
            }
            if (p === 'find' || p === 'findOne') {
              const read = (p === 'find' ? c.find.bind(c) : c.findOne.bind(c)) as (filter: Filter, options?: FindOptions) => Promise<unknown>;
              return (filter: Filter, given?: FindOptions) => {
                // The old engine had no readonly reads: it copied every document for every caller.
                const { readonly: _readonly, ...options } = given ?? {};
                const sort = options.sort;
                const keys = sort ? Object.keys(sort) : [];
                if (p === 'find' && filter.searchText !== undefined && keys.length === 1 && keys[0] === 'sortKeys.priority') {
                  return read(filter, { ...options, sort: { ...sort, searchText: sort!['sortKeys.priority']! } });
                }
                return read(filter, options);
              };
            }
            const v = Reflect.get(c, p) as unknown;
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(c) : v;
          },
        });
      };
    },
  });
}
