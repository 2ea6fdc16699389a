import { createHash } from 'node:crypto';
import { createStore, type DocumentStore } from '@planning/store';
import { startRedisServer, type RedisServerHandle } from '@planning/testing';
import type { FastifyBaseLogger } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { GatewayDeps } from '../deps.js';
import { createAuthorizationServer, type AuthorizationServer } from './authorization-server.js';
import { createBuiltInVerifier, CredentialRefused } from './credentials.js';
import { GrantRepository } from './grants.js';
import { deriveKeys } from './keys.js';
import { insufficientScopeChallenge, protectedResourceMetadata, unauthorizedChallenge } from './resource-metadata.js';
import { delegableScopes, parseScopes } from './scopes.js';
import { siteOf } from './site.js';
import { createRedisBackend } from './redis-state.js';
import { createStoreBackend, type StateBackend } from './state.js';

const quietLogger = { error() {}, warn() {}, info() {}, debug() {} } as unknown as FastifyBaseLogger;

describe('oauth: state backends', () => {
  let store: DocumentStore;
  let redis: RedisServerHandle;
  beforeAll(async () => {
    redis = await startRedisServer();
  }, 30_000);
  afterAll(async () => {
    await redis?.stop();
  });
  beforeEach(async () => {
    store = await createStore({ kind: 'embedded', path: ':memory:' });
  });
  afterEach(async () => {
    await store.close();
  });

  const backends: [string, () => Promise<StateBackend>][] = [
    ['store', () => createStoreBackend(store)],
    ['redis', async () => createRedisBackend({ url: redis.url, keyPrefix: `t${Math.random().toString(36).slice(2)}:` })],
  ];

  it.each(backends)('oauth state (%s): instances round-trip, are found by uid, expire, and go with their grant', async (_kind, make) => {
    const backend = await make();
    try {
      await backend.upsert('AccessToken', 'a1', { jti: 'a1', grantId: 'g1', scope: 'issues:read' }, 60);
      await backend.upsert('AccessToken', 'a2', { jti: 'a2', grantId: 'g1' }, 60);
      await backend.upsert('AccessToken', 'a3', { jti: 'a3', grantId: 'g2' }, 60);
      await backend.upsert('Interaction', 'i1', { jti: 'i1', uid: 'u-1' }, 60);
      await backend.upsert('Client', 'c1', { client_id: 'c1', $weird: 'kept as text' }, undefined);
      expect(await backend.find('AccessToken', 'a1')).toEqual({ jti: 'a1', grantId: 'g1', scope: 'issues:read' });
      expect(await backend.findBy('Interaction', 'uid', 'u-1')).toEqual({ jti: 'i1', uid: 'u-1' });
      expect(await backend.find('Client', 'c1')).toEqual({ client_id: 'c1', $weird: 'kept as text' });
      expect(await backend.revokeByGrantId('AccessToken', 'g1')).toBe(2);
      expect(await backend.find('AccessToken', 'a1')).toBeUndefined();
      expect(await backend.find('AccessToken', 'a3')).toBeDefined();
      await backend.destroy('AccessToken', 'a3');
      expect(await backend.find('AccessToken', 'a3')).toBeUndefined();
      await backend.upsert('Session', 's1', { jti: 's1' }, 1);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      expect(await backend.find('Session', 's1')).toBeUndefined();
    } finally {
      await backend.close();
    }
  });

  it.each(backends)('oauth state (%s): of concurrent consumers of one code exactly one wins; the payload then says consumed', async (_kind, make) => {
    const backend = await make();
    try {
      for (let round = 0; round < 5; round++) {
        const id = `code-${round}`;
        await backend.upsert('AuthorizationCode', id, { jti: id, grantId: 'g' }, 60);
        const results = await Promise.all(Array.from({ length: 8 }, () => backend.consume('AuthorizationCode', id)));
        expect(results.filter(Boolean)).toHaveLength(1);
        expect((await backend.find('AuthorizationCode', id))?.consumed).toEqual(expect.any(Number));
      }
    } finally {
      await backend.close();
    }
  });
});

