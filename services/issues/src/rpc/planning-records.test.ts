import { ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';

let h: PlanningHarness;
let owner: Principal;
let ws: string;

async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  return err as ServiceError;
}

beforeEach(async () => {
  h = await createPlanningHarness();
  ws = await h.workspace({ ownerId: 'usr_owner' });
  owner = h.user('usr_owner');
});

afterEach(async () => {
  await h.close();
});

describe('planning records: projects', () => {
  it('projects: create, list with q and status, read, and patch status and goal retry-safely', async () => {
    const { project } = await h.projects.createProject(
      { workspaceId: ws, name: 'Search', goal: 'Fast search', contextPack: [{ kind: 'doc', title: 'Spec', path: 'docs/spec.md' }] },
      owner,
    );
    await h.projects.createProject({ workspaceId: ws, name: 'Billing', status: 'paused' }, owner);
    expect(project).toMatchObject({ workspaceId: ws, name: 'Search', status: 'active', goal: 'Fast search', version: 1, createdBy: 'usr_owner' });
    expect(project?.contextPack).toEqual([expect.objectContaining({ kind: 'doc', title: 'Spec', path: 'docs/spec.md' })]);
    const id = project?.id as string;
    expect((await h.projects.listProjects({ workspaceId: ws, q: 'SEAR' }, owner)).projects.map((p) => p.name)).toEqual(['Search']);
    expect((await h.projects.listProjects({ workspaceId: ws, status: 'paused' }, owner)).projects.map((p) => p.name)).toEqual(['Billing']);
    expect((await h.projects.listProjects({ workspaceId: ws, q: '.*' }, owner)).projects).toEqual([]);

    h.now = new Date(h.now.getTime() + 1000);
    const changed = await h.projects.updateProject({ id, status: 'completed', goal: 'Shipped' }, owner);
    expect(changed.changedFields).toEqual(['status', 'goal']);
    expect(changed.project).toMatchObject({ status: 'completed', goal: 'Shipped', version: 2, updatedAt: h.now.toISOString() });
    const updatedAt = changed.project?.updatedAt;
    h.now = new Date(h.now.getTime() + 1000);
    const retry = await h.projects.updateProject({ id, status: 'completed', goal: 'Shipped' }, owner);
    expect(retry.changedFields).toEqual([]);
    expect(retry.project).toMatchObject({ version: 2, updatedAt });
    expect((await h.events('project.updated')).map((e) => e.data)).toEqual([{ subject: { type: 'project', id }, changedFields: ['status', 'goal'] }]);
  });

  it('projects: bad input names the field, unknown ids are 404, members cannot manage projects', async () => {
    const id = (await h.projects.createProject({ workspaceId: ws, name: 'P' }, owner)).project?.id as string;
    const field = async (p: Promise<unknown>) => (await failure(p)).details.field;
    expect(await field(h.projects.createProject({ workspaceId: ws, name: '' }, owner))).toBe('name');
    expect(await field(h.projects.createProject({ workspaceId: '', name: 'x' }, owner))).toBe('workspaceId');
    expect(await field(h.projects.createProject({ workspaceId: ws, name: 'x', status: 'open' }, owner))).toBe('status');
    expect(await field(h.projects.createProject({ workspaceId: ws, name: 'x', goal: 'g'.repeat(2001) }, owner))).toBe('goal');
    expect(await field(h.projects.createProject({ workspaceId: ws, name: 'x', contextPack: [{ kind: 'video', title: 'x' }] }, owner))).toBe('contextPack[0].kind');
    expect(await field(h.projects.createProject({ workspaceId: ws, name: 'x', contextPack: [{ kind: 'link', title: 'x' }] }, owner))).toBe('contextPack[0].url');
    expect(await field(h.projects.updateProject({ id }, owner))).toBe('status');
    expect(await field(h.projects.updateProject({ id, status: 'done' }, owner))).toBe('status');
    expect(await field(h.projects.updateProject({ id: '', status: 'paused' }, owner))).toBe('projectId');
    expect((await failure(h.projects.updateProject({ id: 'prj_missing', status: 'paused' }, owner))).code).toBe('not-found');
    expect((await failure(h.projects.createProject({ workspaceId: 'ws_missing', name: 'x' }, owner))).code).toBe('not-found');
    expect((await failure(h.projects.createProject({ workspaceId: ws, name: 'x', initiativeId: 'ini_missing' }, owner))).code).toBe('not-found');
    await h.addMember(ws, 'usr_member', 'member');
    expect((await failure(h.projects.createProject({ workspaceId: ws, name: 'x' }, h.user('usr_member')))).code).toBe('forbidden');
    expect((await failure(h.projects.updateProject({ id, status: 'paused' }, h.user('usr_member')))).code).toBe('forbidden');
    await expect(h.projects.listProjects({ workspaceId: ws }, h.user('usr_member'))).resolves.toBeTruthy();
    await expect(h.projects.createProject({ workspaceId: ws, name: 'By token' }, h.token(ws, ['projects:write']))).resolves.toBeTruthy();
    expect((await failure(h.projects.createProject({ workspaceId: ws, name: 'x' }, h.token(ws, ['issues:write'])))).code).toBe('forbidden');
  });
});

