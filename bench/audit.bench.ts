/**
 * The audit trail's list (`GET /api/admin/audit-events`, newest first, 50 a page, a cursor on the
 * event id) at 100,000 events, with the audit service's indexes and SQLite store as they are now
 * beside both as they were (the store at FORMER_COMMIT, loaded from git by bench/old-engine.ts,
 * with the former indexes `workspace_at`, `type_at`, `outcome_at`). Both stores on a file in the
 * same process, filled with the same events through the same repository code, measured
 * alternately: a workspace admin's first page and the page after a cursor halfway down, the same
 * for one event type, a system admin's pages (every workspace), the count of recent denials, and
 * the write rate of the fill (the indexes are the cost of each event written), also of this store
 * with the audit indexes of before `denied_at`.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createSqliteStore, type Collection, type DocumentStore, type IndexSpec } from '@planning/store';
import { AUDIT_EVENT_INDEXES, AuditEventRepository, type AuditEventRecord, type AuditScope } from '../services/audit/src/store/audit-events.js';
import { storeSourceAt } from './old-engine.js';
import { machine, measure, ms, type Bench, type Latency } from './support.js';

/** The last commit before the audit list's indexes and the store's walk of `_id` changed. */
const FORMER_COMMIT = '8f6c2320fd883c2d0e751826d16ce2740ba27e3f';
const EVENTS = Number(process.env.AUDIT_BENCH_EVENTS ?? 100_000);
const QUICK = process.env.AUDIT_BENCH_QUICK === '1';
const FORMER_INDEXES: IndexSpec[] = [
  { name: 'workspace_at', keys: { workspaceId: 1, at: -1 } },
  { name: 'outcome_at', keys: { outcome: 1, at: -1 } },
  { name: 'type_at', keys: { type: 1, at: -1 } },
];

type EventEnvelope = Parameters<AuditEventRepository['recordMany']>[0][number];

const TYPES = ['issues.task.updated', 'issues.task.status-changed', 'agents-claims.claim.created', 'auth.login', 'exports.export.created'];

function events(): EventEnvelope[] {
  const start = Date.UTC(2026, 0, 1);
  return Array.from({ length: EVENTS }, (_, i) => {
    const type = TYPES[i % 7 === 0 ? 3 : i % 2] as string;
    return {
      id: `evt_${(start + i).toString(32).toUpperCase().padStart(10, '0')}${String(i).padStart(16, '0')}`,
      type,
      subject: `planning.${type}`,
      source: 'issues',
      occurredAt: new Date(start + i).toISOString(),
      workspaceId: i % 10 === 0 ? 'ws_other' : 'ws_main',
      actor: { type: 'user', id: 'usr_1' },
      data: { subject: { type: 'task', id: `iss_${i % 500}` }, ...(i % 13 === 0 ? { outcome: 'denied' } : {}) },
    } as unknown as EventEnvelope;
  });
}

interface Side {
  /** `indexes-before`: this store with the audit indexes of before `denied_at` (the write rate only). */
  name: 'former' | 'now' | 'indexes-before';
  repo: AuditEventRepository;
  store: DocumentStore & { close(): Promise<void> };
  fillPerSecond: number;
}

async function open(name: Side['name'], dir: string): Promise<Side> {
  let store: DocumentStore & { close(): Promise<void> };
  let repo: AuditEventRepository;
  if (name === 'now') {
    store = createSqliteStore({ path: join(dir, 'now.sqlite'), keptResults: 0 });
    repo = await AuditEventRepository.open(store);
  } else if (name === 'indexes-before') {
    store = createSqliteStore({ path: join(dir, 'indexes-before.sqlite'), keptResults: 0 });
    const coll = store.collection<AuditEventRecord>('audit_events');
    await coll.createIndexes([...AUDIT_EVENT_INDEXES.filter((i) => i.name !== 'denied_at'), ...FORMER_INDEXES.filter((i) => i.name === 'outcome_at')]);
    repo = new (AuditEventRepository as unknown as new (c: Collection<AuditEventRecord>) => AuditEventRepository)(coll);
  } else {
    const former = (await import(pathToFileURL(join(storeSourceAt(FORMER_COMMIT), 'sqlite/sqlite-store.ts')).href)) as { createSqliteStore: typeof createSqliteStore };
    store = former.createSqliteStore({ path: join(dir, 'former.sqlite'), keptResults: 0 });
    const coll = store.collection<AuditEventRecord>('audit_events');
    await coll.createIndexes(FORMER_INDEXES);
    // The repository's code (its filters and sorts did not change), over the former indexes.
    repo = new (AuditEventRepository as unknown as new (c: Collection<AuditEventRecord>) => AuditEventRepository)(coll);
  }
  const all = events();
  const started = performance.now();
  for (let i = 0; i < all.length; i += 500) await repo.recordMany(all.slice(i, i + 500));
  return { name, repo, store, fillPerSecond: (all.length / (performance.now() - started)) * 1000 };
}

