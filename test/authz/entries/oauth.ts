import { authorizationUrl, authorizeInBrowser, pkcePair, REDIRECT_URI, registerClient, tokenRequest } from '../../support/oauth.js';
import { request } from '../../support/http.js';
import { expectFor, type MatrixEntry, type World } from '../world.js';

/** One grant per workspace, made by its owner through MCP sign-in (revoking it again is harmless). */
const grants = new WeakMap<World, Map<'a' | 'b', Promise<string>>>();

function grantOf(world: World, workspace: 'a' | 'b'): Promise<string> {
  let byWorkspace = grants.get(world);
  if (!byWorkspace) grants.set(world, (byWorkspace = new Map()));
  let grant = byWorkspace.get(workspace);
  if (!grant) {
    grant = (async () => {
      const ws = world[workspace];
      const client = await registerClient(world.baseUrl);
      const pkce = pkcePair();
      const url = authorizationUrl(world.baseUrl, { client_id: client.client_id, code_challenge: pkce.challenge, code_challenge_method: 'S256', scope: 'issues:read' });
      const browser = await authorizeInBrowser(url, { email: ws.owner.email, password: ws.owner.password, workspaceId: ws.id, newAgentId: `matrix-${workspace}` });
      if (!browser.code) throw new Error(`no grant for workspace ${workspace}: ${browser.steps.join(' → ')}`);
      const tokens = await tokenRequest(world.baseUrl, { grant_type: 'authorization_code', code: browser.code, code_verifier: pkce.verifier, redirect_uri: REDIRECT_URI, client_id: client.client_id });
      if (tokens.status !== 200) throw new Error(`token exchange failed: ${JSON.stringify(tokens.body)}`);
      const listed = await request(world.baseUrl, 'GET', '/api/oauth/grants', { cookie: ws.owner.cookie });
      return (listed.body.data as { id: string; clientId: string }[]).find((g) => g.clientId === client.client_id)!.id;
    })();
    byWorkspace.set(workspace, grant);
  }
  return grant;
}

/** OAuth grants of MCP sign-in (gateway). */
export const entries: MatrixEntry[] = [
  {
    method: 'GET',
    path: '/api/oauth/grants',
    scope: 'admin',
    request: (world) => ({ method: 'GET', path: `/api/oauth/grants?workspaceId=${world.a.id}` }),
    againstB: (world) => ({ method: 'GET', path: `/api/oauth/grants?workspaceId=${world.b.id}` }),
    expect: expectFor.workspace('admin'),
  },
  {
    method: 'DELETE',
    path: '/api/oauth/grants/{id}',
    scope: 'admin',
    request: async (world) => ({ method: 'DELETE', path: `/api/oauth/grants/${await grantOf(world, 'a')}` }),
    againstB: async (world) => ({ method: 'DELETE', path: `/api/oauth/grants/${await grantOf(world, 'b')}` }),
    expect: expectFor.workspace('admin'),
  },
];
