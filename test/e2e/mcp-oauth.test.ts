/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies and tool results are whatever the server sent; tests assert on them. */
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, createKey, createUser, createWorkspace, type TestUser } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../support/cluster.js';
import { login, request } from '../support/http.js';
import { startBalancer, type Balancer } from '../support/balancer.js';
import {
  authorizationUrl,
  authorizeInBrowser,
  consentPage,
  pkcePair,
  REDIRECT_URI,
  registerClient,
  startMetadataDocumentServer,
  TestOAuthClient,
  tokenRequest,
  type ConsentChoice,
} from '../support/oauth.js';

/**
 * MCP sign-in end to end (issue #13): the official TypeScript SDK client with its OAuth support
 * against a started instance — protected-resource metadata, authorization-server metadata,
 * dynamic client registration, PKCE, the sign-in and consent pages driven over HTTP, the code
 * exchange — then the whole job over MCP with the token it got, checked through REST.
 */

/** Connects the SDK client with OAuth: the first attempt sends the user to sign in; `finishAuth` takes the code. */
async function connectWithSignIn(mcpUrl: string, provider: TestOAuthClient, choice: ConsentChoice) {
  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  const client = new Client({ name: 'e2e-oauth', version: '1.0.0' });
  await expect(client.connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.authorizationUrl, 'the SDK sent the user to sign in').toBeDefined();
  const browser = await authorizeInBrowser(provider.authorizationUrl!, choice);
  expect(browser.code, `${browser.steps.join(' → ')}\n${browser.page?.html ?? ''}`).toBeDefined();
  await first.finishAuth(browser.code!);
  const connected = new Client({ name: 'e2e-oauth', version: '1.0.0' });
  await connected.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }));
  return { client: connected, browser };
}

