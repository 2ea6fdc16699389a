import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import { createInProcessBus } from '@planning/bus';
import { ServiceError } from '@planning/errors';
import { createOutbox } from '@planning/outbox';
import { GuidanceService } from '@planning/proto/planning/issues/v1/guidance_pb';
import type { CallContext, Principal } from '@planning/rpc';
import type { DocumentStore } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GuidanceRepository } from '../store/guidance.js';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';
import { createGuidanceService } from './guidance-service.js';
import { createPlanningAccess } from './planning-access.js';
import { createLocalAccess } from './workspace-service.js';

type Methods = (typeof GuidanceService)['method'];
type Client = {
  [K in keyof Methods]: (request: MessageInitShape<Methods[K]['input']>, principal: Principal) => Promise<MessageShape<Methods[K]['output']>>;
};

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

let h: PlanningHarness;
let g: Client;
let ws: string;
let other: string;
let owner: Principal;
let projectId: string;

/** The guidance service over the harness's store, called through the protobuf codec as gRPC would. */
async function guidanceClient(harness: PlanningHarness): Promise<Client> {
  const outbox = await createOutbox({ store: harness.store as DocumentStore, bus: createInProcessBus(), source: 'issues', logger: quiet });
  const impl = createGuidanceService({
    guidance: await GuidanceRepository.open(harness.store, outbox),
    planning: harness.planning.planning,
    tasks: harness.planning.tasks,
    records: harness.planning.records,
    access: createPlanningAccess(createLocalAccess(harness.workspaces), harness.workspaces),
    clock: () => new Date(harness.now),
  }) as unknown as Record<string, (r: unknown, c: CallContext) => Promise<unknown>>;
  const client: Record<string, unknown> = {};
  for (const method of GuidanceService.methods) {
    client[method.localName] = async (request: unknown, principal: Principal) => {
      const input = method.input as DescMessage;
      const output = method.output as DescMessage;
      const req = fromBinary(input, toBinary(input, create(input, request as never)));
      const ctx = { principal, deadline: undefined, signal: new AbortController().signal } as unknown as CallContext;
      const res = await impl[method.localName]!(req, ctx);
      return fromBinary(output, toBinary(output, create(output, res as never)));
    };
  }
  return client as Client;
}

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
  g = await guidanceClient(h);
  ws = await h.workspace({ ownerId: 'usr_owner' });
  other = await h.workspace({ ownerId: 'usr_other' });
  owner = h.user('usr_owner');
  await h.addMember(ws, 'usr_viewer', 'viewer');
  projectId = (await h.projects.createProject({ workspaceId: ws, name: 'P' }, owner)).project?.id as string;
});

afterEach(async () => {
  await h.close();
});

