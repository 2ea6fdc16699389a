import { request } from '../../support/http.js';
import { expectFor, type Expectation, type MatrixEntry, type World } from '../world.js';

/**
 * Agents and claims (agents-claims service). Ready work, claims, heartbeats and status posts are
 * for agent tokens only (sessions 403); a claim is released by its agent or a member session;
 * claims and the lease policy are read by anyone in the workspace (tokens: agents:read) and the
 * policy is set by admins (tokens: admin).
 */

/** Token-only routes on a workspace-A task: no principal of the matrix holds the claim, so none succeeds. */
const tokenOnly: Expectation = {
  anonymous: 401,
  wrongWorkspaceToken: 404,
  tokenLackingScope: 403,
  viewer: 403,
  member: 403,
  admin: 403,
  systemAdmin: 403,
};

const projects = new WeakMap<World, Promise<{ a: string; b: string }>>();

async function projectOf(world: World, ws: 'a' | 'b'): Promise<string> {
  let found = projects.get(world);
  if (!found) {
    const make = async (w: 'a' | 'b') => {
      const res = await request(world.baseUrl, 'POST', '/api/projects', { cookie: world[w].owner.cookie, body: { workspaceId: world[w].id, name: `Claims matrix ${w}` } });
      if (res.status !== 201) throw new Error(`fixture project: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.data.id as string;
    };
    found = Promise.all([make('a'), make('b')]).then(([a, b]) => ({ a, b }));
    projects.set(world, found);
  }
  return (await found)[ws];
}

/** A new ready task of the workspace. */
async function freshIssue(world: World, ws: 'a' | 'b'): Promise<string> {
  const res = await request(world.baseUrl, 'POST', '/api/issues', { cookie: world[ws].owner.cookie, body: { projectId: await projectOf(world, ws), title: 'Claims matrix task' } });
  if (res.status !== 201) throw new Error(`fixture issue: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.id;
}

/** A new task of the workspace under an active claim of a new agent (a release uses one up). */
async function claimedIssue(world: World, ws: 'a' | 'b'): Promise<string> {
  const issueId = await freshIssue(world, ws);
  const key = await world.freshKey(ws);
  const res = await request(world.baseUrl, 'POST', '/api/agents/claim', { token: key.token, body: { issueId } });
  if (res.status !== 200) throw new Error(`fixture claim: ${res.status} ${JSON.stringify(res.body)}`);
  return issueId;
}

function onIssue(
  method: MatrixEntry['method'],
  path: string,
  scope: MatrixEntry['scope'],
  build: (issueId: string) => { path: string; body?: unknown },
  expect: Expectation,
  fixture: (world: World, ws: 'a' | 'b') => Promise<string> = freshIssue,
): MatrixEntry {
  return {
    method,
    path,
    scope,
    request: async (world) => ({ method, ...build(await fixture(world, 'a')) }),
    againstB: async (world) => ({ method, ...build(await fixture(world, 'b')) }),
    expect,
  };
}

export const entries: MatrixEntry[] = [
  {
    method: 'GET',
    path: '/api/agents/ready-work',
    scope: 'agents:read',
    // The token's own queue: names no workspace resource, so a token of B gets B's queue.
    request: () => ({ method: 'GET', path: '/api/agents/ready-work' }),
    expect: { ...tokenOnly, wrongWorkspaceToken: 200 },
  },
  onIssue('POST', '/api/agents/claim', 'agents:execute', (issueId) => ({ path: '/api/agents/claim', body: { issueId } }), tokenOnly),
  onIssue('POST', '/api/agents/claims/{issueId}/heartbeat', 'agents:execute', (issueId) => ({ path: `/api/agents/claims/${issueId}/heartbeat`, body: {} }), tokenOnly),
  onIssue(
    'POST',
    '/api/agents/claims/{issueId}/status',
    'agents:execute',
    (issueId) => ({ path: `/api/agents/claims/${issueId}/status`, body: { message: 'Matrix status' } }),
    tokenOnly,
  ),
  onIssue(
    'POST',
    '/api/agents/claims/{issueId}/release',
    'agents:execute',
    (issueId) => ({ path: `/api/agents/claims/${issueId}/release`, body: {} }),
    expectFor.workspace('member'),
    claimedIssue,
  ),
  {
    method: 'GET',
    path: '/api/agents/claims',
    scope: 'agents:read',
    request: (world) => ({ method: 'GET', path: `/api/agents/claims?workspaceId=${world.a.id}` }),
    againstB: (world) => ({ method: 'GET', path: `/api/agents/claims?workspaceId=${world.b.id}` }),
    expect: expectFor.workspace('viewer'),
  },
  {
    method: 'GET',
    path: '/api/agents/claim-policy',
    scope: 'agents:read',
    request: (world) => ({ method: 'GET', path: `/api/agents/claim-policy?workspaceId=${world.a.id}` }),
    againstB: (world) => ({ method: 'GET', path: `/api/agents/claim-policy?workspaceId=${world.b.id}` }),
    expect: expectFor.workspace('viewer'),
  },
  {
    method: 'PUT',
    path: '/api/agents/claim-policy',
    scope: 'admin',
    request: (world) => ({ method: 'PUT', path: '/api/agents/claim-policy', body: { workspaceId: world.a.id, leaseSeconds: 1800 } }),
    againstB: (world) => ({ method: 'PUT', path: '/api/agents/claim-policy', body: { workspaceId: world.b.id, leaseSeconds: 1800 } }),
    expect: expectFor.workspace('admin'),
  },
];
