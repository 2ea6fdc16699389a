/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent. */
import { request } from '../../support/http.js';
import { expectFor, type Expectation, type MatrixEntry, type World } from '../world.js';

/**
 * Guidance (issues service GuidanceService): reads for viewers (tokens: `issues:read`); the
 * customization and the working standards are changed by admins (tokens: `admin`), knowledge
 * documents by admins (tokens: `projects:write`). Bootstrap and preflight describe the calling
 * token, so they are for tokens only and name no other workspace.
 */

interface Fixtures {
  issueId: string;
  documentId: string;
}

const cache = new WeakMap<World, Promise<{ a: Fixtures; b: Fixtures }>>();

async function post(world: World, ws: 'a' | 'b', path: string, body: unknown): Promise<any> {
  const res = await request(world.baseUrl, 'POST', path, { cookie: world[ws].owner.cookie, body });
  if (res.status !== 201) throw new Error(`fixture ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

async function make(world: World, ws: 'a' | 'b'): Promise<Fixtures> {
  const workspaceId = world[ws].id;
  const project = await post(world, ws, '/api/projects', { workspaceId, name: `Guidance project ${ws}` });
  const issue = await post(world, ws, '/api/issues', { projectId: project.id, title: `Guidance issue ${ws}` });
  const document = await post(world, ws, '/api/knowledgebase', { workspaceId, title: `Guidance doc ${ws}`, body: 'Body' });
  return { issueId: issue.id, documentId: document.id };
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

function on(
  method: MatrixEntry['method'],
  path: string,
  scope: MatrixEntry['scope'],
  build: (world: World, ws: 'a' | 'b') => Promise<{ path: string; body?: unknown }> | { path: string; body?: unknown },
  expect: Expectation,
): MatrixEntry {
  return {
    method,
    path,
    scope,
    request: async (world) => ({ method, ...(await build(world, 'a')) }),
    againstB: async (world) => ({ method, ...(await build(world, 'b')) }),
    expect,
  };
}

/** About the calling token: tokens of any workspace succeed, sessions are refused. */
const aboutTheToken: Expectation = {
  anonymous: 401,
  wrongWorkspaceToken: 200,
  tokenLackingScope: 403,
  viewer: 403,
  member: 403,
  admin: 403,
  systemAdmin: 403,
};

export const entries: MatrixEntry[] = [
  on('GET', '/api/workspaces/{id}/customization', 'issues:read', (w, ws) => ({ path: `/api/workspaces/${w[ws].id}/customization` }), expectFor.workspace('viewer')),
  on(
    'PATCH',
    '/api/workspaces/{id}/customization',
    'admin',
    (w, ws) => ({ path: `/api/workspaces/${w[ws].id}/customization`, body: { defaultViewMode: 'list' } }),
    expectFor.workspace('admin'),
  ),
  on('GET', '/api/workspaces/{id}/standards', 'issues:read', (w, ws) => ({ path: `/api/workspaces/${w[ws].id}/standards` }), expectFor.workspace('viewer')),
  on(
    'PATCH',
    '/api/workspaces/{id}/standards',
    'admin',
    (w, ws) => ({ path: `/api/workspaces/${w[ws].id}/standards`, body: { summary: 'Matrix standards' } }),
    expectFor.workspace('admin'),
  ),
  on('GET', '/api/workspaces/{id}/launch-readiness', 'issues:read', (w, ws) => ({ path: `/api/workspaces/${w[ws].id}/launch-readiness` }), expectFor.workspace('viewer')),
  on('GET', '/api/knowledgebase', 'issues:read', (w, ws) => ({ path: `/api/knowledgebase?workspaceId=${w[ws].id}` }), expectFor.workspace('viewer')),
  on(
    'POST',
    '/api/knowledgebase',
    'projects:write',
    (w, ws) => ({ path: '/api/knowledgebase', body: { workspaceId: w[ws].id, title: 'Matrix doc', body: 'x' } }),
    expectFor.workspace('admin', 201),
  ),
  on('GET', '/api/knowledgebase/{id}', 'issues:read', async (w, ws) => ({ path: `/api/knowledgebase/${(await of(w, ws)).documentId}` }), expectFor.workspace('viewer')),
  on(
    'PATCH',
    '/api/knowledgebase/{id}',
    'projects:write',
    async (w, ws) => ({ path: `/api/knowledgebase/${(await of(w, ws)).documentId}`, body: { tags: ['matrix'] } }),
    expectFor.workspace('admin'),
  ),
  on(
    'DELETE',
    '/api/knowledgebase/{id}',
    'projects:write',
    // A delete uses its document up: a fresh one per request.
    async (w, ws) => ({ path: `/api/knowledgebase/${(await post(w, ws, '/api/knowledgebase', { workspaceId: w[ws].id, title: 'To delete', body: 'x' })).id}` }),
    expectFor.workspace('admin'),
  ),
  on('GET', '/api/issues/{id}/context-pack', 'issues:read', async (w, ws) => ({ path: `/api/issues/${(await of(w, ws)).issueId}/context-pack` }), expectFor.workspace('viewer')),
  { method: 'GET', path: '/api/agents/bootstrap', scope: 'issues:read', request: () => ({ method: 'GET', path: '/api/agents/bootstrap' }), expect: aboutTheToken },
  { method: 'GET', path: '/api/agents/preflight', scope: 'issues:read', request: () => ({ method: 'GET', path: '/api/agents/preflight' }), expect: aboutTheToken },
];