describe('guidance: workspace customization', () => {
  it('guidance: a workspace that never changed it gets the defaults and a setup path computed from its records', async () => {
    const { customization: c } = await g.getWorkspaceCustomization({ workspaceId: ws }, h.token(ws, ['issues:read'], 'agent-a'));
    expect(c?.source).toBe('default');
    expect(c?.version).toBe(0);
    expect(c?.viewModes.map((m) => [m.label, m.enabled])).toEqual([
      ['Cards', true],
      ['List', true],
      ['Tags', true],
      ['Swimlanes', true],
    ]);
    expect(c?.viewPresets.map((p) => p.id)).toContain('ready-queue');
    expect(c?.evidencePolicy).toMatchObject({ requiredForDone: true, minimumItems: 1, requireCheckCoverage: true });
    expect(c?.handoffPacket?.requiredSections).toContain('verification');
    expect(c?.rulesCenter.find((r) => r.id === 'status-moves')).toMatchObject({ enforcedBy: 'service', severity: 'must' });
    const steps = Object.fromEntries((c?.adminSetupPath ?? []).map((s) => [s.id, s.done]));
    expect(steps).toMatchObject({ 'create-project': true, 'invite-members': true, 'connect-agent': false, 'plan-tasks': false, 'publish-standards': false });

    await h.addAgent(ws, 'agent-a');
    await h.tasks.createTask(
      {
        projectId,
        title: 'Briefed',
        instructions: { objective: 'Do it', expectedOutput: 'A PR', verification: ['tests pass'], constraints: [], permissions: [], escalation: '' },
      },
      owner,
    );
    const again = await g.getWorkspaceCustomization({ workspaceId: ws }, owner);
    const after = Object.fromEntries((again.customization?.adminSetupPath ?? []).map((s) => [s.id, s.done]));
    expect(after).toMatchObject({ 'connect-agent': true, 'plan-tasks': true, 'write-briefs': true });
  });

  it('guidance: an admin changes sections, a retry changes nothing, and one event names the changed sections', async () => {
    const patch = {
      workspaceId: ws,
      enabledViewModes: { values: ['list', 'cards'] },
      defaultViewMode: 'list',
      viewPresets: { presets: [{ id: 'mine', name: 'Mine', viewMode: 'list', filters: { status: ['ready'], priority: [], labels: [] }, sort: 'dueDate' }] },
      workspaceRules: { rules: [{ id: 'small-prs', title: 'Small pull requests', description: 'Under 400 lines', severity: 'should' }] },
    };
    const first = await g.updateWorkspaceCustomization(patch, owner);
    expect(first.changedFields).toEqual(['enabledViewModes', 'defaultViewMode', 'viewPresets', 'workspaceRules']);
    expect(first.customization).toMatchObject({ source: 'stored', version: 1, defaultViewMode: 'list', updatedBy: 'usr_owner' });
    expect(first.customization?.viewModes.filter((m) => m.enabled).map((m) => m.id)).toEqual(['cards', 'list']);
    expect(first.customization?.rulesCenter.at(-1)).toMatchObject({ id: 'small-prs', enforcedBy: 'workspace' });
    const retry = await g.updateWorkspaceCustomization(patch, owner);
    expect(retry.changedFields).toEqual([]);
    expect(retry.customization?.version).toBe(1);
    const events = await h.events('workspace-customization.updated');
    expect(events).toHaveLength(1);
    expect(events[0]?.data).toEqual({ subject: { type: 'workspace-customization', id: ws }, changedFields: ['enabledViewModes', 'defaultViewMode', 'viewPresets', 'workspaceRules'], version: 1 });
    expect(JSON.stringify(events[0])).not.toContain('Small pull requests');
  });

  it('guidance: customization refusals: viewer, token without admin, another workspace, bad values, stale version', async () => {
    const patch = { workspaceId: ws, defaultViewMode: 'tags' };
    expect((await failure(g.updateWorkspaceCustomization(patch, h.user('usr_viewer')))).code).toBe('forbidden');
    expect((await failure(g.updateWorkspaceCustomization(patch, h.token(ws, ['issues:read', 'issues:write'])))).details.reason).toBe('missing-scope');
    expect((await failure(g.updateWorkspaceCustomization(patch, h.token(other, ['admin'])))).code).toBe('not-found');
    expect((await g.updateWorkspaceCustomization(patch, h.token(ws, ['admin']))).changedFields).toEqual(['defaultViewMode']);

    const bad = await failure(g.updateWorkspaceCustomization({ workspaceId: ws, enabledViewModes: { values: ['list'] }, defaultViewMode: 'cards' }, owner));
    expect(bad).toMatchObject({ code: 'invalid-input', details: { field: 'defaultViewMode' } });
    const preset = await failure(
      g.updateWorkspaceCustomization(
        { workspaceId: ws, viewPresets: { presets: [{ id: 'mine', name: 'Mine', viewMode: 'kanban', filters: { status: [], priority: [], labels: [] } }] } },
        owner,
      ),
    );
    expect(preset.details.field).toBe('viewPresets[0].viewMode');
    const status = await failure(
      g.updateWorkspaceCustomization(
        { workspaceId: ws, viewPresets: { presets: [{ id: 'mine', name: 'Mine', viewMode: 'list', filters: { status: ['open'], priority: [], labels: [] } }] } },
        owner,
      ),
    );
    expect(status.details.field).toBe('viewPresets[0].filters.status[0]');
    const clash = await failure(g.updateWorkspaceCustomization({ workspaceId: ws, workspaceRules: { rules: [{ id: 'status-moves', title: 'Mine', description: '', severity: 'must' }] } }, owner));
    expect(clash.details.field).toBe('workspaceRules[0].id');
    const empty = await failure(g.updateWorkspaceCustomization({ workspaceId: ws }, owner));
    expect(empty.code).toBe('invalid-input');
    const stale = await failure(g.updateWorkspaceCustomization({ workspaceId: ws, defaultViewMode: 'list', expectedVersion: 7 }, owner));
    expect(stale).toMatchObject({ code: 'work-already-claimed', details: { reason: 'version-conflict' } });
    // Nothing of the refused requests was stored.
    expect((await g.getWorkspaceCustomization({ workspaceId: ws }, owner)).customization).toMatchObject({ version: 1, defaultViewMode: 'tags' });
  });

  it('guidance: turning off the default view mode moves the default to the first enabled one', async () => {
    const { customization } = await g.updateWorkspaceCustomization({ workspaceId: ws, enabledViewModes: { values: ['swimlanes', 'tags'] }, viewPresets: { presets: [] } }, owner);
    expect(customization?.defaultViewMode).toBe('tags');
  });
});