describe('planning records: milestones', () => {
  it('milestones: belong to one project and list per project', async () => {
    const a = (await h.projects.createProject({ workspaceId: ws, name: 'A' }, owner)).project?.id as string;
    const b = (await h.projects.createProject({ workspaceId: ws, name: 'B' }, owner)).project?.id as string;
    const { milestone } = await h.projects.createMilestone({ projectId: a, name: 'Beta', targetDate: '2025-09-30' }, owner);
    await h.projects.createMilestone({ projectId: b, name: 'GA', status: 'completed' }, owner);
    expect(milestone).toMatchObject({ projectId: a, workspaceId: ws, name: 'Beta', status: 'active', targetDate: '2025-09-30' });
    expect((await h.projects.listMilestones({ projectId: a }, owner)).milestones.map((m) => m.name)).toEqual(['Beta']);
    expect((await h.projects.listMilestones({ workspaceId: ws, status: 'completed' }, owner)).milestones.map((m) => m.name)).toEqual(['GA']);
    expect((await failure(h.projects.listMilestones({}, owner))).details.field).toBe('projectId');
    expect((await failure(h.projects.listMilestones({ projectId: 'prj_missing' }, owner))).code).toBe('not-found');
    expect((await failure(h.projects.createMilestone({ projectId: a, name: 'x', targetDate: '2025-02-29' }, owner))).details.field).toBe('targetDate');
    expect((await failure(h.projects.createMilestone({ projectId: a, name: 'x', status: 'open' }, owner))).details.field).toBe('status');
    expect((await failure(h.projects.createMilestone({ projectId: 'prj_missing', name: 'x' }, owner))).code).toBe('not-found');
  });
});

