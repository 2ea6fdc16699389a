/**
 * MCP sign-in as the gateway runs it: the built-in authorization server (default, both modes),
 * an external issuer (OAUTH_ISSUER), or none (OAUTH_ENABLED=0: API keys only), and the routes
 * each needs. API keys work the same in every case.
 */
import type { DocumentStore } from '@planning/store';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { grantRoutes } from '../routes/oauth-grants.js';
import { createAuthorizationServer, type AuthorizationServer } from './authorization-server.js';
import { createBuiltInVerifier, createExternalVerifier, type OAuthVerifier } from './credentials.js';
import type { GrantRepository } from './grants.js';
import { interactionRoutes } from './interaction-routes.js';
import { deriveKeys } from './keys.js';
import { protectedResourceRoutes, type ProtectedResource } from './resource-metadata.js';
import type { Site } from './site.js';
import { createStoreBackend, type StateBackend } from './state.js';

export interface OAuthRuntime {
  resource: ProtectedResource;
  grants: GrantRepository;
  server?: AuthorizationServer;
  verify?: OAuthVerifier;
  /** Readiness details (`oauth` in `/ready`). */
  status(): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface OAuthOptions {
  site: Site;
  store: DocumentStore;
  redisUrl?: string;
  /** Fallback secret for the server's keys: SERVICE_INTERNAL_SECRET (shared by replicas). */
  internalSecret: string;
  trustProxy: boolean;
  logger: FastifyBaseLogger;
}

/**
 * Builds MCP sign-in for `deps` (whose `oauth` it then replaces). The verifiers read `deps` at
 * request time, so they may be made before `deps` is complete.
 */
export async function startOAuth(deps: GatewayDeps, options: OAuthOptions): Promise<OAuthRuntime> {
  const settings = deps.settings;
  const grants = deps.oauth.grants;
  const site = options.site;

  if (settings.OAUTH_ISSUER) {
    const issuer = settings.OAUTH_ISSUER;
    return {
      resource: { site, authorizationServers: [issuer] },
      grants,
      verify: createExternalVerifier(deps, {
        issuer,
        ...(settings.OAUTH_JWKS_URL ? { jwksUrl: settings.OAUTH_JWKS_URL } : {}),
        audiences: settings.OAUTH_AUDIENCE.length > 0 ? settings.OAUTH_AUDIENCE : [site.mcpUrl],
        audienceClaim: settings.OAUTH_AUDIENCE_CLAIM,
        userClaim: settings.OAUTH_USER_CLAIM,
        workspaceClaim: settings.OAUTH_WORKSPACE_CLAIM,
        agentClaim: settings.OAUTH_AGENT_CLAIM,
        ...(settings.OAUTH_SCOPE_PREFIX ? { scopePrefix: settings.OAUTH_SCOPE_PREFIX } : {}),
      }),
      status: async () => ({ mode: 'external', issuer }),
      close: async () => undefined,
    };
  }
  if (!settings.OAUTH_ENABLED) {
    return { resource: { site, authorizationServers: [] }, grants, status: async () => ({ mode: 'off' }), close: async () => undefined };
  }

  const durable = await createStoreBackend(options.store, deps.clock);
  const hot: StateBackend = options.redisUrl ? (await import('./redis-state.js')).createRedisBackend({ url: options.redisUrl }) : durable;
  const server = await createAuthorizationServer({
    site,
    keys: deriveKeys(settings.OAUTH_KEYS_SECRET ?? options.internalSecret),
    state: { durable, hot },
    grants,
    outbox: deps.outbox,
    logger: options.logger,
    accessTokenTtlSeconds: settings.OAUTH_ACCESS_TOKEN_TTL_SECONDS,
    refreshTokenTtlSeconds: settings.OAUTH_REFRESH_TOKEN_TTL_SECONDS,
    grantTtlSeconds: settings.OAUTH_GRANT_TTL_SECONDS,
    dynamicRegistration: settings.OAUTH_DYNAMIC_REGISTRATION,
    allowPrivateFetch: settings.OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES,
    trustProxy: options.trustProxy,
    clock: deps.clock,
  });
  return {
    resource: { site, authorizationServers: [site.publicUrl] },
    grants,
    server,
    verify: createBuiltInVerifier(deps, { server, grants, site }),
    status: async () => ({
      mode: 'built-in',
      issuer: site.publicUrl,
      state: hot.kind === 'redis' ? { kind: 'redis+store', redisReachable: await hot.ping().then(() => true, () => false) } : { kind: 'store' },
    }),
    close: async () => {
      if (hot !== durable) await hot.close();
    },
  };
}

/** The routes of MCP sign-in: resource metadata always; the authorization server's when it runs here; the grants API. */
export async function oauthRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  await protectedResourceRoutes(app, deps.oauth.resource);
  const server = deps.oauth.server;
  if (server) {
    await server.routes(app);
    await interactionRoutes(app, deps, { site: deps.oauth.resource.site, server, grants: deps.oauth.grants, grantTtlSeconds: deps.settings.OAUTH_GRANT_TTL_SECONDS });
  }
  await grantRoutes(app, deps);
}