describe('guidance: working standards', () => {
  it('guidance: defaults until published; publishing stores them, a retry changes nothing', async () => {
    const before = await g.getWorkingStandards({ workspaceId: ws }, h.token(ws, ['issues:read']));
    expect(before.standards).toMatchObject({ source: 'default', version: 0 });
    expect(before.standards?.definitionOfDone.length).toBeGreaterThan(0);
    const adopt = await g.updateWorkingStandards({ workspaceId: ws }, owner);
    expect(adopt.standards).toMatchObject({ source: 'published', version: 1, publishedBy: 'usr_owner' });
    const change = { workspaceId: ws, definitionOfDone: { values: ['Tests pass', '  ', 'Docs updated'] }, summary: 'Ours' };
    const changed = await g.updateWorkingStandards(change, owner);
    expect(changed.changedFields).toEqual(['summary', 'definitionOfDone']);
    expect(changed.standards?.definitionOfDone).toEqual(['Tests pass', 'Docs updated']);
    expect((await g.updateWorkingStandards(change, owner)).changedFields).toEqual([]);
    expect((await h.events('working-standards.published')).map((e) => e.data.version)).toEqual([1, 2]);
    expect((await failure(g.updateWorkingStandards(change, h.user('usr_viewer')))).code).toBe('forbidden');
    const long = await failure(g.updateWorkingStandards({ workspaceId: ws, reviewExpectations: { values: ['x'.repeat(501)] } }, owner));
    expect(long.details.field).toBe('reviewExpectations[0]');
  });
});

