/**
 * Task search (`GET /api/issues`) at 100,000 tasks in one workspace: every documented filter,
 * text, sorts and a deep page, with the repository's indexes and search fields, against a
 * baseline measured in the same run over the same tasks: no indexes, and text matched the obvious
 * way (a case-insensitive regular expression over title and description).
 */
import { createPlanningHarness } from '@planning/issues/testing/planning-harness';
import {
  createEmbeddedStore,
  createSearchFixture,
  naiveQuery,
  searchQuery,
  type SearchFixture,
  type TaskSearch,
} from '@planning/issues/testing/search-fixture';
import { machine, measure, ms, type Bench, type Latency } from './support.js';

/** SEARCH_BENCH_QUICK=1: 10,000 tasks, docs/benchmarks.md left as it was (a check that the benchmark runs). */
const QUICK = process.env.SEARCH_BENCH_QUICK === '1';
const TASKS = QUICK ? 10_000 : 100_000;
const OTHER = TASKS / 5;
const LIMIT = 50;

interface Case {
  label: string;
  search: (f: SearchFixture) => TaskSearch;
}

const scope = (f: SearchFixture) => ({ all: false as const, ids: [f.workspaceId] });
const by = (over: Partial<TaskSearch>) => (f: SearchFixture): TaskSearch => ({ scope: scope(f), sort: 'priority', direction: 'desc', ...over });

/** The sort key after which page 20 starts (found once, used by both runs). */
let deepPageAfter: string | undefined;

const CASES: Case[] = [
  { label: 'first page, default sort (priority)', search: by({}) },
  { label: '`status=ready`', search: by({ statuses: ['ready'] }) },
  { label: '`status=ready,in-progress,in-review`', search: by({ statuses: ['ready', 'in-progress', 'in-review'] }) },
  { label: '`priority=urgent,high`', search: by({ priorities: ['urgent', 'high'] }) },
  { label: '`projectId` + `status=ready`', search: (f) => by({ projectId: f.projectIds[3], statuses: ['ready'] })(f) },
  { label: '`milestoneId`', search: (f) => by({ milestoneId: f.milestoneIds[5] })(f) },
  { label: '`label=launch-blocker` (1 %)', search: by({ labels: ['launch-blocker'] }) },
  { label: '`label=feature:search` (20 %)', search: by({ labels: ['feature:search'] }) },
  { label: '`assignedAgentId`', search: (f) => by({ assignedAgentId: f.agentIds[2] })(f) },
  { label: '`dependencyState=blocked`', search: by({ dependencyState: 'blocked' }) },
  { label: '`q`: rare word (10 tasks)', search: (f) => by({ q: f.rareWord })(f) },
  { label: '`q`: word in 2 % of tasks', search: (f) => by({ q: f.mediumWord })(f) },
  { label: '`q`: frequent word (30 %)', search: (f) => by({ q: f.commonWord })(f) },
  { label: '`q`: rare word + `status=ready`', search: (f) => by({ q: f.rareWord, statuses: ['ready'] })(f) },
  { label: '`q`: word in 2 % + `sort=title`', search: (f) => by({ q: f.mediumWord, sort: 'title', direction: 'asc' })(f) },
  { label: '`sort=title&direction=asc`', search: by({ sort: 'title', direction: 'asc' }) },
  { label: '`sort=dueDate&direction=asc`', search: by({ sort: 'dueDate', direction: 'asc' }) },
  { label: '`sort=updatedAt`', search: by({ sort: 'updatedAt' }) },
  { label: 'page 20 by cursor (priority)', search: (f) => by({ after: deepPageAfter })(f) },
  { label: '`projectId` + `label` + `sort=dueDate`', search: (f) => by({ projectId: f.projectIds[7], labels: ['backend'], sort: 'dueDate', direction: 'asc' })(f) },
];

interface Row {
  label: string;
  indexed: Latency;
  plan: string;
  naiveText?: Latency;
  baseline?: Latency;
}

async function find(f: SearchFixture, query: { filter: Record<string, unknown>; sort: Record<string, 1 | -1> }) {
  return f.tasks.find(query.filter, { sort: query.sort, limit: LIMIT + 1, projection: { searchText: 0 } });
}

