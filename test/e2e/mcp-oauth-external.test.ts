/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, createKey, createUser, createWorkspace, type TestKey, type TestUser } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../support/cluster.js';
import { login, request } from '../support/http.js';

/**
 * An external issuer instead of the built-in server (issue #13): an OIDC provider of the test's
 * own (discovery document and JWKS on a local port, keys made with `jose`) signs access tokens;
 * the MCP endpoint verifies them against its JWKS, checks issuer, audience and expiry, and maps
 * the claims to a user, workspace, agent and scopes. API keys keep working beside it.
 */
type SigningKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

describe('mcp with an external issuer (all-in-one)', () => {
  let cluster: Cluster;
  let issuer: { url: string; server: Server; key: SigningKey; jwk: JWK };
  let other: SigningKey;
  let admin: string;
  let ws: string;
  let projectId: string;
  let member: TestUser;
  let viewer: TestUser;
  let key: TestKey;

  const mcpUrl = () => `${cluster.baseUrl}/api/mcp`;
  const list = (token: string) => request(cluster.baseUrl, 'POST', '/api/mcp', { token, headers: { accept: 'application/json' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
  const sign = (claims: Record<string, unknown>, options: { key?: SigningKey; issuer?: string; audience?: string; expiresIn?: string | number; kid?: string } = {}) =>
    new SignJWT({ scope: 'issues:read issues:write agents:read agents:execute', ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? 'test-key' })
      .setIssuer(options.issuer ?? issuer.url)
      .setAudience(options.audience ?? mcpUrl())
      .setSubject(String(claims.email ?? 'someone'))
      .setIssuedAt()
      .setExpirationTime(options.expiresIn ?? '5m')
      .sign(options.key ?? issuer.key);

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256');
    other = (await generateKeyPair('ES256')).privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'test-key', alg: 'ES256', use: 'sig' };
    const server = createServer((req, res) => {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      if (req.url === '/.well-known/openid-configuration') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: url, jwks_uri: `${url}/keys` }));
      else if (req.url === '/keys') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    issuer = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, key: pair.privateKey, jwk };
    cluster = await startCluster('all-in-one', { env: { OAUTH_ISSUER: issuer.url } });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = (await createWorkspace(cluster.baseUrl, admin, 'External', 'pro')).id;
    member = await createUser(cluster.baseUrl, admin, 'ext-member');
    viewer = await createUser(cluster.baseUrl, admin, 'ext-viewer');
    await addMember(cluster.baseUrl, admin, ws, member.id, 'member');
    await addMember(cluster.baseUrl, admin, ws, viewer.id, 'viewer');
    key = await createKey(cluster.baseUrl, admin, ws, 'pro', ['issues:read', 'agents:read'], 'key-agent');
    projectId = (await request(cluster.baseUrl, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'External' } })).body.data.id;
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
    await new Promise<void>((resolve) => issuer?.server.close(() => resolve()));
  });

  it('mcp external issuer: metadata names it; a valid token maps to the user, workspace, agent and scopes and does the whole job', async () => {
    const metadata = await (await fetch(`${cluster.baseUrl}/.well-known/oauth-protected-resource/api/mcp`)).json();
    expect(metadata).toMatchObject({ resource: mcpUrl(), authorization_servers: [issuer.url] });
    // The built-in server is off: no authorization endpoints here.
    expect((await fetch(`${cluster.baseUrl}/.well-known/oauth-authorization-server`)).status).toBe(404);
    expect((await fetch(`${cluster.baseUrl}/oauth/authorize`)).status).toBe(404);

    const token = await sign({ email: member.email, planning_workspace: ws, planning_agent: 'ext-agent' });
    const client = new Client({ name: 'ext', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl()), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    const task = (await request(cluster.baseUrl, 'POST', '/api/issues', { cookie: admin, body: { projectId, title: 'Externally signed' } })).body.data;
    const call = async (name: string, args: Record<string, unknown>) => {
      const result: any = await client.callTool({ name: `service.${name}`, arguments: args });
      expect(result.isError, `${name}: ${JSON.stringify(result.structuredContent)}`).toBeFalsy();
      return result.structuredContent.data;
    };
    const claimed = await call('claim_work', { issueId: task.id });
    expect(claimed.claim.agentId).toBe('ext-agent');
    await call('post_status', { issueId: task.id, message: 'via the external issuer', fencingToken: claimed.claim.fencingToken });
    await call('add_evidence', { issueId: task.id, kind: 'note', title: 'Proof' });
    expect((await call('update_issue_status', { issueId: task.id, status: 'in-review', fencingToken: claimed.claim.fencingToken })).status).toBe('in-review');
    const bootstrap = await call('get_client_bootstrap', {});
    expect(bootstrap.identity).toMatchObject({ agentId: 'ext-agent', actorType: 'user-integration' });
    await client.close();
    // Counted like a key: rate-limit headers on every answer.
    expect((await list(token)).headers.get('ratelimit-policy')).toBe('"burst";q=1200;w=60');
    // API keys work beside it.
    expect((await list(key.token)).status).toBe(200);
  });

  it('mcp external issuer: wrong audience, expired, another issuer, a foreign signature, unknown user, no workspace, not a member: refused', async () => {
    const valid = { email: member.email, planning_workspace: ws, planning_agent: 'ext-agent' };
    const cases: [string, string, number][] = [
      ['wrong audience', await sign(valid, { audience: 'https://other.example/api/mcp' }), 401],
      ['expired', await sign(valid, { expiresIn: Math.floor(Date.now() / 1000) - 120 }), 401],
      ['another issuer', await sign(valid, { issuer: 'https://evil.example' }), 401],
      ['a foreign signature', await sign(valid, { key: other }), 401],
      ['unknown user', await sign({ ...valid, email: 'nobody@example.com' }), 401],
      ['no workspace claim', await sign({ email: member.email, planning_agent: 'ext-agent' }), 403],
      ['not a member', await sign({ ...valid, planning_workspace: (await createWorkspace(cluster.baseUrl, admin, 'Elsewhere', 'pro')).id }), 403],
      ['not a token', 'abc.def', 401],
    ];
    for (const [label, token, status] of cases) {
      const res = await list(token);
      expect(res.status, label).toBe(status);
      if (status === 401) {
        expect(res.headers.get('www-authenticate'), label).toContain('error="invalid_token"');
        expect(res.headers.get('www-authenticate'), label).toContain(`resource_metadata="${cluster.baseUrl}/.well-known/oauth-protected-resource/api/mcp"`);
      }
      expect(JSON.stringify(res.body), label).not.toMatch(/stack|node_modules|jose/i);
    }
    // Tokens of the issuer are for the MCP endpoint only.
    const rest = await request(cluster.baseUrl, 'GET', `/api/issues?workspaceId=${ws}`, { token: await sign(valid) });
    expect(rest.status).toBe(401);
  });

  it("mcp external issuer: scopes never exceed the user's role: a viewer's write call gets 403 insufficient_scope", async () => {
    const token = await sign({ email: viewer.email, planning_workspace: ws, planning_agent: 'ext-viewer' });
    expect((await list(token)).status).toBe(200);
    const write = await request(cluster.baseUrl, 'POST', '/api/mcp', {
      token,
      headers: { accept: 'application/json' },
      body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'service_add_comment', arguments: { issueId: 'iss_x', body: 'x' } } },
    });
    expect(write.status).toBe(403);
    expect(write.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
    expect(write.headers.get('www-authenticate')).toContain('scope="issues:read issues:write agents:read agents:execute"');
  });
});
