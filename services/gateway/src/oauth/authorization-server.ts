/**
 * The built-in OAuth 2.1 authorization server for MCP sign-in, on `oidc-provider` (panva's
 * OpenID-certified library): authorization code with PKCE (S256 only), RFC 8414 metadata, Client
 * ID Metadata Documents and Dynamic Client Registration (RFC 7591), resource indicators (RFC 8707:
 * every access token is bound to the canonical MCP URL; another `resource` is `invalid_target`),
 * refresh-token rotation (a replayed refresh token revokes the grant), revocation (RFC 7009) and
 * short-lived opaque access tokens.
 *
 * The library's Koa app serves the protocol endpoints under `/oauth/` (issuer: PUBLIC_URL);
 * fastify hands it the raw request and response. The sign-in and consent pages are the gateway's
 * own (`interaction-routes.ts`). State lives in the gateway's store and Redis (`state.ts`); keys
 * come from one shared secret (`keys.ts`), so any replica continues any flow.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SCOPES } from '@planning/plans';
import type { Outbox } from '@planning/outbox';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type * as OidcProviderModule from 'oidc-provider';
import type { Adapter, AdapterPayload, Configuration, KoaContextWithOIDC, default as Provider } from 'oidc-provider';
import type { GrantRepository, GrantRevokeReason } from './grants.js';
import type { AuthorizationServerKeys } from './keys.js';
import { renderErrorPage } from './pages.js';
import type { Site } from './site.js';
import { DURABLE_MODELS, type Payload, type StateBackend } from './state.js';

type OidcModule = typeof OidcProviderModule;

/**
 * oidc-provider prints a console warning on import when Node is older than its preferred LTS (it
 * runs on Node 20.19+, which this service supports); that one line is kept out of the logs.
 */
async function importOidcProvider(): Promise<OidcModule> {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].includes('oidc-provider WARNING: Unsupported runtime')) return;
    warn(...args);
  };
  try {
    return await import('oidc-provider');
  } finally {
    console.warn = warn;
  }
}

export interface AuthorizationServerOptions {
  site: Site;
  keys: AuthorizationServerKeys;
  /** Where durable state lives (always the store) and where hot state lives (Redis when configured). */
  state: { durable: StateBackend; hot: StateBackend };
  grants: GrantRepository;
  outbox: Outbox;
  logger: FastifyBaseLogger;
  accessTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  grantTtlSeconds: number;
  dynamicRegistration: boolean;
  /** Test setups: fetch Client ID Metadata Documents from private and loopback addresses. */
  allowPrivateFetch: boolean;
  /** Trust `X-Forwarded-*` (TRUST_PROXY): decides whether cookies are marked Secure behind a proxy. */
  trustProxy: boolean;
  clock: () => Date;
}

/** An access token the server issued, as the resource server checks it. */
export interface IssuedAccessToken {
  grantId: string;
  clientId: string;
  accountId: string;
  audience: string[];
  scopes: string[];
  expiresAt: number;
}

export interface AuthorizationServer {
  /**
   * The library's provider. It is built on first use (the first `/oauth/` request, sign-in page or
   * OAuth access token): a process where nobody signs in through MCP never loads the library.
   */
  provider(): Promise<Provider>;
  /** The token the value names, if the server issued it and it has not expired or been revoked. */
  findAccessToken(value: string): Promise<IssuedAccessToken | undefined>;
  /** Ends a grant in the server: its codes, refresh tokens and the Grant itself (access tokens die with the grant record). */
  revokeGrant(grantId: string): Promise<void>;
  /** Registers the protocol endpoints (`/oauth/*`, `/.well-known/openid-configuration`, `/.well-known/oauth-authorization-server`). */
  routes(app: FastifyInstance): Promise<void>;
}

/** Route paths of the protocol endpoints (everything the library serves is under /oauth/). */
export const OAUTH_ROUTES = {
  authorization: '/oauth/authorize',
  token: '/oauth/token',
  registration: '/oauth/register',
  revocation: '/oauth/revoke',
  jwks: '/oauth/jwks',
  end_session: '/oauth/session/end',
  pushed_authorization_request: '/oauth/par',
  introspection: '/oauth/introspect',
  userinfo: '/oauth/userinfo',
  code_verification: '/oauth/device',
  device_authorization: '/oauth/device/auth',
  backchannel_authentication: '/oauth/backchannel',
  challenge: '/oauth/challenge',
  credential: '/oauth/credential',
} as const;

export const INTERACTION_PATH = '/oauth/interaction';

/** Models whose instances belong to a grant, removed with it. */
const GRANT_BOUND_MODELS = ['AccessToken', 'RefreshToken', 'AuthorizationCode'] as const;

const CONSUMED_LABELS: Readonly<Record<string, string>> = { AuthorizationCode: 'authorization code', RefreshToken: 'refresh token' };

