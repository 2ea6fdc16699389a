/**
 * OAuth access tokens as credentials of the MCP endpoint. A token resolves to what an API key
 * resolves to — a workspace, an agent, scopes and a rate — and then goes through the same plan
 * cap, rate limiter and quota meter (identity/token-resolver.ts).
 *
 * - The built-in server's tokens are opaque: looked up in its state, bound to the canonical MCP
 *   URL (another audience is refused), their grant record checked on every request (a revoked
 *   grant fails on the next request), capped by what the consenting user's role allows now.
 * - An external issuer's tokens are JWTs verified against its JWKS (`jose`): issuer, audience,
 *   expiry and signature; the user, workspace, agent and scopes come from its claims, capped by
 *   the user's role and the plan.
 */
import { createHash } from 'node:crypto';
import { createRemoteAccess, isAgentId, isRole } from '@planning/access';
import { ServiceError } from '@planning/errors';
import { PLANS, type PlanId, type Scope } from '@planning/plans';
import { SYSTEM_PRINCIPAL } from '@planning/rpc';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import { userPrincipal } from '../auth.js';
import type { GatewayDeps } from '../deps.js';
import type { UserRecord } from '../store/users.js';
import type { AuthorizationServer } from './authorization-server.js';
import type { GrantRecord, GrantRepository } from './grants.js';
import { delegableScopes, parseScopes } from './scopes.js';
import type { Site } from './site.js';

/** What a presented credential stands for, before the plan cap, rate limit and quota. */
export interface Credential {
  /** The id its rate-limit bucket, audit events and bootstrap identity use: a key, grant or `ext_` id. */
  id: string;
  kind: 'api-key' | 'oauth-grant' | 'oauth-external';
  workspaceId: string;
  agentId: string;
  scopes: Scope[];
  rateLimit: { requestsPerMinute: number; burst: number };
  /** Records use (throttled), if the credential keeps a `lastUsedAt`. */
  touch?(now: Date): Promise<void>;
}

/** Why a credential was refused: the audit reason and the status. */
export class CredentialRefused extends Error {
  constructor(
    readonly reason: string,
    readonly status: 401 | 403 = 401,
    readonly subjectId?: string,
  ) {
    super(reason);
  }
}

/**
 * The scopes a user may delegate in a workspace now, kept `ttlMs` (like the workspace cache) so a
 * burst of MCP requests costs one lookup; a role change reaches every replica within it.
 */
function createRoleScopes(deps: GatewayDeps, ttlMs: number) {
  const access = createRemoteAccess(deps.rpc.workspaces);
  const cache = new Map<string, { value: Promise<{ user: UserRecord; scopes: Scope[] } | CredentialRefused>; expiresAt: number }>();
  return (userId: string, workspaceId: string, planId: PlanId): Promise<{ user: UserRecord; scopes: Scope[] } | CredentialRefused> => {
    const key = `${userId}\u0000${workspaceId}\u0000${planId}`;
    const now = Date.now();
    const hit = cache.get(key);
    if (hit && hit.expiresAt > now) return hit.value;
    const value = (async () => {
      const user = await deps.users.findById(userId);
      if (!user || user.disabled) return new CredentialRefused('user-disabled');
      const ws = await access(userPrincipal(user), workspaceId);
      const role = isRole(ws.role) ? ws.role : undefined;
      if (!ws.exists || (!role && !user.isAdmin)) return new CredentialRefused('not-a-member', 403);
      return { user, scopes: delegableScopes(role, user.isAdmin, planId) };
    })();
    if (ttlMs > 0) {
      if (cache.size >= 10_000) cache.delete(cache.keys().next().value as string);
      cache.set(key, { value, expiresAt: now + ttlMs });
      value.catch(() => cache.delete(key));
    }
    return value;
  };
}

export type OAuthVerifier = (token: string) => Promise<Credential>;

/** Tokens of the built-in authorization server. */
export function createBuiltInVerifier(deps: GatewayDeps, options: { server: AuthorizationServer; grants: GrantRepository; site: Site }): OAuthVerifier {
  const roleScopes = createRoleScopes(deps, deps.settings.WORKSPACE_CACHE_MS);
  const touchInterval = deps.settings.API_KEY_LAST_USED_INTERVAL_SECONDS * 1000;
  return async (token) => {
    // oidc-provider's opaque tokens are 43 base64url characters; anything else is not one of them.
    if (!/^[A-Za-z0-9_-]{20,128}$/.test(token)) throw new CredentialRefused('malformed-token');
    const issued = await options.server.findAccessToken(token);
    if (!issued) throw new CredentialRefused('unknown-token');
    if (issued.expiresAt * 1000 <= deps.clock().getTime()) throw new CredentialRefused('expired-token', 401, issued.grantId);
    if (!issued.audience.includes(options.site.mcpUrl)) throw new CredentialRefused('wrong-audience', 401, issued.grantId);
    const grant: GrantRecord | null = await options.grants.findById(issued.grantId);
    if (!grant) throw new CredentialRefused('unknown-grant', 401, issued.grantId);
    if (grant.revokedAt) throw new CredentialRefused('revoked-grant', 401, grant._id);
    if (grant.userId !== issued.accountId) throw new CredentialRefused('unknown-grant', 401, grant._id);
    const role = await roleScopes(grant.userId, grant.workspaceId, grant.planId);
    if (role instanceof CredentialRefused) throw new CredentialRefused(role.reason, role.status, grant._id);
    const tokenScopes = parseScopes(issued.scopes);
    return {
      id: grant._id,
      kind: 'oauth-grant',
      workspaceId: grant.workspaceId,
      agentId: grant.agentId,
      scopes: grant.scopes.filter((s) => tokenScopes.includes(s) && role.scopes.includes(s)),
      rateLimit: grant.rateLimit,
      touch: (now) => options.grants.touch(grant, now, touchInterval),
    };
  };
}

