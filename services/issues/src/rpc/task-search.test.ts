import { ServiceError } from '@planning/errors';
import type { Task } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { Principal } from '@planning/rpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRIORITY_RANK, type Priority } from '../domain/tasks.js';
import type { TaskRecord } from '../store/task-documents.js';
import { searchQuery, type TaskSearch } from '../store/task-search.js';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';

/**
 * Search over a workspace of varied tasks: every filter alone and combined against a reference
 * computed here from all tasks, every sort in both directions, literal text, graph edges, and
 * pages that neither repeat nor skip while tasks are edited.
 */

const STATUSES = ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] as const;
const PRIORITIES: Priority[] = ['urgent', 'high', 'medium', 'low', 'none'];
const WORDS = ['Alpha', 'beta', 'Gamma', 'delta', 'EPSILON', 'zeta'];

let h: PlanningHarness;
let owner: Principal;
let ws: string;
let otherWs: string;
let projects: string[];
let milestones: string[];

async function all(): Promise<Task[]> {
  const out: Task[] = [];
  let cursor: string | undefined;
  do {
    const page = await h.tasks.searchTasks({ workspaceId: ws, limit: 200, ...(cursor ? { cursor } : {}) }, owner);
    out.push(...page.tasks.map((v) => v.task as Task));
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

async function ids(request: Parameters<PlanningHarness['tasks']['searchTasks']>[0], principal = owner): Promise<string[]> {
  const res = await h.tasks.searchTasks({ workspaceId: ws, limit: 200, ...request }, principal);
  return res.tasks.map((v) => v.task?.id as string);
}

/** Reference order: by the sort value, ties by id, both in the sort direction. */
function sorted(tasks: Task[], value: (t: Task) => string | number, dir: 1 | -1): string[] {
  return [...tasks]
    .sort((a, b) => {
      const va = value(a);
      const vb = value(b);
      if (va !== vb) return (va < vb ? -1 : 1) * dir;
      return (a.id < b.id ? -1 : 1) * dir;
    })
    .map((t) => t.id);
}

const byPriorityDesc = (tasks: Task[]) => sorted(tasks, (t) => PRIORITY_RANK[t.priority as Priority], -1);

beforeAll(async () => {
  h = await createPlanningHarness();
  ws = await h.workspace({ ownerId: 'usr_owner' });
  otherWs = await h.workspace({ ownerId: 'usr_other' });
  owner = h.user('usr_owner');
  await h.addAgent(ws, 'agent-a');
  await h.addAgent(ws, 'agent-b');
  projects = [];
  milestones = [];
  for (const name of ['Web', 'API']) {
    const { project } = await h.projects.createProject({ workspaceId: ws, name }, owner);
    projects.push(project?.id as string);
    const { milestone } = await h.projects.createMilestone({ projectId: project?.id as string, name: `${name} beta` }, owner);
    milestones.push(milestone?.id as string);
  }
  const created: string[] = [];
  for (let i = 0; i < 63; i++) {
    const p = i % 2;
    const { task } = await h.tasks.createTask(
      {
        projectId: projects[p] as string,
        title: `${WORDS[i % WORDS.length]} task ${String(i).padStart(2, '0')}${i % 9 === 0 ? ' (a.b) [x]*' : ''}`,
        description: i % 5 === 0 ? `Needs the Widget_${i} fix. See axb too.` : 'Plain description',
        status: STATUSES[i % STATUSES.length],
        priority: PRIORITIES[(i * 3) % PRIORITIES.length],
        labels: [i % 3 === 0 ? 'feature:search' : 'chore', ...(i % 4 === 0 ? ['launch-blocker'] : [])],
        ...(i % 6 < 3 ? { milestoneId: milestones[p] } : {}),
        ...(i % 7 === 0 ? {} : { dueDate: `2025-0${1 + (i % 9)}-1${i % 10}` }),
        ...(i % 5 === 1 ? { assignedAgentId: 'agent-a' } : i % 5 === 2 ? { assignedAgentId: 'agent-b' } : {}),
        // Every fourth task waits for the one created just before it.
        ...(i % 4 === 3 ? { dependencies: [created[i - 1] as string] } : {}),
      },
      owner,
    );
    created.push(task?.task?.id as string);
    h.now = new Date(h.now.getTime() + 1_000);
  }
  // A task in another workspace never shows up in this workspace's searches.
  const { project } = await h.projects.createProject({ workspaceId: otherWs, name: 'Elsewhere' }, h.user('usr_other'));
  await h.tasks.createTask({ projectId: project?.id as string, title: 'Alpha elsewhere' }, h.user('usr_other'));
});

afterAll(async () => {
  await h.close();
});

describe('task search: filters', () => {
  it('task search: each filter alone returns exactly the matching tasks', async () => {
    const tasks = await all();
    expect(tasks).toHaveLength(63);
    const cases: [Parameters<PlanningHarness['tasks']['searchTasks']>[0], (t: Task) => boolean][] = [
      [{ projectId: projects[0] }, (t) => t.projectId === projects[0]],
      [{ milestoneId: milestones[1] }, (t) => t.milestoneId === milestones[1]],
      [{ status: ['ready'] }, (t) => t.status === 'ready'],
      [{ priority: ['urgent'] }, (t) => t.priority === 'urgent'],
      [{ labels: ['launch-blocker'] }, (t) => t.labels.includes('launch-blocker')],
      [{ assignedAgentId: 'agent-a' }, (t) => t.agent?.assignedAgentId === 'agent-a'],
      [{ dependencyState: 'blocked' }, (t) => t.openDependencyCount > 0],
      [{ dependencyState: 'unblocked' }, (t) => t.openDependencyCount === 0],
      [{ q: 'gamma' }, (t) => `${t.title}\n${t.description}`.toLowerCase().includes('gamma')],
    ];
    for (const [request, predicate] of cases) {
      const expected = byPriorityDesc(tasks.filter(predicate));
      expect(expected.length, JSON.stringify(request)).toBeGreaterThan(0);
      expect(await ids(request), JSON.stringify(request)).toEqual(expected);
    }
  });

  it('task search: multi-value filters match any of their values', async () => {
    const tasks = await all();
    expect(await ids({ status: ['ready', 'in-progress'] })).toEqual(byPriorityDesc(tasks.filter((t) => ['ready', 'in-progress'].includes(t.status))));
    expect(await ids({ priority: ['urgent', 'none'] })).toEqual(byPriorityDesc(tasks.filter((t) => ['urgent', 'none'].includes(t.priority))));
    expect(await ids({ labels: ['launch-blocker', 'chore'] })).toEqual(byPriorityDesc(tasks.filter((t) => t.labels.some((l) => ['launch-blocker', 'chore'].includes(l)))));
  });

  it('task search: combined filters all apply', async () => {
    const tasks = await all();
    const expected = tasks.filter(
      (t) => t.projectId === projects[0] && ['ready', 'backlog', 'in-progress'].includes(t.status) && t.labels.includes('chore') && t.openDependencyCount === 0,
    );
    expect(expected.length).toBeGreaterThan(0);
    expect(await ids({ projectId: projects[0], status: ['ready', 'backlog', 'in-progress'], labels: ['chore'], dependencyState: 'unblocked' })).toEqual(
      byPriorityDesc(expected),
    );
    const feature = tasks.filter((t) => t.labels.includes('feature:search') && t.milestoneId === milestones[0] && t.title.toLowerCase().includes('task'));
    expect(await ids({ labels: ['feature:search'], milestoneId: milestones[0], q: 'TASK' })).toEqual(byPriorityDesc(feature));
  });

  it('task search: text is literal and case-insensitive in title and description (no pattern injection)', async () => {
    const tasks = await all();
    const literal = (s: string) => byPriorityDesc(tasks.filter((t) => `${t.title}\n${t.description}`.toLowerCase().includes(s.toLowerCase())));
    expect(await ids({ q: '(a.b) [x]*' })).toEqual(literal('(a.b) [x]*'));
    expect((await ids({ q: '(a.b) [x]*' })).length).toBeGreaterThan(0);
    // `a.b` must not match `axb` as a regular expression would.
    expect(await ids({ q: 'a.b' })).toEqual(literal('a.b'));
    expect(await ids({ q: 'widget_10' })).toEqual(literal('widget_10'));
    expect(await ids({ q: '.*' })).toEqual([]);
    expect(await ids({ q: '(' })).toEqual(literal('('));
    expect(await ids({ q: '   ' })).toHaveLength(63);
  });

  it('task search: without a workspace a user sees the workspaces they belong to; a token only its own', async () => {
    const mine = await h.tasks.searchTasks({ limit: 200 }, owner);
    expect(mine.tasks).toHaveLength(63);
    const theirs = await h.tasks.searchTasks({ q: 'elsewhere' }, h.user('usr_other'));
    expect(theirs.tasks.map((t) => t.task?.title)).toEqual(['Alpha elsewhere']);
    const token = h.token(ws, ['issues:read']);
    expect((await h.tasks.searchTasks({ limit: 200 }, token)).tasks).toHaveLength(63);
    expect((await h.tasks.searchTasks({ q: 'elsewhere' }, h.admin)).tasks).toHaveLength(1);
  });
});

describe('task search: sorting', () => {
  it('task search: every sort in both directions, ties by id', async () => {
    const tasks = await all();
    const cases: [string, (t: Task) => string | number][] = [
      ['priority', (t) => PRIORITY_RANK[t.priority as Priority]],
      ['createdAt', (t) => t.createdAt],
      ['updatedAt', (t) => t.updatedAt],
      ['dueDate', (t) => t.dueDate ?? '~'],
      ['title', (t) => t.title.toLowerCase()],
    ];
    for (const [sort, value] of cases) {
      for (const direction of ['asc', 'desc'] as const) {
        expect(await ids({ sort, direction }), `${sort} ${direction}`).toEqual(sorted(tasks, value, direction === 'asc' ? 1 : -1));
      }
    }
  });

  it('task search: priority order is urgent > high > medium > low > none', async () => {
    const res = await h.tasks.searchTasks({ workspaceId: ws, sort: 'priority', limit: 200 }, owner);
    const ranks = res.tasks.map((v) => PRIORITY_RANK[v.task?.priority as Priority]);
    expect(ranks).toEqual([...ranks].sort((a, b) => b - a));
    expect(res.tasks[0]?.task?.priority).toBe('urgent');
    expect(res.tasks.at(-1)?.task?.priority).toBe('none');
  });

  it('task search: due date ascending puts undated tasks last', async () => {
    const res = await h.tasks.searchTasks({ workspaceId: ws, sort: 'dueDate', limit: 200 }, owner);
    const dates = res.tasks.map((v) => v.task?.dueDate);
    const firstUndated = dates.indexOf(undefined);
    expect(firstUndated).toBeGreaterThan(0);
    expect(dates.slice(firstUndated).every((d) => d === undefined)).toBe(true);
  });
});

describe('task search: dependency graph and health', () => {
  it('task search: the graph has an edge from each prerequisite to the task that waits for it', async () => {
    const tasks = await all();
    const res = await h.tasks.searchTasks({ workspaceId: ws, limit: 200, includeDependencyGraph: true }, owner);
    const edges = (res.dependencyGraph?.edges ?? []).map((e) => `${e.sourceIssueId}>${e.targetIssueId}`).sort();
    const expected = tasks.flatMap((t) => t.dependencies.map((d) => `${d}>${t.id}`)).sort();
    expect(expected.length).toBeGreaterThan(10);
    expect(edges).toEqual(expected);
    const plain = await h.tasks.searchTasks({ workspaceId: ws, limit: 5 }, owner);
    expect(plain.dependencyGraph).toBeUndefined();
  });

  it('task search: a page also shows the tasks waiting for its tasks', async () => {
    const tasks = await all();
    const prerequisite = tasks.find((t) => t.dependentCount > 0) as Task;
    const waiting = tasks.filter((t) => t.dependencies.includes(prerequisite.id));
    const res = await h.tasks.searchTasks({ workspaceId: ws, q: prerequisite.title, includeDependencyGraph: true }, owner);
    const edges = (res.dependencyGraph?.edges ?? []).map((e) => `${e.sourceIssueId}>${e.targetIssueId}`);
    for (const w of waiting) expect(edges).toContain(`${prerequisite.id}>${w.id}`);
  });

  it('task search: every result carries taskHealth; open dependencies block a claim', async () => {
    const res = await h.tasks.searchTasks({ workspaceId: ws, dependencyState: 'blocked', status: ['ready'], limit: 200 }, owner);
    expect(res.tasks.length).toBeGreaterThan(0);
    for (const v of res.tasks) {
      expect(v.health?.blocksAgentClaim).toBe(true);
      expect(v.health?.reasons).toContain('dependencies-open');
      expect(v.task?.agent?.readiness).toBe('blocked');
    }
    const token = h.token(ws, ['issues:read'], 'agent-b');
    const assigned = await h.tasks.searchTasks({ workspaceId: ws, assignedAgentId: 'agent-a', status: ['ready'] }, token);
    for (const v of assigned.tasks) expect(v.health?.reasons).toContain('assigned-to-another-agent');
  });
});

describe('task search: pages', () => {
  it('task search: pages cover every task exactly once in order, for every sort', async () => {
    for (const sort of ['priority', 'title', 'dueDate', 'createdAt']) {
      const whole = await ids({ sort });
      const paged: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await h.tasks.searchTasks({ workspaceId: ws, sort, limit: 7, ...(cursor ? { cursor } : {}) }, owner);
        expect(page.tasks.length).toBeLessThanOrEqual(7);
        paged.push(...page.tasks.map((v) => v.task?.id as string));
        cursor = page.nextCursor;
      } while (cursor);
      expect(paged, sort).toEqual(whole);
    }
  });

  it('task search: editing tasks while paging never repeats or skips a task whose sort key stayed the same', async () => {
    const before = await ids({ sort: 'priority' });
    const tasks = await all();
    const moved = new Set<string>();
    const seen: string[] = [];
    let cursor: string | undefined;
    let round = 0;
    do {
      const page = await h.tasks.searchTasks({ workspaceId: ws, sort: 'priority', limit: 5, ...(cursor ? { cursor } : {}) }, owner);
      seen.push(...page.tasks.map((v) => v.task?.id as string));
      cursor = page.nextCursor;
      // Between pages: retitle some tasks (sort key unchanged) and reprioritise one (it may move).
      const retitle = tasks[(round * 11) % tasks.length] as Task;
      await h.tasks.updateTask({ id: retitle.id, patch: { title: `${retitle.title} (edited ${round})`, description: 'changed' } }, owner);
      const bump = tasks[(round * 17 + 3) % tasks.length] as Task;
      if (bump.priority !== 'high') {
        await h.tasks.updateTask({ id: bump.id, patch: { priority: bump.priority === 'urgent' ? 'low' : 'urgent' } }, owner);
        moved.add(bump.id);
      }
      round++;
    } while (cursor);
    const stable = before.filter((id) => !moved.has(id));
    const seenStable = seen.filter((id) => !moved.has(id));
    // Exactly once each, in order: no duplicates, no gaps (moved tasks may show up twice or not at all).
    expect(moved.size).toBeGreaterThan(0);
    expect(seenStable).toEqual(stable);
  });
});

describe('task search: query plans', () => {
  const plan = async (search: Partial<TaskSearch>) => {
    const { filter, sort } = searchQuery({ scope: { all: false, ids: [ws] }, sort: 'priority', direction: 'desc', ...search });
    return h.store.collection<TaskRecord>('tasks').explain(filter, { sort, limit: 51 });
  };

  it('task search: filters and sorts are ordered index walks that stop after a page', async () => {
    for (const [search, index] of [
      [{}, 'ws_priority'],
      [{ statuses: ['ready', 'backlog'] }, 'ws_status_priority'],
      [{ sort: 'title', direction: 'asc' }, 'ws_title'],
      [{ sort: 'dueDate', direction: 'asc' }, 'ws_due'],
      [{ sort: 'updatedAt' }, 'ws_updated'],
      [{ sort: 'createdAt' }, 'ws_created'],
    ] as [Partial<TaskSearch>, string][]) {
      const explain = await plan({ ...search });
      expect(explain, JSON.stringify(search)).toMatchObject({ plan: 'IXSCAN', index, inMemorySort: false });
    }
    const page = await plan({ after: '2' });
    expect(page).toMatchObject({ index: 'ws_priority', inMemorySort: false });
    expect(page.docsExamined).toBeLessThan(63);
  });

  it('task search: text of three characters or more comes from the trigram index, reading only matching tasks', async () => {
    const explain = await plan({ q: 'gamma' });
    expect(explain).toMatchObject({ plan: 'FTS', index: 'ws_text' });
    expect(explain.docsExamined).toBe(explain.nReturned);
    const other = await plan({ q: 'widget_10', sort: 'title', direction: 'asc' });
    expect(other).toMatchObject({ plan: 'FTS', nReturned: 1, docsExamined: 1 });
    // Shorter than a trigram: tested on the tasks during the ordered walk.
    const short = await plan({ q: 'ga' });
    expect(short).toMatchObject({ plan: 'IXSCAN', index: 'ws_priority', inMemorySort: false });
  });
});

describe('task search: bad input', () => {
  const fieldOf = async (request: Parameters<PlanningHarness['tasks']['searchTasks']>[0], principal = owner): Promise<string | undefined> => {
    const err = await h.tasks.searchTasks(request, principal).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('invalid-input');
    return (err as ServiceError).details.field;
  };

  it('task search: unknown enum values, bad ids, limits and cursors name the field', async () => {
    expect(await fieldOf({ workspaceId: ws, status: ['open'] })).toBe('status');
    expect(await fieldOf({ workspaceId: ws, priority: ['p1'] })).toBe('priority');
    expect(await fieldOf({ workspaceId: ws, sort: 'rank' })).toBe('sort');
    expect(await fieldOf({ workspaceId: ws, direction: 'up' })).toBe('direction');
    expect(await fieldOf({ workspaceId: ws, dependencyState: 'maybe' })).toBe('dependencyState');
    expect(await fieldOf({ workspaceId: ws, limit: 0 })).toBe('limit');
    expect(await fieldOf({ workspaceId: ws, limit: 201 })).toBe('limit');
    expect(await fieldOf({ workspaceId: ws, cursor: 'garbage' })).toBe('cursor');
    expect(await fieldOf({ workspaceId: ws, q: 'x'.repeat(201) })).toBe('q');
    expect(await fieldOf({ workspaceId: 'bad id' })).toBe('workspaceId');
    expect(await fieldOf({ workspaceId: ws, assignedAgentId: 'Not An Agent' })).toBe('assignedAgentId');
    const first = await h.tasks.searchTasks({ workspaceId: ws, sort: 'title', limit: 2 }, owner);
    expect(await fieldOf({ workspaceId: ws, sort: 'priority', cursor: first.nextCursor as string })).toBe('cursor');
  });

  it('task search: a workspace the caller cannot see is 404 (unknown, other token) or 403 (not a member)', async () => {
    await expect(h.tasks.searchTasks({ workspaceId: 'ws_unknown' }, owner)).rejects.toMatchObject({ code: 'not-found' });
    await expect(h.tasks.searchTasks({ workspaceId: otherWs }, owner)).rejects.toMatchObject({ code: 'forbidden' });
    await expect(h.tasks.searchTasks({ workspaceId: otherWs }, h.token(ws, ['issues:read']))).rejects.toMatchObject({ code: 'not-found' });
    await expect(h.tasks.searchTasks({ workspaceId: ws }, h.token(ws, ['projects:read']))).rejects.toMatchObject({ code: 'forbidden' });
  });
});