export async function createAuthorizationServer(options: AuthorizationServerOptions): Promise<AuthorizationServer> {
  const { state } = options;
  const backendFor = (model: string) => (DURABLE_MODELS.has(model) ? state.durable : state.hot);
  // oidc-provider, Koa and their dependencies hold some megabytes of heap once loaded: read on the
  // first request that needs them, once (concurrent first requests share the one load; a failed
  // load is tried again by the next request).
  let loading: Promise<LoadedProvider> | undefined;
  const load = (): Promise<LoadedProvider> => {
    loading ??= buildProvider(options, backendFor).catch((err: unknown) => {
      loading = undefined;
      throw err;
    });
    return loading;
  };

  /** Hands the request to the library, which writes the whole response; fastify stays out of it. */
  const handOver = async (request: FastifyRequest, reply: FastifyReply, path?: string) => {
    const { callback } = await load();
    reply.hijack();
    const req = request.raw as IncomingMessage;
    if (path) req.url = path + (req.url?.includes('?') ? req.url.slice(req.url.indexOf('?')) : '');
    await new Promise<void>((resolve) => {
      (reply.raw as ServerResponse).once('close', resolve);
      void callback(req, reply.raw as ServerResponse);
    });
  };

  return {
    provider: async () => (await load()).provider,
    async findAccessToken(value) {
      const { provider } = await load();
      const token = await provider.AccessToken.find(value);
      if (!token || token.isExpired) return undefined;
      return {
        grantId: token.grantId,
        clientId: token.clientId ?? '',
        accountId: token.accountId,
        audience: token.aud === undefined ? [] : Array.isArray(token.aud) ? token.aud : [token.aud],
        scopes: (token.scope ?? '').split(' ').filter(Boolean),
        expiresAt: token.exp ?? 0,
      };
    },
    async revokeGrant(grantId) {
      // Codes and refresh tokens go, so nothing new is issued. Access tokens stay until they expire
      // (minutes): the resource server refuses them from the next request on because the grant
      // record says revoked, and its audit event can say so (`revoked-grant`).
      await Promise.all(['RefreshToken', 'AuthorizationCode'].map((model) => backendFor(model).revokeByGrantId(model, grantId)));
      await backendFor('Grant').destroy('Grant', grantId);
    },
    async routes(app) {
      await app.register(async (scope) => {
        // The library reads the body itself (form posts at the token, registration and revocation endpoints).
        scope.removeAllContentTypeParsers();
        scope.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
        const hidden = { schema: { hide: true } };
        scope.all('/oauth/*', hidden, (request, reply) => handOver(request, reply));
        scope.get('/.well-known/openid-configuration', hidden, (request, reply) => handOver(request, reply));
        // RFC 8414 §3: the metadata of an issuer without a path, where MCP clients look first.
        scope.get('/.well-known/oauth-authorization-server', hidden, (request, reply) => handOver(request, reply, '/.well-known/openid-configuration'));
      });
    },
  };
}

interface LoadedProvider {
  provider: Provider;
  callback: ReturnType<Provider['callback']>;
}

