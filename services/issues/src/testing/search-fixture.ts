/**
 * Benchmark and test support (not part of the service): a deterministic workspace of many tasks
 * for measuring search, built as stored task documents (with the same derived search fields and
 * sort keys the repository writes), and the search as the repository runs it.
 */
import { DEFAULT_DONE_POLICY } from '../domain/done-policy.js';
import { createInProcessBus } from '@planning/bus';
import { createOutbox } from '@planning/outbox';
import { createEmbeddedStore, type EmbeddedCollection, type EmbeddedDocumentStore, type Filter } from '@planning/store';
import { emptyInstructions } from '../domain/task-contract.js';
import type { TaskStatus } from '../domain/task-status.js';
import type { Priority } from '../domain/tasks.js';
import { PlanningRepository } from '../store/planning.js';
import { derivedFields, type TaskRecord } from '../store/task-documents.js';
import { TaskRepository } from '../store/tasks.js';
import { searchQuery, type TaskSearch } from '../store/task-search.js';
import { seededRandom as random } from '@planning/store/testing';

export { createEmbeddedStore, searchQuery, type TaskSearch };

const WORDS = (
  'index query planner cursor page agent claim lease status review deploy release bug fix refactor test ' +
  'docs api gateway service store cache retry timeout latency metric alert dashboard schema migration ' +
  'import export backup tenant workspace project milestone program initiative label owner budget quota'
).split(' ');
const STATUSES: TaskStatus[] = ['backlog', 'ready', 'ready', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'done', 'cancelled'];
const PRIORITIES: Priority[] = ['urgent', 'high', 'high', 'medium', 'medium', 'medium', 'low', 'low', 'none'];

export interface SearchFixtureOptions {
  /** Tasks in the measured workspace. */
  tasks: number;
  /** Tasks in a second workspace (never matched; makes workspace scoping matter). */
  otherTasks?: number;
  /** Create the repository's indexes (default true); false gives the baseline: `_id` only. */
  indexed?: boolean;
  seed?: number;
  /** An existing store to fill (default: a new in-memory one). */
  store?: EmbeddedDocumentStore;
  /** The measured workspace's id (default `ws_bench`). */
  workspaceId?: string;
}

export interface SearchFixture {
  store: EmbeddedDocumentStore;
  /** The repository over the tasks (its indexes exist only when `indexed`). */
  repository: TaskRepository;
  tasks: EmbeddedCollection<TaskRecord>;
  workspaceId: string;
  projectIds: string[];
  milestoneIds: string[];
  agentIds: string[];
  /** A word in about ten tasks' descriptions, one in 2 % of them, and one in about a third of the titles. */
  rareWord: string;
  mediumWord: string;
  commonWord: string;
  close(): Promise<void>;
}

function makeTasks(
  count: number,
  workspaceId: string,
  rnd: () => number,
  fixture: Pick<SearchFixture, 'projectIds' | 'milestoneIds' | 'agentIds' | 'rareWord' | 'mediumWord' | 'commonWord'>,
): TaskRecord[] {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)] as T;
  const base = Date.parse('2025-01-01T00:00:00.000Z');
  const out: TaskRecord[] = [];
  for (let i = 0; i < count; i++) {
    const id = `iss_${workspaceId}_${String(i).padStart(7, '0')}`;
    const words = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
    const titleWords = `${words(4)}${rnd() < 0.3 ? ` ${fixture.commonWord}` : ''}`;
    const title = `${titleWords.charAt(0).toUpperCase()}${titleWords.slice(1)} #${i}`;
    const description = `${words(30)}${i % Math.max(1, Math.floor(count / 10)) === 7 ? ` ${fixture.rareWord}` : ''}${rnd() < 0.02 ? ` ${fixture.mediumWord}` : ''} ${words(20)}`;
    const createdAt = new Date(base + i * 60_000).toISOString();
    const updatedAt = new Date(base + i * 60_000 + Math.floor(rnd() * 30 * 86_400_000)).toISOString();
    const project = Math.floor(rnd() * fixture.projectIds.length);
    const labels = [pick(['backend', 'frontend', 'ops', 'docs'])];
    if (rnd() < 0.2) labels.push('feature:search');
    if (rnd() < 0.01) labels.push('launch-blocker');
    const status = pick(STATUSES);
    const dependencies = i > 10 && rnd() < 0.1 ? [`iss_${workspaceId}_${String(i - 1 - Math.floor(rnd() * 10)).padStart(7, '0')}`] : [];
    const assigned = rnd() < 0.3 ? pick(fixture.agentIds) : undefined;
    const due = rnd() < 0.7 ? new Date(base + Math.floor(rnd() * 365) * 86_400_000).toISOString().slice(0, 10) : undefined;
    const fields = {
      _id: id,
      workspaceId,
      projectId: fixture.projectIds[project] as string,
      ...(rnd() < 0.5 ? { milestoneId: fixture.milestoneIds[project] as string } : {}),
      title,
      description,
      status,
      priority: pick(PRIORITIES),
      labels,
      ...(due ? { dueDate: due } : {}),
      dependencies,
      acceptanceChecks: [],
      agent: { ...(assigned ? { assignedAgentId: assigned } : {}), instructions: emptyInstructions() },
      createdAt,
      updatedAt,
      createdBy: 'usr_bench',
      version: 1,
      openDependencyCount: dependencies.length > 0 && rnd() < 0.5 ? 1 : 0,
      dependentCount: 0,
      timeLoggedMinutes: 0,
      evidenceCount: 0,
      lastActivityAt: updatedAt,
    };
    out.push({ ...fields, ...derivedFields(fields) } as TaskRecord);
  }
  return out;
}

