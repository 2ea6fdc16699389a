/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent. */
import { request } from '../../support/http.js';
import { expectFor, type Expectation, type MatrixEntry, type World } from '../world.js';

/**
 * Planning records (issues service): projects, milestones, programs, initiatives, issues and what
 * accumulates on them. Reads need the viewer role (tokens: `projects:read` / `issues:read`),
 * task writes the member role (`issues:write`), project-level writes the admin role
 * (`projects:write`); approvals are decided by signed-in members; the task contract is patched by
 * agent tokens only.
 */

interface Fixtures {
  projectId: string;
  milestoneId: string;
  programId: string;
  initiativeId: string;
  issueId: string;
}

const cache = new WeakMap<World, Promise<{ a: Fixtures; b: Fixtures }>>();

async function post(world: World, ws: 'a' | 'b', path: string, body: unknown): Promise<any> {
  const res = await request(world.baseUrl, 'POST', path, { cookie: world[ws].owner.cookie, body });
  if (res.status !== 201) throw new Error(`fixture ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

async function make(world: World, ws: 'a' | 'b'): Promise<Fixtures> {
  const workspaceId = world[ws].id;
  const project = await post(world, ws, '/api/projects', { workspaceId, name: `Matrix project ${ws}` });
  const milestone = await post(world, ws, '/api/milestones', { projectId: project.id, name: 'M' });
  const program = await post(world, ws, '/api/programs', { workspaceId, name: `Matrix program ${ws}` });
  const initiative = await post(world, ws, '/api/initiatives', { programId: program.id, name: 'I' });
  const issue = await post(world, ws, '/api/issues', { projectId: project.id, title: `Matrix issue ${ws}` });
  return { projectId: project.id, milestoneId: milestone.id, programId: program.id, initiativeId: initiative.id, issueId: issue.id };
}

function fixtures(world: World): Promise<{ a: Fixtures; b: Fixtures }> {
  let found = cache.get(world);
  if (!found) {
    found = Promise.all([make(world, 'a'), make(world, 'b')]).then(([a, b]) => ({ a, b }));
    cache.set(world, found);
  }
  return found;
}

const of = async (world: World, ws: 'a' | 'b') => (await fixtures(world))[ws];

/** A pending approval request on the workspace's issue (a decision uses one up). */
async function freshApproval(world: World, ws: 'a' | 'b'): Promise<{ issueId: string; approvalId: string }> {
  const { issueId } = await of(world, ws);
  const approval = await post(world, ws, `/api/issues/${issueId}/approvals`, { reason: 'Matrix approval' });
  return { issueId, approvalId: approval.id };
}

/** Token-only routes: sessions are refused whatever their role. */
const tokenOnly: Expectation = {
  anonymous: 401,
  wrongWorkspaceToken: 404,
  tokenLackingScope: 403,
  viewer: 403,
  member: 403,
  admin: 403,
  systemAdmin: 403,
};

/** An entry on a resource of the workspace, built from the fixtures. */
function on(
  method: MatrixEntry['method'],
  path: string,
  scope: MatrixEntry['scope'],
  build: (f: Fixtures, world: World, ws: 'a' | 'b') => { path: string; body?: unknown } | Promise<{ path: string; body?: unknown }>,
  expect: Expectation,
): MatrixEntry {
  return {
    method,
    path,
    scope,
    request: async (world) => ({ method, ...(await build(await of(world, 'a'), world, 'a')) }),
    againstB: async (world) => ({ method, ...(await build(await of(world, 'b'), world, 'b')) }),
    expect,
  };
}

export const entries: MatrixEntry[] = [
  on('GET', '/api/projects', 'projects:read', (_f, w, ws) => ({ path: `/api/projects?workspaceId=${w[ws].id}` }), expectFor.workspace('viewer')),
  on('POST', '/api/projects', 'projects:write', (_f, w, ws) => ({ path: '/api/projects', body: { workspaceId: w[ws].id, name: 'Matrix created' } }), expectFor.workspace('admin', 201)),
  on('PATCH', '/api/projects', 'projects:write', (f) => ({ path: '/api/projects', body: { projectId: f.projectId, status: 'active' } }), expectFor.workspace('admin')),
  on('GET', '/api/projects/{id}', 'projects:read', (f) => ({ path: `/api/projects/${f.projectId}` }), expectFor.workspace('viewer')),
  on('GET', '/api/milestones', 'projects:read', (f) => ({ path: `/api/milestones?projectId=${f.projectId}` }), expectFor.workspace('viewer')),
  on('POST', '/api/milestones', 'projects:write', (f) => ({ path: '/api/milestones', body: { projectId: f.projectId, name: 'Matrix milestone' } }), expectFor.workspace('admin', 201)),
  on('GET', '/api/programs', 'projects:read', (_f, w, ws) => ({ path: `/api/programs?workspaceId=${w[ws].id}` }), expectFor.workspace('viewer')),
  on('POST', '/api/programs', 'projects:write', (_f, w, ws) => ({ path: '/api/programs', body: { workspaceId: w[ws].id, name: 'Matrix program' } }), expectFor.workspace('admin', 201)),
  on('GET', '/api/initiatives', 'projects:read', (f) => ({ path: `/api/initiatives?programId=${f.programId}` }), expectFor.workspace('viewer')),
  on('POST', '/api/initiatives', 'projects:write', (f) => ({ path: '/api/initiatives', body: { programId: f.programId, name: 'Matrix initiative' } }), expectFor.workspace('admin', 201)),
  on('GET', '/api/initiatives/{id}', 'projects:read', (f) => ({ path: `/api/initiatives/${f.initiativeId}` }), expectFor.workspace('viewer')),
  on('GET', '/api/issues', 'issues:read', (_f, w, ws) => ({ path: `/api/issues?workspaceId=${w[ws].id}` }), expectFor.workspace('viewer')),
  on('POST', '/api/issues', 'issues:write', (f) => ({ path: '/api/issues', body: { projectId: f.projectId, title: 'Matrix created' } }), expectFor.workspace('member', 201)),
  on('GET', '/api/issues/reminders', 'issues:read', (_f, w, ws) => ({ path: `/api/issues/reminders?workspaceId=${w[ws].id}` }), expectFor.workspace('viewer')),
  on(
    'POST',
    '/api/issues/bulk-update',
    'issues:write',
    (f) => ({ path: '/api/issues/bulk-update', body: { issueIds: [f.issueId], mode: 'preview', patch: { priority: 'low' } } }),
    expectFor.workspace('member'),
  ),
  on('GET', '/api/issues/{id}', 'issues:read', (f) => ({ path: `/api/issues/${f.issueId}` }), expectFor.workspace('viewer')),
  on('PATCH', '/api/issues/{id}', 'issues:write', (f) => ({ path: `/api/issues/${f.issueId}`, body: { priority: 'high' } }), expectFor.workspace('member')),
  on('POST', '/api/issues/{id}/comments', 'issues:write', (f) => ({ path: `/api/issues/${f.issueId}/comments`, body: { body: 'Matrix comment' } }), expectFor.workspace('member', 201)),
  on('GET', '/api/issues/{id}/comments', 'issues:read', (f) => ({ path: `/api/issues/${f.issueId}/comments` }), expectFor.workspace('viewer')),
  on('POST', '/api/issues/{id}/time-entries', 'issues:write', (f) => ({ path: `/api/issues/${f.issueId}/time-entries`, body: { minutes: 5 } }), expectFor.workspace('member', 201)),
  on('GET', '/api/issues/{id}/time-entries', 'issues:read', (f) => ({ path: `/api/issues/${f.issueId}/time-entries` }), expectFor.workspace('viewer')),
  on(
    'POST',
    '/api/issues/{id}/evidence',
    'issues:write',
    (f) => ({ path: `/api/issues/${f.issueId}/evidence`, body: { kind: 'note', title: 'Matrix proof' } }),
    expectFor.workspace('member', 201),
  ),
  on('GET', '/api/issues/{id}/evidence', 'issues:read', (f) => ({ path: `/api/issues/${f.issueId}/evidence` }), expectFor.workspace('viewer')),
  on('POST', '/api/issues/{id}/approvals', 'issues:write', (f) => ({ path: `/api/issues/${f.issueId}/approvals`, body: { reason: 'Matrix' } }), expectFor.workspace('member', 201)),
  on('GET', '/api/issues/{id}/approvals', 'issues:read', (f) => ({ path: `/api/issues/${f.issueId}/approvals` }), expectFor.workspace('viewer')),
  on(
    'POST',
    '/api/issues/{id}/approvals/{approvalId}/decision',
    null,
    async (_f, world, ws) => {
      const { issueId, approvalId } = await freshApproval(world, ws);
      return { path: `/api/issues/${issueId}/approvals/${approvalId}/decision`, body: { decision: 'approved' } };
    },
    expectFor.session('member'),
  ),
  on('GET', '/api/issues/{id}/activity', 'issues:read', (f) => ({ path: `/api/issues/${f.issueId}/activity` }), expectFor.workspace('viewer')),
  on('GET', '/api/issues/{id}/task-contract', 'issues:read', (f) => ({ path: `/api/issues/${f.issueId}/task-contract` }), expectFor.workspace('viewer')),
  on(
    'PATCH',
    '/api/issues/{id}/task-contract',
    'issues:write',
    (f) => ({ path: `/api/issues/${f.issueId}/task-contract`, body: { agent: { instructions: { objective: 'Matrix goal' } } } }),
    tokenOnly,
  ),
];
