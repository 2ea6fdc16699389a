/**
 * One engine in a process of its own, for `bench/store.bench.ts`: memory and start-up are only
 * meaningful in a fresh process. Prints one JSON line.
 *
 *   node --expose-gc --import tsx bench/store-process.ts <old|new> fill <dir> <tasks> <writes>
 *   node --expose-gc --import tsx bench/store-process.ts <old|new> start <dir>
 *
 * `fill`: opens the store on disk (the old engine with its snapshot and journal, SQLite with its
 * file), loads `tasks` tasks through the issues repository's indexes, then makes `writes` task
 * updates (each a transaction: the task, an activity record, an event) from 64 concurrent writers;
 * RSS after garbage collection (once settled, see `rssMiB`) after each phase, the write rate, and
 * the event loop's delay while writing. `start`: opens the same folder and runs the first search; how long that took.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { join } from 'node:path';
import { createPlanningHarness } from '@planning/issues/testing/planning-harness';
import { createSearchFixture } from '@planning/issues/testing/search-fixture';
import { createSqliteStore, type DocumentStore, type EmbeddedDocumentStore } from '@planning/store';
import { asBefore, loadOldEngine } from './old-engine.js';

const [engine, phase, dir, tasksArg, writesArg] = process.argv.slice(2);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
/**
 * RSS after garbage collection, once it has settled: V8 returns the pages a collection freed on
 * a background thread, so RSS read at once still counts them (measured: up to 70 MiB more after
 * the updates, varying with where the young generation stood; gone 50 ms later). Read every
 * 50 ms until it stops falling (at most 2 s).
 */
const rssMiB = async (): Promise<number> => {
  gc();
  gc();
  let rss = process.memoryUsage().rss;
  for (let i = 0; i < 40; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = process.memoryUsage().rss;
    const settled = now > rss - 2 ** 20;
    rss = Math.min(rss, now);
    if (settled) break;
  }
  return rss / 2 ** 20;
};

async function open(): Promise<DocumentStore & { close(): Promise<void> }> {
  if (engine === 'old') {
    const { createEmbeddedStore } = await loadOldEngine();
    return asBefore(createEmbeddedStore({ dataDir: join(dir as string, 'issues'), name: 'issues' }));
  }
  return createSqliteStore({ path: join(dir as string, 'issues', 'issues.sqlite') });
}

async function fill(): Promise<Record<string, unknown>> {
  const store = await open();
  const harness = await createPlanningHarness({ store: store as unknown as EmbeddedDocumentStore });
  const workspaceId = await harness.workspace({ ownerId: 'usr_bench', planId: 'enterprise' });
  writeFileSync(join(dir as string, 'workspace'), workspaceId);
  const started = performance.now();
  const f = await createSearchFixture({ tasks: Number(tasksArg), store: store as unknown as EmbeddedDocumentStore, workspaceId });
  const loadSeconds = (performance.now() - started) / 1000;
  const afterLoad = await rssMiB();
  const ids = (await f.repository.search({ scope: { all: false, ids: [workspaceId] }, sort: 'priority', direction: 'desc' }, 1000)).tasks.map((t) => t._id);
  const writes = Number(writesArg);
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  let next = 0;
  const writeStarted = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async (_, w) => {
      for (let n = next++; n < writes; n = next++) {
        const id = ids[(n * 64 + w) % ids.length] as string;
        await f.repository.update(id, { priority: n % 2 ? 'low' : 'high', title: `Renamed ${n}` }, { actor: { type: 'system', id: 'bench' }, now: new Date(), moveActor: 'system' });
      }
    }),
  );
  const writeSeconds = (performance.now() - writeStarted) / 1000;
  lag.disable();
  const afterWrites = await rssMiB();
  const heap = process.memoryUsage().heapUsed / 2 ** 20;
  await harness.close().catch(() => undefined);
  await store.close().catch(() => undefined);
  return {
    loadSeconds,
    rssAfterLoad: afterLoad,
    rssAfterWrites: afterWrites,
    heapAfterWrites: heap,
    writesPerSecond: writes / writeSeconds,
    lagP50: lag.percentile(50) / 1e6,
    lagP99: lag.percentile(99) / 1e6,
    lagMax: lag.max / 1e6,
  };
}

async function start(): Promise<Record<string, unknown>> {
  const workspaceId = readFileSync(join(dir as string, 'workspace'), 'utf8');
  const t0 = performance.now();
  const store = await open();
  // What a service does at start: open its store, make sure of its indexes, answer a first page.
  const harness = await createPlanningHarness({ store: store as unknown as EmbeddedDocumentStore });
  const tasks = store.collection('tasks');
  const first = await tasks.find({ workspaceId }, { sort: { 'sortKeys.priority': -1 }, limit: 51, projection: { searchText: 0 } });
  const ms = performance.now() - t0;
  const rss = await rssMiB();
  await harness.close().catch(() => undefined);
  await store.close().catch(() => undefined);
  return { startMs: ms, found: first.length, rssAfterStart: rss };
}

const result = phase === 'fill' ? await fill() : await start();
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