/** Loads oidc-provider and configures the server. */
async function buildProvider(options: AuthorizationServerOptions, backendFor: (model: string) => StateBackend): Promise<LoadedProvider> {
  const oidc = await importOidcProvider();
  const { errors } = oidc;
  const { site, grants, outbox, logger } = options;

  /** The grant family ends: server state first (so no token works any more), then the record and the audit event. */
  const endFamily = async (grantId: string, reason: GrantRevokeReason, by: string): Promise<void> => {
    await Promise.all(GRANT_BOUND_MODELS.map((model) => backendFor(model).revokeByGrantId(model, grantId)));
    await backendFor('Grant').destroy('Grant', grantId);
    await recordRevocation(grantId, reason, by);
  };

  const recordRevocation = async (grantId: string, reason: GrantRevokeReason, by: string): Promise<void> => {
    const { grant, changed } = await grants.revoke(grantId, by, reason, options.clock());
    if (!grant || !changed) return;
    await outbox.add({
      type: 'oauth.grant.revoked',
      workspaceId: grant.workspaceId,
      actor: { type: 'system', id: by },
      data: { subject: { type: 'oauth-grant', id: grantId }, outcome: 'allowed', reason },
    });
  };

  class StateAdapter implements Adapter {
    private readonly backend: StateBackend;
    constructor(private readonly model: string) {
      this.backend = backendFor(model);
    }
    async upsert(id: string, payload: AdapterPayload, expiresIn?: number) {
      await this.backend.upsert(this.model, id, payload as Payload, expiresIn);
    }
    async find(id: string) {
      return (await this.backend.find(this.model, id)) as AdapterPayload | undefined;
    }
    async findByUid(uid: string) {
      return (await this.backend.findBy(this.model, 'uid', uid)) as AdapterPayload | undefined;
    }
    async findByUserCode(userCode: string) {
      return (await this.backend.findBy(this.model, 'userCode', userCode)) as AdapterPayload | undefined;
    }
    /**
     * One atomic step: a second consumer (two redemptions of one code or refresh token racing)
     * loses, and the grant they share is revoked, as for any replay.
     */
    async consume(id: string) {
      if (await this.backend.consume(this.model, id)) return;
      const payload = await this.backend.find(this.model, id);
      if (payload?.grantId) await endFamily(payload.grantId, 'replay', 'authorization-server');
      throw new errors.InvalidGrant(`${CONSUMED_LABELS[this.model] ?? 'grant source'} already consumed`);
    }
    async destroy(id: string) {
      await this.backend.destroy(this.model, id);
    }
    async revokeByGrantId(grantId: string) {
      await this.backend.revokeByGrantId(this.model, grantId);
    }
  }

  const secureCookies = site.publicUrl.startsWith('https:');
  const configuration: Configuration = {
    adapter: StateAdapter,
    // The account is the consenting user; what a token may do comes from its grant record.
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    jwks: options.keys.jwks as Configuration['jwks'],
    cookies: {
      keys: options.keys.cookieKeys,
      names: { session: 'oauth_session', interaction: 'oauth_interaction', resume: 'oauth_interaction_resume' },
      long: { httpOnly: true, sameSite: 'lax', secure: secureCookies, signed: true },
      short: { httpOnly: true, sameSite: 'lax', secure: secureCookies, signed: true },
    },
    routes: OAUTH_ROUTES,
    interactions: { url: async (_ctx, interaction) => `${INTERACTION_PATH}/${interaction.uid}` },
    // Every authorization asks (the consent page is where workspace, agent and scopes are chosen):
    // only the grant this authorization's own consent just made is used, never an earlier one.
    loadExistingGrant: async (ctx) => {
      const grantId = (ctx.oidc.result as { consent?: { grantId?: string } } | undefined)?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    features: {
      devInteractions: { enabled: false },
      userinfo: { enabled: false },
      introspection: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      revocation: { enabled: true },
      registration: { enabled: options.dynamicRegistration, initialAccessToken: false, issueRegistrationAccessToken: false },
      clientIdMetadataDocument: { enabled: true, ack: 'draft-02' },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => site.mcpUrl,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resource) => {
          if (resource !== site.mcpUrl) throw new errors.InvalidTarget(`tokens are issued for ${site.mcpUrl} only`);
          return { scope: SCOPES.join(' '), audience: site.mcpUrl, accessTokenTTL: options.accessTokenTtlSeconds, accessTokenFormat: 'opaque' };
        },
      },
    } as Configuration['features'],
    // The service's scopes are the resource's (getResourceServerInfo) and also the server's own, so
    // clients may register with them (RFC 7591 `scope`) and the metadata lists them.
    scopes: ['openid', 'offline_access', ...SCOPES],
    pkce: { required: () => true },
    responseTypes: ['code'],
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      id_token_signed_response_alg: 'EdDSA',
    },
    enabledJWA: { idTokenSigningAlgValues: ['EdDSA'] } as Configuration['enabledJWA'],
    // Agents refresh in the background: every client allowed the grant type gets a refresh token, rotated on each use.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: true,
    ttl: {
      AccessToken: options.accessTokenTtlSeconds,
      AuthorizationCode: 60,
      RefreshToken: options.refreshTokenTtlSeconds,
      Grant: options.grantTtlSeconds,
      Interaction: 30 * 60,
      Session: 30 * 60,
      IdToken: options.accessTokenTtlSeconds,
    },
    discovery: { service_documentation: `${site.publicUrl}/docs` },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = renderErrorPage({ ...out });
    },
    fetch: (url, init) => {
      // In test setups the metadata document server runs on a loopback address: drop the SSRF guard there only.
      if (options.allowPrivateFetch) delete (init as { dispatcher?: unknown }).dispatcher;
      return globalThis.fetch(url, init);
    },
  };

  const provider = new oidc.Provider(site.publicUrl, configuration);
  provider.proxy = options.trustProxy;

  provider.on('server_error', (_ctx: unknown, err: unknown) => logger.error({ err }, 'oauth: authorization server error'));
  provider.on('grant.revoked', (ctx: KoaContextWithOIDC, grantId: string) => {
    const reason: GrantRevokeReason = ctx.oidc?.route === 'revocation' ? 'client-revoked' : 'replay';
    recordRevocation(grantId, reason, 'authorization-server').catch((err: unknown) => logger.error({ err, grantId }, 'oauth: could not record a revoked grant'));
  });
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    if (ctx.oidc?.params?.grant_type !== 'refresh_token') return;
    const grantId = (ctx.oidc.entities as { RefreshToken?: { grantId?: string } }).RefreshToken?.grantId;
    if (!grantId) return;
    void (async () => {
      await grants.refreshed(grantId, options.clock());
      const grant = await grants.findById(grantId);
      await outbox.add({
        type: 'oauth.grant.refreshed',
        ...(grant ? { workspaceId: grant.workspaceId } : {}),
        actor: { type: 'oauth-client', id: String(ctx.oidc.client?.clientId ?? 'unknown').slice(0, 128) },
        data: { subject: { type: 'oauth-grant', id: grantId }, outcome: 'allowed' },
      });
    })().catch((err: unknown) => logger.error({ err, grantId }, 'oauth: could not record a refresh'));
  });

  return { provider, callback: provider.callback() };
}