describe('guidance: knowledge documents', () => {
  const doc = (title: string, body: string, tags: string[] = [], extra: Record<string, unknown> = {}) => ({ workspaceId: ws, title, body, tags, ...extra });

  it('guidance: search ranks title over tags over body, needs every word, pages by cursor', async () => {
    const writer = h.token(ws, ['projects:write'], 'writer');
    await g.createKnowledgeDocument(doc('Deploy runbook', 'How we roll out the service.', ['ops']), writer);
    await g.createKnowledgeDocument(doc('Architecture', 'The deploy pipeline builds one image.', ['design']), owner);
    await g.createKnowledgeDocument(doc('Release notes', 'Nothing about it.', ['deploy']), owner);
    await g.createKnowledgeDocument(doc('Unrelated', 'Cooking recipes.'), owner);
    await g.createKnowledgeDocument({ workspaceId: other, title: 'Deploy elsewhere', body: 'deploy', tags: [] }, h.user('usr_other'));

    const reader = h.token(ws, ['issues:read']);
    const hits = await g.searchKnowledgeDocuments({ q: 'DEPLOY' }, reader);
    expect(hits.hits.map((x) => [x.document?.title, x.score])).toEqual([
      ['Deploy runbook', 3],
      ['Release notes', 2],
      ['Architecture', 1],
    ]);
    expect(hits.hits[2]?.snippet).toContain('deploy pipeline');
    expect((await g.searchKnowledgeDocuments({ q: 'deploy image' }, reader)).hits.map((x) => x.document?.title)).toEqual(['Architecture']);
    expect((await g.searchKnowledgeDocuments({ tags: ['ops', 'design'] }, reader)).hits).toHaveLength(2);

    const first = await g.searchKnowledgeDocuments({ workspaceId: ws, limit: 3 }, owner);
    expect(first.hits).toHaveLength(3);
    const second = await g.searchKnowledgeDocuments({ workspaceId: ws, limit: 3, cursor: first.nextCursor }, owner);
    expect(second.hits).toHaveLength(1);
    expect(second.nextCursor).toBeUndefined();
    expect(new Set([...first.hits, ...second.hits].map((x) => x.document?.id)).size).toBe(4);

    expect((await failure(g.searchKnowledgeDocuments({ workspaceId: other }, reader))).code).toBe('not-found');
    expect((await failure(g.searchKnowledgeDocuments({}, owner))).details.field).toBe('workspaceId');
    expect((await failure(g.searchKnowledgeDocuments({ workspaceId: ws, cursor: 'bm90IGEgY3Vyc29y' }, owner))).details.field).toBe('cursor');
  });

  it('guidance: documents are changed and deleted by admins; links must be of the workspace; events carry no text', async () => {
    const created = await g.createKnowledgeDocument(doc('Secret title', 'Secret body', ['a'], { projectId, path: 'docs/a.md' }), owner);
    const id = created.document?.id as string;
    expect(created.document).toMatchObject({ projectId, path: 'docs/a.md', version: 1, createdBy: 'usr_owner' });
    const otherProject = (await h.projects.createProject({ workspaceId: other, name: 'Q' }, h.user('usr_other'))).project?.id as string;
    expect((await failure(g.createKnowledgeDocument(doc('X', 'Y', [], { projectId: otherProject }), owner))).code).toBe('not-found');
    expect((await failure(g.createKnowledgeDocument(doc('X', 'Y'), h.user('usr_viewer')))).code).toBe('forbidden');
    expect((await failure(g.createKnowledgeDocument(doc('', 'Y'), owner))).details.field).toBe('title');
    expect((await failure(g.createKnowledgeDocument(doc('X', 'Y', [], { url: 'ftp://x' }), owner))).details.field).toBe('url');

    const updated = await g.updateKnowledgeDocument({ id, body: 'New body', clearFields: ['path'] }, owner);
    expect(updated.changedFields).toEqual(['body', 'path']);
    expect(updated.document).toMatchObject({ body: 'New body', version: 2 });
    expect(updated.document?.path).toBeUndefined();
    expect((await g.updateKnowledgeDocument({ id, body: 'New body', clearFields: [] }, owner)).changedFields).toEqual([]);
    expect((await failure(g.updateKnowledgeDocument({ id, clearFields: ['title'] }, owner))).details.field).toBe('clearFields[0]');
    expect((await failure(g.getKnowledgeDocument({ id }, h.token(other, ['issues:read'])))).code).toBe('not-found');
    expect((await g.getKnowledgeDocument({ id }, h.token(ws, ['issues:read']))).document?.body).toBe('New body');

    expect((await g.deleteKnowledgeDocument({ id }, owner)).document?.id).toBe(id);
    expect((await failure(g.getKnowledgeDocument({ id }, owner))).code).toBe('not-found');
    const events = [...(await h.events('knowledge-document.created')), ...(await h.events('knowledge-document.updated')), ...(await h.events('knowledge-document.deleted'))];
    expect(events.map((e) => e.type)).toEqual(['knowledge-document.created', 'knowledge-document.updated', 'knowledge-document.deleted']);
    expect(JSON.stringify(events)).not.toMatch(/Secret|New body/);
  });
});

