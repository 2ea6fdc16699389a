import type { DescService } from '@bufbuild/protobuf';
import type { Principal, RpcCallOptions } from '@planning/rpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPlanningHarness, type PlanningHarness, type TestClient } from '../testing/planning-harness.js';
import { DEMO_WORKSPACE_SLUG, seedDemo, type DemoClients } from './seed.js';

/** The harness's clients as RPC clients: the principal comes from the call options. */
function asRpc<S extends DescService>(client: TestClient<S>): never {
  return new Proxy(client, {
    get: (target, method: string) => (request: unknown, options?: RpcCallOptions) =>
      (target as unknown as Record<string, (r: unknown, p: Principal) => Promise<unknown>>)[method]!(request, options?.principal as Principal),
  }) as never;
}

let h: PlanningHarness;
let clients: DemoClients;

beforeEach(async () => {
  h = await createPlanningHarness();
  clients = {
    workspaces: asRpc(h.workspaceRpc),
    projects: asRpc(h.projects),
    programs: asRpc(h.programs),
    tasks: asRpc(h.tasks),
    taskRecords: asRpc(h.records),
  };
});

afterEach(async () => {
  await h.close();
});

async function counts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const name of ['workspaces', 'members', 'projects', 'milestones', 'programs', 'initiatives', 'tasks', 'evidence', 'activity', 'outbox']) {
    out[name] = await h.store.collection(name).countDocuments({});
  }
  return out;
}

describe('demo data: seeding', () => {
  it('demo data: a pro workspace owned by the administrator with planning records and dependent tasks', async () => {
    const result = await seedDemo(clients, 'usr_admin', h.now);
    expect(result.created).toBeGreaterThan(5);
    const workspace = await h.workspaces.findById(result.workspaceId);
    expect(workspace).toMatchObject({ slug: DEMO_WORKSPACE_SLUG, planId: 'pro', ownerId: 'usr_admin' });
    const admin = h.user('usr_admin');
    const tasks = (await h.tasks.searchTasks({ workspaceId: result.workspaceId, includeDependencyGraph: true }, admin)).tasks.map((t) => t.task!);
    expect(tasks.length).toBeGreaterThanOrEqual(5);
    expect(tasks.filter((t) => t.labels.includes('launch-blocker')).length).toBeGreaterThanOrEqual(1);
    expect(tasks.some((t) => t.dependencies.length > 0)).toBe(true);
    expect(tasks.some((t) => t.agent?.readiness === 'ready')).toBe(true);
    expect((await h.projects.listProjects({ workspaceId: result.workspaceId }, admin)).projects).toHaveLength(1);
    expect((await h.programs.listInitiatives({ workspaceId: result.workspaceId }, admin)).initiatives[0]?.contextPack.length).toBeGreaterThan(0);
    const readiness = await h.tasks.getProductReadiness({ workspaceIds: [result.workspaceId] }, admin);
    expect(readiness.implementation?.verifiedCount).toBe(1);
    expect(readiness.launchProof?.readyForPublicLaunch).toBe(false);
  });

  it('demo data: seeding twice never duplicates anything', async () => {
    const first = await seedDemo(clients, 'usr_admin', h.now);
    const after = await counts();
    const second = await seedDemo(clients, 'usr_admin', h.now);
    expect(second).toEqual({ workspaceId: first.workspaceId, created: 0 });
    expect(await counts()).toEqual(after);
  });

  it('demo data: a seed cut short is completed by the next one', async () => {
    const first = await seedDemo(clients, 'usr_admin', h.now);
    const full = await counts();
    // Lose the last two tasks (as if the process died before creating them).
    const tasks = h.store.collection<{ _id: string; title: string }>('tasks');
    const last = await tasks.find({ workspaceId: first.workspaceId }, { sort: { _id: -1 }, limit: 2 });
    for (const t of last) await tasks.deleteOne({ _id: t._id });
    const again = await seedDemo(clients, 'usr_admin', h.now);
    expect(again.created).toBe(2);
    expect((await counts()).tasks).toBe(full.tasks);
  });
});