/** The run with the lowest p50 (each side is measured more than once, alternately). */
const best = (runs: Latency[]): Latency => runs.reduce((a, b) => (b.p50 < a.p50 ? b : a));

const ROWS: [string, AuditScope, string | undefined][] = [
  ["a workspace admin's list", { all: false, workspaceIds: ['ws_main'] }, undefined],
  ["a workspace admin's list of one type (`auth.login`)", { all: false, workspaceIds: ['ws_main'] }, 'auth.login'],
  ["a system admin's list (every workspace)", { all: true, workspaceIds: [] }, undefined],
];

async function pages(side: Side, scope: AuditScope, type: string | undefined): Promise<{ first: Latency; deep: Latency }> {
  const opts = { limit: 51, ...(type ? { type } : {}) };
  // The cursor halfway down the list, as a reader paging back through it would reach.
  const ids: string[] = [];
  let before: string | undefined;
  while (ids.length < EVENTS / 4) {
    const page = await side.repo.list(scope, { ...opts, ...(before ? { before } : {}), limit: 1000 });
    if (page.length === 0) break;
    ids.push(...page.map((r) => r._id));
    before = page.at(-1)?._id;
  }
  const cursor = ids[Math.floor(ids.length / 2)] as string;
  const iterations = QUICK ? 20 : 100;
  const first = await measure(() => side.repo.list(scope, opts), { iterations, warmup: 3, budgetMs: 20_000 });
  const deep = await measure(() => side.repo.list(scope, { ...opts, before: cursor }), { iterations, warmup: 3, budgetMs: 20_000 });
  return { first, deep };
}