describe('guidance: context packs and launch readiness', () => {
  it("guidance: a task's context pack holds its project's and initiative's items and linked documents", async () => {
    const program = (await h.programs.createProgram({ workspaceId: ws, name: 'Prog' }, owner)).program?.id as string;
    const initiative = (
      await h.programs.createInitiative({ programId: program, name: 'Launch', goal: 'Ship', contextPack: [{ kind: 'doc', title: 'Plan', path: 'docs/plan.md' }] }, owner)
    ).initiative?.id as string;
    await h.projects.updateProject({ id: projectId, contextPack: { items: [{ kind: 'file', title: 'Main', path: 'src/main.ts' }] }, initiativeId: initiative }, owner);
    const task = (await h.tasks.createTask({ projectId, title: 'T' }, owner)).task?.task?.id as string;
    await g.createKnowledgeDocument({ workspaceId: ws, title: 'Linked to project', body: 'b', tags: [], projectId }, owner);
    await g.createKnowledgeDocument({ workspaceId: ws, title: 'Linked to initiative', body: 'b', tags: [], initiativeId: initiative }, owner);
    await g.createKnowledgeDocument({ workspaceId: ws, title: 'Not linked', body: 'b', tags: [] }, owner);

    const pack = await g.getContextPack({ issueId: task }, h.token(ws, ['issues:read']));
    expect(pack.issue).toMatchObject({ id: task, status: 'ready' });
    expect(pack.project?.items.map((i) => i.path)).toEqual(['src/main.ts']);
    expect(pack.initiative).toMatchObject({ id: initiative, goal: 'Ship' });
    expect(pack.initiative?.items.map((i) => i.path)).toEqual(['docs/plan.md']);
    expect(pack.documents.map((d) => d.title).sort()).toEqual(['Linked to initiative', 'Linked to project']);
    expect((await failure(g.getContextPack({ issueId: task }, h.token(other, ['issues:read'])))).code).toBe('not-found');
    expect((await failure(g.getContextPack({ issueId: task }, h.token(ws, ['agents:read'])))).code).toBe('forbidden');
  });

  it('guidance: launch readiness matches the diagnostics for the workspace and lists the open blockers', async () => {
    const blocker = (await h.tasks.createTask({ projectId, title: 'Blocker', labels: ['launch-blocker'], priority: 'urgent', acceptanceChecks: [{ id: '', title: 'c' }] }, owner)).task?.task
      ?.id as string;
    await h.tasks.createTask({ projectId, title: 'Other blocker', labels: ['launch-blocker'], priority: 'low' }, owner);
    await h.tasks.createTask({ projectId, title: 'Plain' }, owner);
    const readiness = await g.getLaunchReadiness({ workspaceId: ws }, h.token(ws, ['issues:read']));
    const diagnostics = await h.tasks.getProductReadiness({ workspaceIds: [ws] }, owner);
    expect(readiness.implementation).toEqual(diagnostics.implementation);
    expect(readiness.launchProof).toEqual(diagnostics.launchProof);
    expect(readiness.launchProof?.readyForPublicLaunch).toBe(false);
    expect(readiness.launchProof?.nextProof?.id).toBe(blocker);
    expect(readiness.blockers.map((b) => [b.title, b.checksDone, b.checksTotal])).toEqual([
      ['Blocker', 0, 1],
      ['Other blocker', 0, 0],
    ]);
    expect((await failure(g.getLaunchReadiness({ workspaceId: ws }, h.token(other, ['issues:read'])))).code).toBe('not-found');
  });
});