describe('planning records: programs and initiatives', () => {
  it('programs: filter by workspace, status and q; owners are members', async () => {
    const { program } = await h.programs.createProgram({ workspaceId: ws, name: 'Platform', description: 'Core' }, owner);
    await h.programs.createProgram({ workspaceId: ws, name: 'Growth', status: 'paused' }, owner);
    expect(program).toMatchObject({ name: 'Platform', status: 'active', ownerId: 'usr_owner' });
    expect((await h.programs.listPrograms({ workspaceId: ws, status: 'paused' }, owner)).programs.map((p) => p.name)).toEqual(['Growth']);
    expect((await h.programs.listPrograms({ workspaceId: ws, q: 'plat' }, owner)).programs.map((p) => p.name)).toEqual(['Platform']);
    expect((await failure(h.programs.createProgram({ workspaceId: ws, name: 'x', ownerId: 'usr_stranger' }, owner))).code).toBe('not-found');
    expect((await failure(h.programs.listPrograms({ workspaceId: ws, status: 'open' }, owner))).details.field).toBe('status');
    const byToken = await h.programs.createProgram({ workspaceId: ws, name: 'Tokened' }, h.token(ws, ['projects:write']));
    expect(byToken.program?.ownerId).toBe('usr_owner');
  });

  it('initiatives: keep target dates, owners, goals and context packs; filter by program, status and q', async () => {
    await h.addMember(ws, 'usr_pm', 'admin');
    const programId = (await h.programs.createProgram({ workspaceId: ws, name: 'Platform' }, owner)).program?.id as string;
    const other = (await h.programs.createProgram({ workspaceId: ws, name: 'Other' }, owner)).program?.id as string;
    const { initiative } = await h.programs.createInitiative(
      {
        programId,
        name: 'Public launch',
        goal: 'Launch',
        ownerIds: ['usr_owner', 'usr_pm'],
        startDate: '2025-06-01',
        targetDate: '2025-09-01',
        contextPack: [
          { kind: 'file', title: 'Search', path: 'src/search.ts' },
          { kind: 'link', title: 'Spec', url: 'https://example.com/spec' },
        ],
      },
      owner,
    );
    await h.programs.createInitiative({ programId: other, name: 'Other thing', status: 'completed', workspaceId: ws }, owner);
    const mismatch = await failure(h.programs.createInitiative({ programId, name: 'Elsewhere', workspaceId: 'ws_other' }, owner));
    expect(mismatch).toMatchObject({ code: 'invalid-input', details: { field: 'workspaceId' } });
    expect(initiative).toMatchObject({ workspaceId: ws, programId, goal: 'Launch', ownerIds: ['usr_owner', 'usr_pm'], startDate: '2025-06-01', targetDate: '2025-09-01' });
    expect(initiative?.contextPack).toHaveLength(2);
    expect((await h.programs.getInitiative({ id: initiative?.id as string }, owner)).initiative?.contextPack[1]?.url).toBe('https://example.com/spec');
    expect((await h.programs.listInitiatives({ programId }, owner)).initiatives.map((i) => i.name)).toEqual(['Public launch']);
    expect((await h.programs.listInitiatives({ workspaceId: ws, status: 'completed' }, owner)).initiatives.map((i) => i.name)).toEqual(['Other thing']);
    expect((await h.programs.listInitiatives({ workspaceId: ws, q: 'LAUNCH' }, owner)).initiatives.map((i) => i.name)).toEqual(['Public launch']);
    expect((await failure(h.programs.listInitiatives({ programId: 'prg_missing' }, owner))).code).toBe('not-found');
    expect((await failure(h.programs.createInitiative({ programId, name: 'x', startDate: '2025-09-02', targetDate: '2025-09-01' }, owner))).details.field).toBe('targetDate');
    expect((await failure(h.programs.createInitiative({ programId, name: 'x', ownerIds: ['bad id'] }, owner))).details.field).toBe('ownerIds[0]');
    // A project and its tasks can belong to the initiative.
    const projectId = (await h.projects.createProject({ workspaceId: ws, name: 'P', initiativeId: initiative?.id }, owner)).project?.id as string;
    expect((await h.projects.listProjects({ workspaceId: ws, initiativeId: initiative?.id }, owner)).projects.map((p) => p.id)).toEqual([projectId]);
    const { task } = await h.tasks.createTask({ projectId, title: 't', initiativeId: initiative?.id }, owner);
    expect((await h.tasks.searchTasks({ workspaceId: ws, initiativeId: initiative?.id }, owner)).tasks.map((t) => t.task?.id)).toEqual([task?.task?.id]);
  });

  it('initiatives: a token sees only its workspace; another workspace is 404', async () => {
    const other = await h.workspace({ ownerId: 'usr_x' });
    const programId = (await h.programs.createProgram({ workspaceId: other, name: 'Theirs' }, h.user('usr_x'))).program?.id as string;
    const id = (await h.programs.createInitiative({ programId, name: 'Theirs' }, h.user('usr_x'))).initiative?.id as string;
    const token = h.token(ws, ['projects:read']);
    expect((await failure(h.programs.getInitiative({ id }, token))).code).toBe('not-found');
    expect((await failure(h.programs.listInitiatives({ programId }, token))).code).toBe('not-found');
    expect((await h.programs.listPrograms({}, token)).programs).toEqual([]);
  });
});