const bench: Bench = {
  name: 'audit',
  async run(log) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-audit-'));
    try {
      const on = machine();
      log(`filling two stores with ${EVENTS} events each`);
      const former = await open('former', dir);
      const now = await open('now', dir);
      // The write rate of this store with the indexes of before (every event in `outcome_at`), beside
      // now's: alternately, twice each (now's first fill is the one above), each in a fresh file.
      const fills = { now: [now.fillPerSecond], 'indexes-before': [] as number[] };
      for (const [i, name] of (['indexes-before', 'now', 'indexes-before'] as const).entries()) {
        const sub = join(dir, `fill-${i}`);
        mkdirSync(sub);
        const side = await open(name, sub);
        await side.store.close();
        fills[name].push(side.fillPerSecond);
      }
      const nowFill = Math.max(...fills.now);
      const beforeFill = Math.max(...fills['indexes-before']);
      log(`fill: former ${former.fillPerSecond.toFixed(0)}/s, now ${fills.now.map((f) => f.toFixed(0)).join(' and ')}/s, this store with the indexes of before ${fills['indexes-before'].map((f) => f.toFixed(0)).join(' and ')}/s`);
      const lines: string[] = [];
      for (const [label, scope, type] of ROWS) {
        // Alternately, twice each; the better run of each side is shown.
        const runs = { former: [] as { first: Latency; deep: Latency }[], now: [] as { first: Latency; deep: Latency }[] };
        for (let round = 0; round < 2; round++) {
          for (const [name, side] of [['former', former], ['now', now]] as const) runs[name].push(await pages(side, scope, type));
        }
        const f = { first: best(runs.former.map((r) => r.first)), deep: best(runs.former.map((r) => r.deep)) };
        const n = { first: best(runs.now.map((r) => r.first)), deep: best(runs.now.map((r) => r.deep)) };
        log(`${label}: first page ${ms(f.first.p50)} -> ${ms(n.first.p50)}, after a cursor ${ms(f.deep.p50)} -> ${ms(n.deep.p50)}`);
        lines.push(
          `| ${label} | ${ms(f.first.p50)} / ${ms(f.first.p99)} | ${ms(n.first.p50)} / ${ms(n.first.p99)} | ${ms(f.deep.p50)} / ${ms(f.deep.p99)} | ${ms(n.deep.p50)} / ${ms(n.deep.p99)} |`,
        );
      }
      // The count of recent denials (the audit summary's): the last tenth of the events.
      const since = new Date(Date.UTC(2026, 0, 1) + Math.floor(EVENTS * 0.9));
      const denials: string[] = [];
      for (const [label, scope] of [["a workspace admin's", ROWS[0]![1]], ["a system admin's", ROWS[2]![1]]] as const) {
        const runs = { former: [] as Latency[], now: [] as Latency[] };
        const counted = { former: -1, now: -1 };
        for (let round = 0; round < 2; round++) {
          for (const [name, side] of [['former', former], ['now', now]] as const) {
            counted[name] = await side.repo.countDeniedSince(scope, since);
            runs[name].push(await measure(() => side.repo.countDeniedSince(scope, since), { iterations: QUICK ? 20 : 100, warmup: 3, budgetMs: 20_000 }));
          }
        }
        if (counted.former !== counted.now) throw new Error(`denied counts differ: ${counted.former} against ${counted.now}`);
        const f = best(runs.former);
        const n = best(runs.now);
        log(`${label} count of recent denials (${counted.now}): ${ms(f.p50)} -> ${ms(n.p50)}`);
        denials.push(`${label} (${counted.now.toLocaleString('en')} denials) former ${ms(f.p50)} / ${ms(f.p99)}, now ${ms(n.p50)} / ${ms(n.p99)}`);
      }
      await former.store.close();
      await now.store.close();
      if (QUICK) {
        log(`quick run:\n${lines.join('\n')}`);
        return null;
      }
      return [
        '## Audit trail: the list at 100,000 events',
        '',
        `${on}. ${EVENTS.toLocaleString('en')} audit events (90 % in one workspace, five types) in a SQLite file each, written through the audit repository ` +
          `in batches of 500; the list as \`GET /api/admin/audit-events\` reads it: newest event id first, a page of 50 (51 read, to know whether a next page exists). ` +
          `**Former**: the store at \`${FORMER_COMMIT.slice(0, 7)}\` (bench/old-engine.ts loads it from git) with the indexes the audit service had then, ` +
          '`workspace_at` {workspaceId, at}, `type_at` {type, at} and `outcome_at` {outcome, at}: they narrowed a workspace admin\'s list but not its order, so each page ' +
          'read the sort key of every event of the workspace and sorted them, and a system admin\'s list sorted every event. ' +
          '**Now**: `workspace_id` {workspaceId, _id}, `type_id` {type, _id} and `denied_at` {outcome, at}, partial: the denied events alone, for the count of recent denials ' +
          '(an allowed event, most of them, has no entry in it; the replaced indexes are dropped when the audit service opens its store, `Collection.dropIndexes`), and the SQLite store walks its `_id` index for a query sorted by `_id` alone that no index serves, ' +
          'starting at a string range on `_id` (a cursor). A page reads its own rows. Each cell is p50 / p99, each side measured twice, alternately, the better run shown.',
        '',
        '| list | first page, former | first page, now | page after a cursor halfway, former | page after a cursor halfway, now |',
        '|---|---:|---:|---:|---:|',
        ...lines,
        '',
        `The count of recent denials (the audit summary's; here since the last tenth of the events), p50 / p99: ${denials.join('; ')}.`,
        '',
        `Writing the events (in batches of 500, one after another): former ${former.fillPerSecond.toFixed(0)} events/s, now ${nowFill.toFixed(0)} events/s; ` +
          `this store with the audit indexes of before \`denied_at\` (\`outcome_at\` {outcome, at} over every event: three index entries per event, against two now, three for a denied one) ${beforeFill.toFixed(0)} events/s (the better of two, alternated with now's).`,
      ].join('\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default bench;