describe('mcp sign-in (all-in-one)', () => {
  let cluster: Cluster;
  let admin: string;
  let ws: string;
  let projectId: string;
  let member: TestUser;

  const api = (method: string, path: string, body?: unknown, cookie = admin) => request(cluster.baseUrl, method, path, { cookie, ...(body !== undefined ? { body } : {}) });

  let cimd: Awaited<ReturnType<typeof startMetadataDocumentServer>>;

  beforeAll(async () => {
    // A Client ID Metadata Document on a local https server: the instance trusts its certificate and
    // may fetch from loopback (a test setting; by default private addresses are refused).
    cimd = await startMetadataDocumentServer((url) => ({
      client_id: url,
      client_name: 'Metadata document agent',
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }));
    cluster = await startCluster('all-in-one', { env: { NODE_EXTRA_CA_CERTS: cimd.caFile, OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES: '1' } });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = (await createWorkspace(cluster.baseUrl, admin, 'Sign-in', 'pro')).id;
    member = await createUser(cluster.baseUrl, admin, 'oauth-member');
    await addMember(cluster.baseUrl, admin, ws, member.id, 'member');
    await createKey(cluster.baseUrl, admin, ws, 'pro', ['issues:read'], 'claude-code');
    projectId = (await api('POST', '/api/projects', { workspaceId: ws, name: 'Signed in' })).body.data.id;
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
    await cimd?.close();
  });

  const mcpList = (token: string, headers: Record<string, string> = {}) =>
    request(cluster.baseUrl, 'POST', '/api/mcp', { token, headers: { accept: 'application/json', ...headers }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} } });
  const mcpCall = (token: string, name: string, args: Record<string, unknown>) =>
    request(cluster.baseUrl, 'POST', '/api/mcp', { token, headers: { accept: 'application/json' }, body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: `service.${name}`, arguments: args } } });

  /** A raw authorization-code flow (DCR, PKCE, resource indicator): the code and what exchanging it needs. */
  async function codeFor(choice: ConsentChoice, params: Record<string, string> = {}) {
    const client = await registerClient(cluster.baseUrl);
    const pkce = pkcePair();
    const url = authorizationUrl(cluster.baseUrl, {
      client_id: client.client_id,
      code_challenge: pkce.challenge,
      code_challenge_method: 'S256',
      resource: `${cluster.baseUrl}/api/mcp`,
      scope: 'issues:read issues:write agents:read agents:execute',
      ...params,
    });
    const browser = await authorizeInBrowser(url, choice);
    return { client, pkce, browser, code: browser.code };
  }
  async function tokensFor(choice: ConsentChoice, params: Record<string, string> = {}) {
    const { client, pkce, code, browser } = await codeFor(choice, params);
    expect(code, `${browser.steps.join(' → ')} ${browser.error ?? ''}`).toBeDefined();
    const exchanged = await tokenRequest(cluster.baseUrl, { grant_type: 'authorization_code', code: code!, code_verifier: pkce.verifier, redirect_uri: REDIRECT_URI, client_id: client.client_id });
    expect(exchanged.status, JSON.stringify(exchanged.body)).toBe(200);
    return { client, access: exchanged.body.access_token as string, refresh: exchanged.body.refresh_token as string, scope: exchanged.body.scope as string };
  }
  const asMember = (extra: Partial<ConsentChoice> = {}): ConsentChoice => ({ email: member.email, password: member.password, agentId: 'claude-code', ...extra });

  it('mcp sign-in: the SDK client signs in (metadata, registration, PKCE, consent over HTTP), then claims, posts status, adds evidence and completes a task', async () => {
    const mcpUrl = `${cluster.baseUrl}/api/mcp`;
    const task = (await api('POST', '/api/issues', { projectId, title: 'Done over OAuth', acceptanceChecks: [{ title: 'Proof' }] })).body.data;
    const provider = new TestOAuthClient();
    const { client, browser } = await connectWithSignIn(mcpUrl, provider, { email: member.email, password: member.password, agentId: 'claude-code' });
    expect(browser.steps.some((s) => s.includes('/consent'))).toBe(true);
    expect(provider.tokens()?.refresh_token).toEqual(expect.any(String));

    const tools = (await client.listTools()).tools;
    expect(tools.map((t) => t.name)).toContain('service.claim_work');
    const call = async (name: string, args: Record<string, unknown>) => {
      const result: any = await client.callTool({ name: `service.${name}`, arguments: args });
      expect(result.isError, `${name}: ${JSON.stringify(result.structuredContent)}`).toBeFalsy();
      return result.structuredContent.data;
    };
    const claimed = await call('claim_work', { issueId: task.id });
    expect(claimed.claim.agentId).toBe('claude-code');
    const fencingToken = claimed.claim.fencingToken;
    await call('post_status', { issueId: task.id, message: 'Signed in and working', fencingToken });
    await call('add_evidence', { issueId: task.id, kind: 'test-result', title: 'All green', checkId: task.acceptanceChecks[0].id });
    const done = await call('update_issue_status', { issueId: task.id, status: 'in-review', fencingToken });
    expect(done.status).toBe('in-review');
    await client.close();

    const detail = (await api('GET', `/api/issues/${task.id}`)).body.data;
    expect(detail.status).toBe('in-review');
    expect(detail.acceptanceChecks[0].done).toBe(true);
  });

  it('mcp sign-in: protected-resource metadata (both forms) names the MCP URL and the issuer, whose RFC 8414 metadata offers code + PKCE S256 only', async () => {
    const mcpUrl = `${cluster.baseUrl}/api/mcp`;
    const [bare, suffixed] = await Promise.all(['', '/api/mcp'].map(async (suffix) => (await fetch(`${cluster.baseUrl}/.well-known/oauth-protected-resource${suffix}`)).json() as Promise<any>));
    expect(suffixed).toEqual(bare);
    expect(bare).toMatchObject({ resource: mcpUrl, authorization_servers: [cluster.baseUrl], bearer_methods_supported: ['header'] });
    expect(bare.scopes_supported).toEqual(expect.arrayContaining(['issues:read', 'issues:write', 'agents:read', 'agents:execute']));
    // A 401 points there, with the scopes an agent asks for.
    const challenge = (await request(cluster.baseUrl, 'POST', '/api/mcp', { headers: { accept: 'application/json' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })).headers.get('www-authenticate');
    expect(challenge).toContain(`resource_metadata="${cluster.baseUrl}/.well-known/oauth-protected-resource/api/mcp"`);
    expect(challenge).toContain('scope="issues:read issues:write agents:read agents:execute"');
    const server: any = await (await fetch(`${cluster.baseUrl}/.well-known/oauth-authorization-server`)).json();
    expect(server).toMatchObject({
      issuer: cluster.baseUrl,
      authorization_endpoint: `${cluster.baseUrl}/oauth/authorize`,
      token_endpoint: `${cluster.baseUrl}/oauth/token`,
      registration_endpoint: `${cluster.baseUrl}/oauth/register`,
      revocation_endpoint: `${cluster.baseUrl}/oauth/revoke`,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      client_id_metadata_document_supported: true,
    });
    expect(server.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token']));
    expect(server.grant_types_supported).not.toContain('implicit');
    expect(server.token_endpoint_auth_methods_supported).toContain('none');
    // Registration refuses what it cannot honour with the RFC 7591 JSON error.
    const bad = await fetch(`${cluster.baseUrl}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'no redirect', token_endpoint_auth_method: 'none' }) });
    expect(bad.status).toBe(400);
    const error = (await bad.json()) as Record<string, unknown>;
    expect(['invalid_redirect_uri', 'invalid_client_metadata']).toContain(error.error);
    expect(JSON.stringify(error)).not.toMatch(/stack|node_modules|oidc|koa|\.(js|ts)\b/i);
  });

  it('mcp sign-in: a client identified by a Client ID Metadata Document (an https URL) signs in without registering', async () => {
    const provider = new TestOAuthClient('unused', cimd.url);
    const { client } = await connectWithSignIn(`${cluster.baseUrl}/api/mcp`, provider, asMember());
    expect(provider.clientInformation()?.client_id).toBe(cimd.url);
    expect((await client.listTools()).tools.length).toBe(27);
    await client.close();
    expect(cimd.requests).toBeGreaterThan(0);
    const grant = (await api('GET', '/api/oauth/grants', undefined, member.cookie)).body.data.find((g: any) => g.clientId === cimd.url);
    expect(grant).toMatchObject({ clientName: 'Metadata document agent', agentId: 'claude-code' });
    // A metadata document whose client_id is not its own URL is refused (invalid_client, no sign-in).
    const { challenge } = pkcePair();
    const forged = await fetch(authorizationUrl(cluster.baseUrl, { client_id: cimd.url.replace('client.json', 'other.json'), code_challenge: challenge, code_challenge_method: 'S256' }), { redirect: 'manual' });
    expect(forged.status).toBe(400);
    expect(await forged.text()).toContain('invalid_client');
  });

  it('mcp sign-in: PKCE is required and S256 only; an unknown or mismatched redirect URI is never redirected to', async () => {
    const client = await registerClient(cluster.baseUrl);
    const base = { client_id: client.client_id, resource: `${cluster.baseUrl}/api/mcp`, scope: 'issues:read' };
    // Without PKCE, or with `plain`: refused back to the (registered) redirect URI with invalid_request, before any sign-in.
    for (const pkce of [{}, { code_challenge: 'x'.repeat(43), code_challenge_method: 'plain' }] as Record<string, string>[]) {
      const res = await fetch(authorizationUrl(cluster.baseUrl, { ...base, ...pkce }), { redirect: 'manual' });
      expect(res.status).toBe(303);
      const back = new URL(res.headers.get('location')!);
      expect(back.href.startsWith(REDIRECT_URI)).toBe(true);
      expect(back.searchParams.get('error')).toBe('invalid_request');
      expect(back.searchParams.get('error_description')).toMatch(/PKCE|code_challenge/);
    }
    // An unregistered redirect URI: an error page of the service, no redirect anywhere.
    const { challenge } = pkcePair();
    for (const redirect of ['http://127.0.0.1:9/elsewhere', 'https://evil.example/callback']) {
      const res = await fetch(authorizationUrl(cluster.baseUrl, { ...base, code_challenge: challenge, code_challenge_method: 'S256', redirect_uri: redirect }), { redirect: 'manual' });
      expect(res.status).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      const html = await res.text();
      expect(html).toContain('redirect_uri');
      expect(html).not.toMatch(/at .*\.(js|ts):\d+|node_modules|stack/i);
    }
    // An unknown client: an error page too.
    const unknown = await fetch(authorizationUrl(cluster.baseUrl, { ...base, client_id: 'no-such-client', code_challenge: challenge, code_challenge_method: 'S256' }), { redirect: 'manual' });
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get('location')).toBeNull();
    // Another resource than the MCP endpoint: invalid_target, no token for another audience.
    const other = await fetch(authorizationUrl(cluster.baseUrl, { ...base, resource: 'https://other.example/api', code_challenge: challenge, code_challenge_method: 'S256' }), { redirect: 'manual' });
    expect(new URL(other.headers.get('location')!).searchParams.get('error')).toBe('invalid_target');
    // A wrong code_verifier at the token endpoint: invalid_grant (the RFC's JSON error, nothing internal).
    const { client: c2, code } = await codeFor(asMember());
    const wrong = await tokenRequest(cluster.baseUrl, { grant_type: 'authorization_code', code: code!, code_verifier: pkcePair().verifier, redirect_uri: REDIRECT_URI, client_id: c2.client_id });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ error: 'invalid_grant', error_description: expect.any(String) });
  });

  it('mcp sign-in: an authorization code works once; a replay, or a second redemption racing the first, revokes what it issued', async () => {
    const { client, pkce, code } = await codeFor(asMember());
    const exchange = () => tokenRequest(cluster.baseUrl, { grant_type: 'authorization_code', code: code!, code_verifier: pkce.verifier, redirect_uri: REDIRECT_URI, client_id: client.client_id });
    const first = await exchange();
    expect(first.status).toBe(200);
    expect((await mcpList(first.body.access_token as string)).status).toBe(200);
    const replay = await exchange();
    expect(replay).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    // The replay revoked the grant: the first token and its refresh token are refused.
    const after = await mcpList(first.body.access_token as string);
    expect(after.status).toBe(401);
    expect(after.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect((await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: first.body.refresh_token as string, client_id: client.client_id })).body.error).toBe('invalid_grant');

    // Two redemptions at once: exactly one gets tokens.
    for (let round = 0; round < 3; round++) {
      const raced = await codeFor(asMember());
      const both = await Promise.all(
        [0, 1].map(() => tokenRequest(cluster.baseUrl, { grant_type: 'authorization_code', code: raced.code!, code_verifier: raced.pkce.verifier, redirect_uri: REDIRECT_URI, client_id: raced.client.client_id })),
      );
      expect(both.filter((r) => r.status === 200), JSON.stringify(both)).toHaveLength(1);
      expect(both.find((r) => r.status !== 200)?.body.error).toBe('invalid_grant');
    }
  });

  it('mcp sign-in: refresh tokens rotate; a replayed refresh token revokes the whole family', async () => {
    const { client, access, refresh } = await tokensFor(asMember());
    const refreshed = await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.client_id });
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(refresh);
    expect((await mcpList(refreshed.body.access_token as string)).status).toBe(200);
    // The old refresh token again: refused, and everything of the grant with it.
    const replay = await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.client_id });
    expect(replay).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    for (const token of [access, refreshed.body.access_token as string]) expect((await mcpList(token)).status).toBe(401);
    expect((await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refreshed.body.refresh_token as string, client_id: client.client_id })).body.error).toBe('invalid_grant');
    const grants = (await api('GET', '/api/oauth/grants', undefined, member.cookie)).body.data;
    expect(grants.find((g: any) => g.revokeReason === 'replay')).toBeDefined();
  });

  it('mcp sign-in: the token endpoint answers the RFC JSON errors; RFC 7009 revocation ends the grant; the token is for the MCP endpoint only', async () => {
    /** The RFC's JSON error and nothing else (invalid_scope names the scope refused): no stack, no library or file names. */
    const refusedWith = (answer: { status: number; body: Record<string, unknown> }, status: number, error: string) => {
      expect(answer, JSON.stringify(answer.body)).toMatchObject({ status, body: { error } });
      expect(Object.keys(answer.body).sort()).toEqual(error === 'invalid_scope' ? ['error', 'error_description', 'scope'] : ['error', 'error_description']);
      expect(JSON.stringify(answer.body)).not.toMatch(/stack|node_modules|oidc|koa|\.(js|ts)\b/i);
    };
    const { client, access, refresh } = await tokensFor(asMember());
    refusedWith(await tokenRequest(cluster.baseUrl, { client_id: client.client_id }), 400, 'invalid_request');
    refusedWith(await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: 'no-such-client' }), 401, 'invalid_client');
    // Another client presenting this refresh token; more scope than was granted.
    const stranger = await registerClient(cluster.baseUrl);
    refusedWith(await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: stranger.client_id }), 400, 'invalid_grant');
    refusedWith(await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.client_id, scope: 'issues:read admin' }), 400, 'invalid_scope');
    expect((await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.client_id, scope: 'issues:read admin' })).body.scope).toBe('admin');
    // A code redeemed with another redirect URI than it was issued for: no tokens.
    const other = await codeFor(asMember());
    refusedWith(
      await tokenRequest(cluster.baseUrl, { grant_type: 'authorization_code', code: other.code!, code_verifier: other.pkce.verifier, redirect_uri: 'http://127.0.0.1:9/elsewhere', client_id: other.client.client_id }),
      400,
      'invalid_grant',
    );

    // Bound to the MCP resource: the REST API does not take it.
    expect((await mcpList(access)).status).toBe(200);
    const rest = await request(cluster.baseUrl, 'GET', `/api/issues?workspaceId=${ws}`, { token: access });
    expect(rest.status).toBe(401);
    expect(JSON.stringify(rest.body)).not.toContain(access);

    // The client revokes its refresh token (RFC 7009): the whole grant ends, its access token from the next request on.
    const revoked = await fetch(`${cluster.baseUrl}/oauth/revoke`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token: refresh, token_type_hint: 'refresh_token', client_id: client.client_id }).toString() });
    expect(revoked.status).toBe(200);
    const after = await mcpList(access);
    expect(after.status).toBe(401);
    expect(after.headers.get('www-authenticate')).toContain('error="invalid_token"');
    refusedWith(await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.client_id }), 400, 'invalid_grant');
    const grantOf = async () => ((await api('GET', '/api/oauth/grants', undefined, member.cookie)).body.data as any[]).find((g) => g.clientId === client.client_id);
    await expect.poll(async () => (await grantOf())?.revokeReason, { timeout: 15_000 }).toBe('client-revoked');
    const grantId = (await grantOf()).id;
    await expect
      .poll(async () => ((await api('GET', `/api/admin/audit-events?type=oauth.grant.revoked&limit=200&workspaceId=${ws}`)).body.data as any[]).some((e) => e.subject.id === grantId && e.reason === 'client-revoked'), { timeout: 15_000 })
      .toBe(true);
  });

  it('mcp sign-in: grants are listed and revoked through the API; revocation applies on the next request; every step is audited', async () => {
    const { client, access, refresh } = await tokensFor(asMember());
    const ok = await mcpList(access);
    expect(ok.status).toBe(200);
    // A grant counts like a key: its own rate-limit bucket and the workspace's API quota.
    expect(ok.headers.get('ratelimit-policy')).toBe('"burst";q=1200;w=60');
    const used = async () => ((await api('GET', `/api/billing/usage?workspaceId=${ws}`)).body.data.quotas as any[]).find((q) => q.kind === 'api-requests').used as number;
    const before = await used();
    for (let i = 0; i < 3; i++) expect((await mcpList(access)).status).toBe(200);
    expect(await used()).toBe(before + 3);
    // The plan caps it like a key: a plan without API access turns it off, and back on.
    expect((await api('PATCH', `/api/workspaces/${ws}`, { planId: 'free' })).status).toBe(200);
    const off = await mcpList(access);
    expect(off.status).toBe(403);
    expect(off.body.error.reason).toBe('plan-without-api');
    expect((await api('PATCH', `/api/workspaces/${ws}`, { planId: 'pro' })).status).toBe(200);
    expect((await mcpList(access)).status).toBe(200);
    const mine = (await api('GET', '/api/oauth/grants', undefined, member.cookie)).body.data;
    const grant = mine.find((g: any) => g.clientId === client.client_id);
    expect(grant).toMatchObject({ workspaceId: ws, agentId: 'claude-code', userId: member.id, scopes: ['issues:read', 'issues:write', 'agents:read', 'agents:execute'], revokedAt: null });
    expect(grant.lastUsedAt).toEqual(expect.any(String));
    expect(JSON.stringify(mine)).not.toContain(access);
    const listed = (await api('GET', `/api/oauth/grants?workspaceId=${ws}`)).body.data.map((g: any) => g.id);
    expect(listed).toContain(grant.id);
    // Another member may neither list the workspace's grants nor revoke this one.
    const other = await createUser(cluster.baseUrl, admin, 'oauth-other');
    await addMember(cluster.baseUrl, admin, ws, other.id, 'member');
    expect((await api('GET', `/api/oauth/grants?workspaceId=${ws}`, undefined, other.cookie)).status).toBe(403);
    expect((await api('DELETE', `/api/oauth/grants/${grant.id}`, undefined, other.cookie)).status).toBe(403);
    expect((await api('DELETE', '/api/oauth/grants/grt_unknown', undefined, member.cookie)).status).toBe(404);

    const revoked = await api('DELETE', `/api/oauth/grants/${grant.id}`, undefined, member.cookie);
    expect(revoked.status).toBe(200);
    expect(revoked.body.data).toMatchObject({ id: grant.id, revokedAt: expect.any(String), revokeReason: 'revoked' });
    const refused = await mcpList(access);
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('unauthorized');
    expect((await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.client_id })).body.error).toBe('invalid_grant');
    expect((await api('DELETE', `/api/oauth/grants/${grant.id}`, undefined, member.cookie)).status).toBe(200);

    // Audited (redacted: ids, outcome, reason): created, refreshed, revoked, and the refused token.
    const { refresh: r2, client: c2 } = await tokensFor(asMember());
    expect((await tokenRequest(cluster.baseUrl, { grant_type: 'refresh_token', refresh_token: r2, client_id: c2.client_id })).status).toBe(200);
    const ofType = async (type: string, workspace = true) =>
      (await api('GET', `/api/admin/audit-events?type=${type}&limit=200${workspace ? `&workspaceId=${ws}` : ''}`)).body.data as any[];
    await expect.poll(async () => (await ofType('oauth.grant.created')).some((e) => e.subject.id === grant.id), { timeout: 15_000 }).toBe(true);
    await expect.poll(async () => (await ofType('oauth.grant.revoked')).some((e) => e.subject.id === grant.id && e.reason === 'revoked'), { timeout: 15_000 }).toBe(true);
    await expect.poll(async () => (await ofType('oauth.grant.refreshed')).length, { timeout: 15_000 }).toBeGreaterThan(0);
    await expect.poll(async () => (await ofType('auth.token.denied', false)).some((e) => e.reason === 'revoked-grant' && e.subject.id === grant.id), { timeout: 15_000 }).toBe(true);
    const events = [...(await ofType('oauth.grant.created')), ...(await ofType('oauth.grant.refreshed')), ...(await ofType('auth.token.denied', false))];
    expect(JSON.stringify(events)).not.toContain(access);
    expect(JSON.stringify(events)).not.toContain(refresh);
  });

  it('mcp sign-in: consent never exceeds the role or the plan: cut down when asked for more, refused when forced; a plan without API access cannot grant', async () => {
    // A member asked for admin scopes: they are withheld, not offered.
    const client = await registerClient(cluster.baseUrl, { scope: 'issues:read issues:write agents:read agents:execute admin projects:write' });
    const { challenge } = pkcePair();
    const url = authorizationUrl(cluster.baseUrl, { client_id: client.client_id, code_challenge: challenge, code_challenge_method: 'S256', scope: 'issues:read admin projects:write' });
    const stopped = await authorizeInBrowser(url, { ...asMember(), scopes: ['issues:read', 'admin'] });
    // The forced scope is refused (400) with the consent page again; nothing is granted.
    expect(stopped.page?.status).toBe(400);
    expect(stopped.page?.html).toContain('Not grantable here: admin');
    const offered = consentPage(stopped.page!.html);
    expect(offered.scopes).toEqual(['issues:read']);
    expect(offered.withheld).toEqual(['projects:write', 'admin']);
    // Taking what is offered works, and the token carries only that.
    const cut = await authorizeInBrowser(url, asMember());
    expect(cut.code).toBeDefined();
    // A viewer may delegate reading only.
    const viewer = await createUser(cluster.baseUrl, admin, 'oauth-viewer');
    await addMember(cluster.baseUrl, admin, ws, viewer.id, 'viewer');
    const asViewer = await tokensFor({ email: viewer.email, password: viewer.password, agentId: 'claude-code' });
    expect(asViewer.scope.split(' ').sort()).toEqual(['agents:read', 'issues:read']);
    // …and a write tool is refused with the step-up challenge naming the scopes to ask for.
    const write = await mcpCall(asViewer.access, 'add_comment', { issueId: 'iss_x', body: 'x' });
    expect(write.status).toBe(403);
    expect(write.headers.get('www-authenticate')).toBe(
      `Bearer realm="planning-service", error="insufficient_scope", scope="issues:read issues:write agents:read agents:execute", resource_metadata="${cluster.baseUrl}/.well-known/oauth-protected-resource/api/mcp", error_description="The token lacks issues:write, agents:execute"`,
    );
    // A member cannot name a new agent (agents are created by admins); an admin can.
    const fresh = await authorizeInBrowser((await codeUrl()).url, { ...asMember(), newAgentId: 'brand-new' });
    expect(fresh.page?.status).toBe(403);
    const byAdmin = await authorizeInBrowser((await codeUrl()).url, { email: ADMIN_EMAIL, password: cluster.adminPassword, workspaceId: ws, newAgentId: 'made-by-consent' });
    expect(byAdmin.code).toBeDefined();
    expect((await api('GET', `/api/workspaces/${ws}/agents`)).body.data.map((a: any) => a.agentId)).toContain('made-by-consent');
    // The free plan has no API access: the workspace is listed as unavailable, and a forced consent is refused.
    const free = (await createWorkspace(cluster.baseUrl, admin, 'No API', 'free')).id;
    await addMember(cluster.baseUrl, admin, free, member.id, 'admin');
    const picker = await authorizeInBrowser((await codeUrl()).url, { ...asMember(), showWorkspaces: true });
    expect(picker.page?.html).toContain('Choose a workspace');
    expect(picker.page?.html).toContain('the free plan has no API access');
    const forced = await authorizeInBrowser((await codeUrl()).url, { ...asMember(), workspaceId: free });
    expect(forced.code).toBeUndefined();
    expect(forced.page?.status).toBe(403);
    expect(forced.page?.html).toContain('does not include API access');
    // Denying sends access_denied back to the client.
    const denied = await authorizeInBrowser((await codeUrl()).url, { ...asMember(), deny: true });
    expect(denied.error).toBe('access_denied');
  });

  async function codeUrl() {
    const client = await registerClient(cluster.baseUrl);
    const pkce = pkcePair();
    return { client, pkce, url: authorizationUrl(cluster.baseUrl, { client_id: client.client_id, code_challenge: pkce.challenge, code_challenge_method: 'S256', scope: 'issues:read issues:write agents:read agents:execute' }) };
  }
});

describe('mcp sign-in: Client ID Metadata Documents on private addresses (all-in-one, default settings)', () => {
  let cluster: Cluster;
  let cimd: Awaited<ReturnType<typeof startMetadataDocumentServer>>;

  beforeAll(async () => {
    cimd = await startMetadataDocumentServer((url) => ({ client_id: url, client_name: 'Private', redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none' }));
    // The certificate is trusted, so only the SSRF guard stands between the server and the document.
    cluster = await startCluster('all-in-one', { env: { NODE_EXTRA_CA_CERTS: cimd.caFile } });
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
    await cimd?.close();
  });

  it('mcp sign-in: a metadata document on a loopback address is never requested: invalid_client, no sign-in', async () => {
    const { challenge } = pkcePair();
    const res = await fetch(authorizationUrl(cluster.baseUrl, { client_id: cimd.url, code_challenge: challenge, code_challenge_method: 'S256' }), { redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(await res.text()).toContain('invalid_client');
    expect(cimd.requests).toBe(0);
  });
});

describe('mcp sign-in (distributed, two gateway replicas behind a load balancer)', () => {
  let cluster: Cluster;
  let balancer: Balancer;
  let admin: string;
  let ws: string;
  let projectId: string;
  let member: TestUser;

  beforeAll(async () => {
    // The balancer's address is the public URL of both replicas (the issuer and the MCP resource).
    balancer = await startBalancer();
    cluster = await startCluster('distributed', { mongoWire: true, envFor: { gateway: { PUBLIC_URL: balancer.url } } });
    const second = await cluster.addGateway({ PUBLIC_URL: balancer.url });
    balancer.targets = [cluster.baseUrl, second.baseUrl];
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = (await createWorkspace(cluster.baseUrl, admin, 'Replicas', 'pro')).id;
    member = await createUser(cluster.baseUrl, admin, 'oauth-replicas');
    await addMember(cluster.baseUrl, admin, ws, member.id, 'member');
    await createKey(cluster.baseUrl, admin, ws, 'pro', ['issues:read'], 'replica-agent');
    projectId = (await request(cluster.baseUrl, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Replicated' } })).body.data.id;
  }, 240_000);

  afterAll(async () => {
    await cluster?.stop();
    await balancer?.close();
  });

  it('mcp sign-in: a flow begun on one replica finishes on the other; the token works on both for the whole job', async () => {
    const task = (await request(cluster.baseUrl, 'POST', '/api/issues', { cookie: admin, body: { projectId, title: 'Across replicas' } })).body.data;
    balancer.served.length = 0;
    const provider = new TestOAuthClient('replicated agent');
    const { client } = await connectWithSignIn(`${balancer.url}/api/mcp`, provider, { email: member.email, password: member.password, agentId: 'replica-agent' });
    // Every step alternated between the replicas: registration, authorization, sign-in, consent, resume and token exchange.
    const byPath = (pattern: RegExp) => new Set(balancer.served.filter((s) => pattern.test(s)).map((s) => s.split(' ')[0]));
    expect(byPath(/ \/oauth\//), balancer.served.join('\n')).toEqual(new Set(['0', '1']));
    const flow = balancer.served.filter((s) => / \/oauth\/(authorize|interaction|token)/.test(s)).map((s) => s.split(' ')[0]);
    expect(flow.some((target, i) => i > 0 && target !== flow[i - 1])).toBe(true);

    const call = async (name: string, args: Record<string, unknown>) => {
      const result: any = await client.callTool({ name: `service.${name}`, arguments: args });
      expect(result.isError, `${name}: ${JSON.stringify(result.structuredContent)}`).toBeFalsy();
      return result.structuredContent.data;
    };
    const claimed = await call('claim_work', { issueId: task.id });
    await call('post_status', { issueId: task.id, message: 'On replica one, then two', fencingToken: claimed.claim.fencingToken });
    await call('add_evidence', { issueId: task.id, kind: 'note', title: 'Replicated proof' });
    expect((await call('update_issue_status', { issueId: task.id, status: 'in-review', fencingToken: claimed.claim.fencingToken })).status).toBe('in-review');
    await client.close();
    expect(byPath(/POST \/api\/mcp/)).toEqual(new Set(['0', '1']));

    // A refresh on either replica, and revocation through one replica holds on the other at once.
    const refreshed = await tokenRequest(balancer.url, { grant_type: 'refresh_token', refresh_token: provider.tokens()!.refresh_token!, client_id: provider.clientInformation()!.client_id });
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
    const grant = (await request(cluster.gatewayUrls[0]!, 'GET', '/api/oauth/grants', { cookie: member.cookie })).body.data[0];
    expect((await request(cluster.baseUrl, 'DELETE', `/api/oauth/grants/${grant.id}`, { cookie: member.cookie })).status).toBe(200);
    for (const target of balancer.targets) {
      const res = await request(target, 'POST', '/api/mcp', { token: refreshed.body.access_token as string, headers: { accept: 'application/json' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
      expect(res.status, target).toBe(401);
    }
  });
});