describe('oauth: the resource server refuses what it must', () => {
  const site = siteOf('http://127.0.0.1:4999', { host: '127.0.0.1', port: 4999 });
  let store: DocumentStore;
  let server: AuthorizationServer;
  let grants: GrantRepository;
  let role: string | undefined;
  let userDisabled: boolean;

  beforeEach(async () => {
    store = await createStore({ kind: 'embedded', path: ':memory:' });
    grants = await GrantRepository.open(store);
    const backend = await createStoreBackend(store);
    server = await createAuthorizationServer({
      site,
      keys: deriveKeys('x'.repeat(32)),
      state: { durable: backend, hot: backend },
      grants,
      outbox: { add: async () => undefined } as never,
      logger: quietLogger,
      accessTokenTtlSeconds: 300,
      refreshTokenTtlSeconds: 600,
      grantTtlSeconds: 3600,
      dynamicRegistration: true,
      allowPrivateFetch: false,
      trustProxy: false,
      clock: () => new Date(),
    });
    await backend.upsert('Client', 'client-1', { client_id: 'client-1', redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] }, undefined);
    role = 'member';
    userDisabled = false;
  });
  afterEach(async () => {
    await store.close();
  });

  /** `clock`: the resource server's time (expiry is judged by it; the tokens' own TTL is 300 s). */
  const deps = (clock = () => new Date()) =>
    ({
      settings: { WORKSPACE_CACHE_MS: 0, API_KEY_LAST_USED_INTERVAL_SECONDS: 60 },
      clock,
      users: { findById: async (id: string) => ({ _id: id, email: 'u@example.com', isAdmin: false, disabled: userDisabled }) },
      rpc: { workspaces: { getAccess: async () => ({ exists: true, role, planId: 'pro', status: 'active' }) } },
    }) as unknown as GatewayDeps;

  async function issue(options: { aud?: string; scope?: string } = {}) {
    const grantId = GrantRepository.newId();
    await grants.create(
      grantId,
      {
        workspaceId: 'ws_1',
        agentId: 'bot',
        userId: 'usr_1',
        clientId: 'client-1',
        clientName: null,
        scopes: ['issues:read', 'issues:write', 'agents:execute'],
        planId: 'pro',
        rateLimit: { requestsPerMinute: 600, burst: 1200 },
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      },
      new Date(),
    );
    const provider = await server.provider();
    const client = await provider.Client.find('client-1');
    const token = new provider.AccessToken({ client: client!, accountId: 'usr_1', grantId, gty: 'authorization_code', scope: options.scope ?? 'issues:read issues:write agents:execute', aud: options.aud ?? site.mcpUrl });
    return { grantId, value: await token.save() };
  }
  const refusal = (promise: Promise<unknown>) => promise.then(() => 'accepted', (err: unknown) => (err instanceof CredentialRefused ? `${err.status} ${err.reason}` : String(err)));

  it('oauth: a token of the server is a credential of its grant, scoped by token, grant and the role now', async () => {
    const verify = createBuiltInVerifier(deps(), { server, grants, site });
    const { grantId, value } = await issue();
    expect(await verify(value)).toMatchObject({ id: grantId, kind: 'oauth-grant', workspaceId: 'ws_1', agentId: 'bot', scopes: ['issues:read', 'issues:write', 'agents:execute'] });
    // A viewer now: the write scopes fall away at once (no cache here).
    role = 'viewer';
    expect((await verify(value)).scopes).toEqual(['issues:read']);
    role = undefined;
    expect(await refusal(verify(value))).toBe('403 not-a-member');
    role = 'member';
    userDisabled = true;
    expect(await refusal(verify(value))).toBe('401 user-disabled');
  });

  it('oauth: wrong audience, expired, revoked, unknown and malformed tokens are refused with their reason', async () => {
    const verify = createBuiltInVerifier(deps(), { server, grants, site });
    const other = await issue({ aud: 'https://other.example/api/mcp' });
    expect(await refusal(verify(other.value))).toBe('401 wrong-audience');
    const revoked = await issue();
    await grants.revoke(revoked.grantId, 'usr_1', 'revoked', new Date());
    expect(await refusal(verify(revoked.value))).toBe('401 revoked-grant');
    expect(await refusal(verify('x'.repeat(43)))).toBe('401 unknown-token');
    expect(await refusal(verify('svc_not-this-kind!'))).toBe('401 malformed-token');
    // Expiry, judged by the resource server's clock (no waiting, nothing timing-dependent under load).
    const expiring = await issue();
    expect(await refusal(verify(expiring.value))).toBe('accepted');
    const later = createBuiltInVerifier(
      deps(() => new Date(Date.now() + 301_000)),
      { server, grants, site },
    );
    expect(await refusal(later(expiring.value))).toBe('401 expired-token');
  });
});