const bench: Bench = {
  name: 'search',
  async run(log) {
    const rows: Row[] = [];
    const startedOn = machine();
    // Kept query results off: each call runs its query (a repeated query would otherwise be
    // answered from the rows it found, as the service answers a page read again).
    const store = createEmbeddedStore({ keptResults: 0 });
    const harness = await createPlanningHarness({ store });
    const workspaceId = await harness.workspace({ ownerId: 'usr_bench', planId: 'enterprise' });
    log(`building ${TASKS} tasks (+${OTHER} in another workspace) with indexes`);
    let t = performance.now();
    const f = await createSearchFixture({ tasks: TASKS, otherTasks: OTHER, store, workspaceId });
    const buildIndexed = performance.now() - t;

    // Page 20's start: walk 19 pages once.
    let after: string | undefined;
    for (let i = 0; i < 19; i++) {
      const page = await f.repository.search({ ...by({})(f), ...(after ? { after } : {}) }, LIMIT);
      after = page.tasks.at(-1)?.sortKeys.priority;
    }
    deepPageAfter = after;

    for (const c of CASES) {
      const search = c.search(f);
      const indexed = await measure(() => f.repository.search(search, LIMIT), { iterations: 300, warmup: 10 });
      const q = searchQuery(search);
      const explain = await f.tasks.explain(q.filter, { sort: q.sort, limit: LIMIT + 1 });
      const plan = `${explain.plan === 'IXSCAN' ? explain.index : explain.plan === 'FTS' ? `FTS on ${explain.index}` : explain.plan}: ${explain.docsExamined} docs${explain.inMemorySort ? ', sorted after reading' : ''}`;
      const row: Row = { label: c.label, indexed, plan };
      if (search.q !== undefined) {
        const naive = naiveQuery(search);
        row.naiveText = await measure(() => find(f, naive), { iterations: 30, warmup: 2, budgetMs: 4_000, minSamples: 5 });
      }
      rows.push(row);
      log(`${c.label}: p50 ${ms(indexed.p50)} p99 ${ms(indexed.p99)} (${plan})`);
    }

    // Through the issues service: search plus task health and protobuf encoding of a 50-task page.
    const admin = harness.admin;
    const service: [string, Latency][] = [];
    const requests: [string, { status?: string[]; labels?: string[]; q?: string; includeDependencyGraph?: boolean }][] = [
      ['first page, default sort', {}],
      ['`status=ready,in-review` + `label=feature:search`', { status: ['ready', 'in-review'], labels: ['feature:search'] }],
      ['`q`: rare word', { q: f.rareWord }],
      ['`includeDependencyGraph=true`', { includeDependencyGraph: true }],
    ];
    for (const [label, request] of requests) {
      const latency = await measure(() => harness.tasks.searchTasks({ workspaceId, limit: LIMIT, ...request }, admin), { iterations: 200, warmup: 10 });
      service.push([label, latency]);
      log(`service ${label}: p50 ${ms(latency.p50)} p99 ${ms(latency.p99)}`);
    }

    // Writes pay for the indexes: a task update (transaction, activity, event, 16 indexes).
    const ids = (await f.repository.search(by({})(f), 200)).tasks.map((task) => task._id);
    let n = 0;
    const update = (repo: SearchFixture['repository']) => () =>
      repo.update(ids[n++ % ids.length] as string, { priority: n % 2 ? 'low' : 'high', title: `Renamed ${n}` }, { actor: { type: 'system', id: 'bench' }, now: new Date(), moveActor: 'system' });
    const updateIndexed = await measure(update(f.repository), { iterations: 300, warmup: 10 });
    log(`update with indexes: p50 ${ms(updateIndexed.p50)}`);
    await harness.close();

    log('building the same tasks without indexes (baseline)');
    t = performance.now();
    const base = await createSearchFixture({ tasks: TASKS, otherTasks: OTHER, indexed: false, workspaceId });
    const buildBaseline = performance.now() - t;
    for (const [i, c] of CASES.entries()) {
      const naive = naiveQuery(c.search(base));
      const row = rows[i] as Row;
      row.baseline = await measure(() => find(base, naive), { iterations: 30, warmup: 2, budgetMs: 4_000, minSamples: 5 });
      log(`baseline ${c.label}: p50 ${ms(row.baseline.p50)}`);
    }
    const updateBaseline = await measure(update(base.repository), { iterations: 300, warmup: 10 });
    await base.close();

    const speedUp = (row: Row) => (row.baseline ? `${Math.round(row.baseline.p50 / row.indexed.p50)}×` : '');
    const section = [
      `## Task search at ${TASKS.toLocaleString('en')} tasks`,
      '',
      `${startedOn} at the start (${machine().split(', ').find((p) => p.startsWith('load average')) ?? ''} at the end). One workspace of ${TASKS.toLocaleString('en')} generated tasks (20 projects, 10 agents, labels, dependencies, ` +
        `~60-word descriptions) plus ${OTHER.toLocaleString('en')} in another workspace, in the embedded store (SQLite, in memory: \`:memory:\`). Each query asks ` +
        `for a page of ${LIMIT} through \`TaskRepository.search\` (the query \`GET /api/issues\` runs). Latencies are per call, ` +
        'p50 and p99 over up to 300 calls (baseline: up to 30) after a warm-up, with the store\'s kept query results off (`keptResults: 0`), so every call runs its query. The former in-memory engine beside SQLite, in one run, ' +
        'is in the embedded-store section (`pnpm bench store`).',
      '',
      '- **indexed**: the repository\'s indexes (`TASK_INDEXES`, each an SQLite table of encoded keys), unique per-sort keys ' +
        '(`sortKeys.*`) for keyset pages, and text as a literal substring of the case-folded `searchText` field through the ' +
        'substring index (an FTS5 trigram table holding each text in chunks of about 100 characters): either the trigram candidates, each tested exactly, then sorted, or an ordered ' +
        'index walk testing each document until a page is full, whichever the planner estimates cheaper. The plan column names ' +
        'the index (or FTS) and how many documents SQLite handed over.',
      '- **same, naive text**: the same indexed store, with `q` as a case-insensitive regular expression over title and ' +
        'description (no trigram index can serve it: every document of the walk is tested).',
      '- **baseline**: the same tasks and sort keys without any index but `_id`, text as in the naive row.',
      '',
      '| query | indexed p50 | indexed p99 | plan (index: documents SQLite handed over) | same, naive text p50 | baseline p50 | baseline p99 | p50 speed-up |',
      '|---|---:|---:|---|---:|---:|---:|---:|',
      ...rows.map(
        (r) =>
          `| ${r.label} | ${ms(r.indexed.p50)} | ${ms(r.indexed.p99)} | ${r.plan} | ${r.naiveText ? ms(r.naiveText.p50) : '–'} | ${r.baseline ? ms(r.baseline.p50) : ''} | ${r.baseline ? ms(r.baseline.p99) : ''} | ${speedUp(r)} |`,
      ),
      '',
      'Through the issues service (`TaskService.searchTasks`: access check, search, task health per task, protobuf ' +
        'encoding and decoding of the request and the 50-task page, as over gRPC):',
      '',
      '| request | p50 | p99 |',
      '|---|---:|---:|',
      ...service.map(([label, l]) => `| ${label} | ${ms(l.p50)} | ${ms(l.p99)} |`),
      '',
      `Writes pay for the indexes: a task update (transaction, activity record, event, sort keys) takes p50 ${ms(updateIndexed.p50)} ` +
        `/ p99 ${ms(updateIndexed.p99)} with the indexes and p50 ${ms(updateBaseline.p50)} / p99 ${ms(updateBaseline.p99)} without. ` +
        `Loading the ${(TASKS + OTHER).toLocaleString('en')} tasks took ${(buildIndexed / 1000).toFixed(1)} s with the indexes and ` +
        `${(buildBaseline / 1000).toFixed(1)} s without.`,
      '',
      'Reading the table: filters and sorts are ordered walks of an index table that stop after a page; filters the index ' +
        'does not hold (labels with another sort, `dependencyState`) and frequent text are tested on each document the walk ' +
        'reaches, so their cost follows how far the walk must go for a page. Rare text is looked up by its rarest trigrams ' +
        'and only the candidates are read. On MongoDB the same indexes serve the filters and sorts; text is a regular ' +
        'expression the server tests on the keys of the text index.',
    ].join('\n');
    if (QUICK) {
      log(`quick run (SEARCH_BENCH_QUICK):\n${section}`);
      return null;
    }
    return section;
  },
};

export default bench;
