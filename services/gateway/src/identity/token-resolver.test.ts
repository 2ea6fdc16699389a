import { createUsageMeter } from '@planning/metering';
import { PLANS } from '@planning/plans';
import { createInProcessLimiter } from '@planning/rate-limit';
import { createEmbeddedStore, type DocumentStore } from '@planning/store';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GatewayDeps } from '../deps.js';
import { ApiKeyRepository } from '../store/api-keys.js';
import { createTokenResolver } from './token-resolver.js';
import { hashApiToken, newApiToken } from './tokens.js';

const NOW = new Date('2025-05-10T12:00:00.000Z');

function fakeReply() {
  const headers: Record<string, string> = {};
  const reply = { header: (name: string, value: string) => ((headers[name] = value), reply) } as unknown as FastifyReply;
  return { reply, headers };
}

const fakeRequest = () => ({ log: { warn() {} } }) as unknown as FastifyRequest;

describe('token resolver', () => {
  let store: DocumentStore;
  let deps: GatewayDeps;
  let plan: { planId: 'beginner' | 'pro' | 'free'; status: string };
  let lookups = 0;

  beforeEach(async () => {
    store = createEmbeddedStore();
    plan = { planId: 'pro', status: 'active' };
    lookups = 0;
    deps = {
      apiKeys: await ApiKeyRepository.open(store),
      meter: await createUsageMeter(store),
      limiter: createInProcessLimiter({ clock: () => NOW.getTime() }),
      workspaceAccess: {
        async forToken() {
          lookups += 1;
          return { exists: true, role: undefined, planId: plan.planId, status: plan.status };
        },
        invalidate() {},
      },
      settings: { API_KEY_LAST_USED_INTERVAL_SECONDS: 60 },
      clock: () => NOW,
    } as unknown as GatewayDeps;
  });
  afterEach(async () => {
    await store.close();
  });

  async function key(scopes = ['issues:read', 'issues:write', 'billing:read']) {
    const token = newApiToken();
    const record = await deps.apiKeys.create({
      tokenHash: hashApiToken(token),
      workspaceId: 'ws_a',
      agentId: 'bot',
      label: 'bot',
      actorType: 'agent',
      planId: 'pro',
      scopes: scopes as never,
      rateLimit: { ...PLANS.pro.rateLimit! },
      createdBy: 'usr_1',
    });
    return { token, record };
  }

  it('token resolver: a valid token becomes an api-key principal with the current plan and RateLimit fields', async () => {
    const { token, record } = await key();
    const { reply, headers } = fakeReply();
    const principal = await createTokenResolver(deps)(token, fakeRequest(), reply);
    expect(principal).toMatchObject({ type: 'api-key', id: record._id, keyId: record._id, workspaceId: 'ws_a', agentId: 'bot', planId: 'pro' });
    expect(headers).toEqual({ 'ratelimit-policy': '"burst";q=1200;w=60', ratelimit: '"burst";r=1199;t=0' });
    expect((await deps.apiKeys.findById(record._id))?.lastUsedAt).toBe(NOW.toISOString());
  });

  it('token resolver: a mistyped token is refused before any lookup', async () => {
    const { token } = await key();
    const typo = `${token.slice(0, -1)}${token.endsWith('a') ? 'b' : 'a'}`;
    const request = fakeRequest();
    await expect(createTokenResolver(deps)(typo, request, fakeReply().reply)).rejects.toMatchObject({ code: 'unauthorized' });
    expect(request.denial).toMatchObject({ type: 'auth.token.denied', reason: 'malformed-token' });
    expect(lookups).toBe(0);
  });

  it('token resolver: a downgraded plan caps scopes and rate; free refuses', async () => {
    const { token } = await key();
    plan.planId = 'beginner';
    const { reply, headers } = fakeReply();
    const principal = await createTokenResolver(deps)(token, fakeRequest(), reply);
    expect(principal.scopes).toEqual(['issues:read']);
    expect(headers['ratelimit-policy']).toBe('"burst";q=120;w=60');
    plan.planId = 'free';
    await expect(createTokenResolver(deps)(token, fakeRequest(), fakeReply().reply)).rejects.toMatchObject({
      code: 'forbidden',
      details: { reason: 'plan-without-api' },
    });
  });

  it('token resolver: the monthly API request quota answers 403 quota-exceeded with the quota object', async () => {
    const { token } = await key();
    plan.planId = 'beginner';
    const limit = PLANS.beginner.quotas['api-requests']!;
    await deps.meter.tryConsume({ workspaceId: 'ws_a', kind: 'api-requests', limit, amount: limit, now: NOW });
    const err = await createTokenResolver(deps)(token, fakeRequest(), fakeReply().reply).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'quota-exceeded',
      details: { quota: { kind: 'api-requests', limit, used: limit, resetsAt: '2025-06-01T00:00:00.000Z' } },
    });
  });

  it('token resolver: revoked keys are 401 and named in the denial', async () => {
    const { token, record } = await key();
    await deps.apiKeys.revoke(record._id, 'usr_1', NOW);
    const request = fakeRequest();
    await expect(createTokenResolver(deps)(token, request, fakeReply().reply)).rejects.toMatchObject({ code: 'unauthorized' });
    expect(request.denial).toMatchObject({ reason: 'revoked-token', actor: { type: 'api-key', id: record._id } });
  });
});