/**
 * A store with `tasks` tasks in one workspace (and `otherTasks` in another), indexed as the
 * repository indexes them, or (baseline) not at all. The same seed gives the same tasks.
 */
export async function createSearchFixture(options: SearchFixtureOptions): Promise<SearchFixture> {
  const rnd = random(options.seed ?? 42);
  const store = options.store ?? createEmbeddedStore();
  const quiet = { info() {}, warn() {}, error() {}, debug() {} };
  const outbox = await createOutbox({ store, bus: createInProcessBus(), source: 'issues', logger: quiet });
  const tasks = store.collection<TaskRecord>('tasks');
  // Without indexes the repository is built over a store whose `createIndexes` does nothing.
  const indexed = options.indexed ?? true;
  const repositoryStore = indexed
    ? store
    : (new Proxy(store, {
        get: (target, prop) =>
          prop === 'collection'
            ? (name: string) => new Proxy(target.collection(name), { get: (c, p) => (p === 'createIndexes' ? async () => undefined : Reflect.get(c, p)) })
            : Reflect.get(target, prop),
      }) as EmbeddedDocumentStore);
  const planning = await PlanningRepository.open(repositoryStore, outbox);
  const repository = await TaskRepository.open(repositoryStore, outbox, planning, { agentExists: async () => true, donePolicy: async () => DEFAULT_DONE_POLICY });
  const fixture = {
    workspaceId: options.workspaceId ?? 'ws_bench',
    projectIds: Array.from({ length: 20 }, (_, i) => `prj_${i}`),
    milestoneIds: Array.from({ length: 20 }, (_, i) => `ms_${i}`),
    agentIds: Array.from({ length: 10 }, (_, i) => `agent-${i}`),
    rareWord: 'zanzibar',
    mediumWord: 'kestrel',
    commonWord: 'search',
  };
  for (const [workspace, count] of [[fixture.workspaceId, options.tasks], ['ws_other', options.otherTasks ?? 0]] as const) {
    const docs = makeTasks(count, workspace, rnd, fixture);
    for (let i = 0; i < docs.length; i += 5_000) await tasks.insertMany(docs.slice(i, i + 5_000));
  }
  return {
    store,
    repository,
    tasks,
    ...fixture,
    async close() {
      await store.close();
    },
  };
}

/**
 * The obvious way to run the same search without this service's search design: no indexes, and
 * text matched with a case-insensitive regular expression over title and description.
 */
export function naiveQuery(search: TaskSearch): { filter: Filter; sort: Record<string, 1 | -1> } {
  const { filter, sort } = searchQuery({ ...search, q: undefined });
  if (search.q === undefined) return { filter, sort };
  const pattern = search.q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return { filter: { ...filter, $or: [{ title: { $regex: pattern, $options: 'i' } }, { description: { $regex: pattern, $options: 'i' } }] }, sort };
}