describe('oauth: keys, scopes and metadata', () => {
  it('oauth: every replica derives the same keys from the same secret; another secret gives other keys', () => {
    const a = deriveKeys('s'.repeat(40));
    expect(deriveKeys('s'.repeat(40))).toEqual(a);
    const b = deriveKeys('t'.repeat(40));
    expect(b.cookieKeys).not.toEqual(a.cookieKeys);
    expect(b.jwks.keys[0]!.x).not.toEqual(a.jwks.keys[0]!.x);
    expect(a.jwks.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig', d: expect.any(String) });
    // The secret itself appears nowhere.
    expect(JSON.stringify(a)).not.toContain('s'.repeat(40));
    expect(a.cookieKeys[0]).not.toBe(createHash('sha256').update('s'.repeat(40)).digest('base64url'));
  });

  it('oauth: a grant never exceeds the role or the plan', () => {
    expect(delegableScopes('viewer', false, 'enterprise')).toEqual(['issues:read', 'projects:read', 'agents:read']);
    expect(delegableScopes('member', false, 'enterprise')).toEqual(['issues:read', 'issues:write', 'projects:read', 'agents:read', 'agents:execute']);
    expect(delegableScopes('admin', false, 'enterprise')).toHaveLength(8);
    expect(delegableScopes('owner', false, 'hobbyist')).toEqual(['issues:read', 'issues:write', 'projects:read', 'projects:write', 'agents:read']);
    expect(delegableScopes(undefined, true, 'beginner')).toEqual(['issues:read', 'projects:read', 'agents:read']);
    expect(delegableScopes(undefined, false, 'enterprise')).toEqual([]);
    expect(delegableScopes('owner', false, 'free')).toEqual([]);
    expect(parseScopes('admin  issues:read bogus issues:read')).toEqual(['issues:read', 'admin']);
  });

  it('oauth: the public URL defaults to the listen address; metadata and challenges name the MCP resource', () => {
    expect(siteOf(undefined, { host: '0.0.0.0', port: 8080 })).toMatchObject({ publicUrl: 'http://localhost:8080', mcpUrl: 'http://localhost:8080/api/mcp', loopback: false });
    expect(siteOf(undefined, { host: '127.0.0.1', port: 3000 })).toMatchObject({ publicUrl: 'http://127.0.0.1:3000', loopback: true });
    expect(siteOf(undefined, { host: '::1', port: 3000 }).publicUrl).toBe('http://[::1]:3000');
    const site = siteOf('https://planning.example.com/', { host: '0.0.0.0', port: 8080 });
    expect(site).toMatchObject({ mcpUrl: 'https://planning.example.com/api/mcp', resourceMetadataUrl: 'https://planning.example.com/.well-known/oauth-protected-resource/api/mcp' });
    const resource = { site, authorizationServers: ['https://planning.example.com'] };
    expect(protectedResourceMetadata(resource)).toMatchObject({ resource: site.mcpUrl, authorization_servers: ['https://planning.example.com'], bearer_methods_supported: ['header'] });
    expect(unauthorizedChallenge(resource, true)).toBe(
      'Bearer realm="planning-service", resource_metadata="https://planning.example.com/.well-known/oauth-protected-resource/api/mcp", scope="issues:read issues:write agents:read agents:execute", error="invalid_token"',
    );
    expect(unauthorizedChallenge({ site, authorizationServers: [] }, false)).toBe('Bearer realm="planning-service"');
    expect(insufficientScopeChallenge(resource, ['issues:read'], ['issues:read', 'issues:write', 'agents:execute'])).toContain('scope="issues:read issues:write agents:execute"');
  });
});
