import { ServiceError } from '@planning/errors';
import { effectiveRateLimit, effectiveScopes, PLANS } from '@planning/plans';
import type { Principal } from '@planning/rpc';
import { recordRateLimitDecision } from '@planning/telemetry';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { markDenial } from '../auth.js';
import type { GatewayDeps } from '../deps.js';
import { hashApiToken, isWellFormedApiToken } from './tokens.js';

/** Sets the IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers) of DECISIONS §4. */
function setRateLimitHeaders(reply: FastifyReply, burst: number, remaining: number, retryAfterMs: number): void {
  void reply.header('ratelimit-policy', `"burst";q=${burst};w=60`);
  void reply.header('ratelimit', `"burst";r=${remaining};t=${Math.ceil(retryAfterMs / 1000)}`);
}

/**
 * Resolves an API token to its principal (the `resolveToken` hook of `registerAuthentication`):
 * format and checksum first (no lookup for a mistyped token), then the key by the token's hash,
 * its state, the workspace's current plan (which caps the key's scopes and rate), the key's
 * token bucket and the workspace's monthly API request quota.
 */
export function createTokenResolver(deps: GatewayDeps) {
  const unauthorized = (request: FastifyRequest, reason: string, keyId?: string): ServiceError => {
    markDenial(request, {
      type: 'auth.token.denied',
      reason,
      actor: keyId ? { type: 'api-key', id: keyId } : { type: 'anonymous', id: 'anonymous' },
      subject: { type: 'api-key', id: keyId ?? 'unknown' },
    });
    return new ServiceError('unauthorized', 'Invalid API token');
  };

  return async (token: string, request: FastifyRequest, reply: FastifyReply): Promise<Principal> => {
    if (!isWellFormedApiToken(token)) throw unauthorized(request, 'malformed-token');
    const key = await deps.apiKeys.findByTokenHash(hashApiToken(token));
    if (!key) throw unauthorized(request, 'unknown-token');
    if (key.revokedAt) throw unauthorized(request, 'revoked-token', key._id);
    if (key.disabled) throw unauthorized(request, 'disabled-token', key._id);

    const provisional: Principal = {
      type: 'api-key',
      id: key._id,
      keyId: key._id,
      workspaceId: key.workspaceId,
      agentId: key.agentId,
      planId: key.planId,
      isAdmin: false,
      scopes: [...key.scopes],
    };
    request.principal = provisional;
    const workspace = await deps.workspaceAccess.forToken(provisional, key.workspaceId);
    if (!workspace.exists) throw unauthorized(request, 'workspace-gone', key._id);
    const forbidden = (reason: string, message: string): ServiceError => {
      markDenial(request, { type: 'auth.token.denied', reason, subject: { type: 'api-key', id: key._id } });
      return new ServiceError('forbidden', message, { reason });
    };
    if (workspace.status !== 'active') throw forbidden('workspace-inactive', `The workspace is ${workspace.status}`);
    const rate = effectiveRateLimit(key.rateLimit, workspace.planId);
    if (!rate) throw forbidden('plan-without-api', "The workspace's plan does not include API access");

    const decision = await deps.limiter.consume(`key:${key._id}`, { capacity: rate.burst, refillPerMinute: rate.requestsPerMinute });
    setRateLimitHeaders(reply, rate.burst, decision.remaining, decision.retryAfterMs);
    recordRateLimitDecision(workspace.planId, decision.allowed ? 'allowed' : 'limited');
    if (!decision.allowed) {
      throw new ServiceError('rate-limited', 'Rate limit exceeded for this API key', {
        retryAfterSeconds: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)),
      });
    }

    const now = deps.clock();
    const quota = await deps.meter.tryConsume({
      workspaceId: key.workspaceId,
      kind: 'api-requests',
      limit: PLANS[workspace.planId].quotas['api-requests'],
      now,
    });
    if (!quota.allowed) {
      throw new ServiceError('quota-exceeded', "The workspace's monthly API request quota is used up", {
        quota: { kind: 'api-requests', limit: quota.limit ?? 0, used: quota.used, resetsAt: quota.resetsAt },
      });
    }
    void deps.apiKeys.touch(key, now, deps.settings.API_KEY_LAST_USED_INTERVAL_SECONDS * 1000).catch((err: unknown) => {
      request.log.warn({ err, keyId: key._id }, 'could not record api key use');
    });
    return { ...provisional, planId: workspace.planId, scopes: effectiveScopes(key.scopes, workspace.planId) };
  };
}
