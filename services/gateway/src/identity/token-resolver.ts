import { ServiceError } from '@planning/errors';
import { effectiveRateLimit, effectiveScopes, PLANS } from '@planning/plans';
import type { Principal } from '@planning/rpc';
import { recordRateLimitDecision } from '@planning/telemetry';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { markDenial } from '../auth.js';
import type { GatewayDeps } from '../deps.js';
import { MCP_PATH } from '../mcp/protocol.js';
import { CredentialRefused, type Credential, type OAuthVerifier } from '../oauth/credentials.js';
import { hashApiToken, isWellFormedApiToken } from './tokens.js';

/** Sets the IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers) of DECISIONS §4. */
function setRateLimitHeaders(reply: FastifyReply, burst: number, remaining: number, retryAfterMs: number): void {
  void reply.header('ratelimit-policy', `"burst";q=${burst};w=60`);
  void reply.header('ratelimit', `"burst";r=${remaining};t=${Math.ceil(retryAfterMs / 1000)}`);
}

const subjectTypeOf = (credential: Pick<Credential, 'kind'>) => (credential.kind === 'api-key' ? 'api-key' : 'oauth-grant');

/**
 * Resolves a presented token to its principal (the `resolveToken` hook of
 * `registerAuthentication`): first to a credential — an API key (format and checksum first, no
 * lookup for a mistyped token; then the key by the token's hash and its state), or, on the MCP
 * endpoint, an OAuth access token (`oauth`: the built-in server's or an external issuer's) — then,
 * for every kind alike, the workspace's current plan (which caps the credential's scopes and
 * rate), its token bucket and the workspace's monthly API request quota. A grant therefore counts
 * exactly like a key.
 */
export function createTokenResolver(deps: GatewayDeps, oauth?: OAuthVerifier) {
  const unauthorized = (request: FastifyRequest, reason: string, subject?: { type: string; id: string }, message = 'Invalid API token'): ServiceError => {
    markDenial(request, {
      type: 'auth.token.denied',
      reason,
      actor: subject ? { type: subject.type, id: subject.id } : { type: 'anonymous', id: 'anonymous' },
      subject: subject ?? { type: 'api-key', id: 'unknown' },
    });
    return new ServiceError('unauthorized', message);
  };

  const apiKey = async (token: string, request: FastifyRequest): Promise<Credential> => {
    if (!isWellFormedApiToken(token)) throw unauthorized(request, 'malformed-token');
    const key = await deps.apiKeys.resolve(hashApiToken(token));
    if (!key) throw unauthorized(request, 'unknown-token');
    if (key.revokedAt) throw unauthorized(request, 'revoked-token', { type: 'api-key', id: key._id });
    if (key.disabled) throw unauthorized(request, 'disabled-token', { type: 'api-key', id: key._id });
    return {
      id: key._id,
      kind: 'api-key',
      workspaceId: key.workspaceId,
      agentId: key.agentId,
      scopes: key.scopes,
      rateLimit: key.rateLimit,
      touch: (now) => deps.apiKeys.touch(key, now, deps.settings.API_KEY_LAST_USED_INTERVAL_SECONDS * 1000),
    };
  };

  const accessToken = async (token: string, request: FastifyRequest, verify: OAuthVerifier): Promise<Credential> => {
    try {
      return await verify(token);
    } catch (err) {
      if (!(err instanceof CredentialRefused)) throw err;
      const subject = err.subjectId ? { type: 'oauth-grant', id: err.subjectId } : undefined;
      if (err.status === 401) throw unauthorized(request, err.reason, subject, 'Invalid access token');
      markDenial(request, { type: 'auth.token.denied', reason: err.reason, ...(subject ? { actor: subject, subject } : {}) });
      throw new ServiceError('forbidden', err.reason === 'not-a-member' ? 'The user who granted this access is no longer a member of the workspace' : 'This access token cannot be used here', { reason: err.reason });
    }
  };

  return async (token: string, request: FastifyRequest, reply: FastifyReply): Promise<Principal> => {
    // API keys carry their prefix; anything else can only be an OAuth access token, for the MCP endpoint.
    const credential =
      oauth && !token.startsWith('svc_') && request.routeOptions.url === MCP_PATH ? await accessToken(token, request, oauth) : await apiKey(token, request);

    const provisional: Principal = {
      type: 'api-key',
      id: credential.id,
      keyId: credential.id,
      workspaceId: credential.workspaceId,
      agentId: credential.agentId,
      isAdmin: false,
      scopes: [...credential.scopes],
    };
    request.principal = provisional;
    const subject = { type: subjectTypeOf(credential), id: credential.id };
    const workspace = await deps.workspaceAccess.forToken(provisional, credential.workspaceId);
    if (!workspace.exists) throw unauthorized(request, 'workspace-gone', subject, credential.kind === 'api-key' ? 'Invalid API token' : 'Invalid access token');
    const forbidden = (reason: string, message: string): ServiceError => {
      markDenial(request, { type: 'auth.token.denied', reason, subject });
      return new ServiceError('forbidden', message, { reason });
    };
    if (workspace.status !== 'active') throw forbidden('workspace-inactive', `The workspace is ${workspace.status}`);
    const rate = effectiveRateLimit(credential.rateLimit, workspace.planId);
    if (!rate) throw forbidden('plan-without-api', "The workspace's plan does not include API access");

    const decision = await deps.limiter.consume(`key:${credential.id}`, { capacity: rate.burst, refillPerMinute: rate.requestsPerMinute });
    setRateLimitHeaders(reply, rate.burst, decision.remaining, decision.retryAfterMs);
    recordRateLimitDecision(workspace.planId, decision.allowed ? 'allowed' : 'limited');
    if (!decision.allowed) {
      throw new ServiceError('rate-limited', `Rate limit exceeded for this ${credential.kind === 'api-key' ? 'API key' : 'access grant'}`, {
        retryAfterSeconds: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)),
      });
    }

    const now = deps.clock();
    const quota = await deps.meter.tryConsume({
      workspaceId: credential.workspaceId,
      kind: 'api-requests',
      limit: PLANS[workspace.planId].quotas['api-requests'],
      now,
    });
    if (!quota.allowed) {
      throw new ServiceError('quota-exceeded', "The workspace's monthly API request quota is used up", {
        quota: { kind: 'api-requests', limit: quota.limit ?? 0, used: quota.used, resetsAt: quota.resetsAt },
      });
    }
    void credential.touch?.(now).catch((err: unknown) => {
      request.log.warn({ err, credential: credential.id }, 'could not record credential use');
    });
    return { ...provisional, planId: workspace.planId, scopes: effectiveScopes(credential.scopes, workspace.planId) };
  };
}