/** How an external issuer's claims map to the service's user, workspace, agent and scopes. */
export interface ExternalIssuerOptions {
  issuer: string;
  jwksUrl?: string;
  audiences: string[];
  audienceClaim: string;
  userClaim: string;
  workspaceClaim: string;
  agentClaim: string;
  scopePrefix?: string;
}

const claimText = (payload: JWTPayload, claim: string): string | undefined => {
  const value = payload[claim];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
};

/** An external client id as an agent id (`^[a-z0-9][a-z0-9._-]{0,63}$`). */
function agentIdOfClient(clientId: string): string {
  return clientId
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 64);
}

/** Tokens of an external issuer (OAUTH_ISSUER), verified with `jose`. */
export function createExternalVerifier(deps: GatewayDeps, options: ExternalIssuerOptions): OAuthVerifier {
  const roleScopes = createRoleScopes(deps, deps.settings.WORKSPACE_CACHE_MS);
  const ensured = new Set<string>();
  let jwks: ReturnType<typeof createRemoteJWKSet> | undefined;
  const keySet = async () => {
    if (jwks) return jwks;
    let url = options.jwksUrl;
    if (!url) {
      // The issuer's discovery document names its keys (OIDC discovery, else RFC 8414).
      for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
        const response = await fetch(`${options.issuer.replace(/\/+$/, '')}${path}`, { signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
        if (!response?.ok) continue;
        const doc = (await response.json().catch(() => ({}))) as { jwks_uri?: unknown };
        if (typeof doc.jwks_uri === 'string') {
          url = doc.jwks_uri;
          break;
        }
      }
      if (!url) throw new ServiceError('unavailable', 'The external issuer publishes no keys (no jwks_uri in its metadata); set OAUTH_JWKS_URL');
    }
    jwks = createRemoteJWKSet(new URL(url), { timeoutDuration: 5_000, cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 });
    return jwks;
  };
  return async (token) => {
    if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token)) throw new CredentialRefused('malformed-token');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await keySet(), {
        issuer: options.issuer,
        ...(options.audienceClaim === 'aud' ? { audience: options.audiences } : {}),
        clockTolerance: 30,
      }));
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new CredentialRefused('expired-token');
      if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'aud') throw new CredentialRefused('wrong-audience');
      if (err instanceof joseErrors.JWKSTimeout) throw new ServiceError('unavailable', "The external issuer's keys cannot be fetched", {}, { cause: err });
      throw new CredentialRefused('invalid-token');
    }
    if (options.audienceClaim !== 'aud') {
      const audience = claimText(payload, options.audienceClaim);
      if (!audience || !options.audiences.includes(audience)) throw new CredentialRefused('wrong-audience');
    }
    const subject = `ext_${createHash('sha256').update(`${options.issuer}\u0000${payload.sub ?? ''}`).digest('base64url').slice(0, 24)}`;
    const email = claimText(payload, options.userClaim);
    const user = email ? await deps.users.findByEmail(email) : null;
    if (!user) throw new CredentialRefused('unknown-user', 401, subject);
    const workspaceId = claimText(payload, options.workspaceClaim);
    if (!workspaceId) throw new CredentialRefused('no-workspace-claim', 403, subject);
    const clientId = claimText(payload, 'azp') ?? claimText(payload, 'client_id');
    const agentId = claimText(payload, options.agentClaim) ?? (clientId ? agentIdOfClient(clientId) : undefined);
    if (!agentId || !isAgentId(agentId)) throw new CredentialRefused('no-agent-claim', 403, subject);
    const id = `ext_${createHash('sha256').update(`${options.issuer}\u0000${payload.sub ?? ''}\u0000${workspaceId}\u0000${agentId}`).digest('base64url').slice(0, 26)}`;
    const access = await deps.workspaceAccess.forToken({ type: 'api-key', id, keyId: id, workspaceId, agentId, isAdmin: false, scopes: [] }, workspaceId);
    if (!access.exists) throw new CredentialRefused('workspace-gone', 403, id);
    const role = await roleScopes(user._id, workspaceId, access.planId);
    if (role instanceof CredentialRefused) throw new CredentialRefused(role.reason, role.status, id);
    const raw = payload.scope ?? payload.scp;
    const named = (typeof raw === 'string' ? raw.split(/\s+/) : Array.isArray(raw) ? raw.map(String) : []).map((s) =>
      options.scopePrefix && s.startsWith(options.scopePrefix) ? s.slice(options.scopePrefix.length) : s,
    );
    const rate = PLANS[access.planId].rateLimit;
    // The agent record is created with the first token that names it, as with the first key.
    const agentKey = `${workspaceId}\u0000${agentId}`;
    if (!ensured.has(agentKey) && rate) {
      await deps.rpc.agents.ensureAgent({ workspaceId, agentId }, { principal: SYSTEM_PRINCIPAL });
      if (ensured.size > 10_000) ensured.clear();
      ensured.add(agentKey);
    }
    return {
      id,
      kind: 'oauth-external',
      workspaceId,
      agentId,
      scopes: parseScopes(named).filter((s) => role.scopes.includes(s)),
      rateLimit: rate ?? { requestsPerMinute: 0, burst: 0 },
    };
  };
}
