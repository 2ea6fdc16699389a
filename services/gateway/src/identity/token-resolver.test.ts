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

describe('token resolver: the API key cache', () => {
  let store: DocumentStore;
  let now: number;
  let reads: number;
  let writes: number;
  /** While set, a key lookup that has read the store waits for it before answering. */
  let hold: Promise<void> | undefined;

  /** The store with the key collection's reads and `lastUsedAt` writes counted, and reads holdable. */
  function observed(inner: DocumentStore): DocumentStore {
    return new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop !== 'collection') return Reflect.get(target, prop, receiver) as unknown;
        return (name: string) => {
          const collection = target.collection(name);
          return new Proxy(collection, {
            get(c, p, r) {
              if (p === 'findOne') {
                return async (...args: Parameters<typeof collection.findOne>) => {
                  reads += 1;
                  const found = await c.findOne(...args);
                  await hold;
                  return found;
                };
              }
              if (p === 'updateOne') {
                return (...args: Parameters<typeof collection.updateOne>) => {
                  writes += 1;
                  return c.updateOne(...args);
                };
              }
              return Reflect.get(c, p, r) as unknown;
            },
          });
        };
      },
    });
  }

  async function setup(ttlMs: number) {
    store = createEmbeddedStore();
    now = NOW.getTime();
    reads = 0;
    writes = 0;
    hold = undefined;
    const apiKeys = await ApiKeyRepository.open(observed(store), { ttlMs, clock: () => now });
    const deps = {
      apiKeys,
      meter: await createUsageMeter(store),
      limiter: createInProcessLimiter({ clock: () => now }),
      workspaceAccess: {
        forToken: async () => ({ exists: true, role: undefined, planId: 'pro', status: 'active' }),
        invalidate() {},
      },
      settings: { API_KEY_LAST_USED_INTERVAL_SECONDS: 60 },
      clock: () => new Date(now),
    } as unknown as GatewayDeps;
    const token = newApiToken();
    const record = await apiKeys.create({
      tokenHash: hashApiToken(token),
      workspaceId: 'ws_a',
      agentId: 'bot',
      label: 'bot',
      actorType: 'agent',
      planId: 'pro',
      scopes: ['issues:read'],
      rateLimit: { ...PLANS.pro.rateLimit! },
      createdBy: 'usr_1',
    });
    const resolve = createTokenResolver(deps);
    const attempt = async () => {
      const request = fakeRequest();
      try {
        return { principal: await resolve(token, request, fakeReply().reply) };
      } catch (err) {
        return { err, denial: request.denial };
      }
    };
    return { apiKeys, token, record, attempt };
  }

  afterEach(async () => {
    await store.close();
  });

  it('api key cache: within the TTL a key is read once and its lastUsedAt written once; an unknown token is read every time', async () => {
    const { apiKeys, attempt } = await setup(2_000);
    for (let i = 0; i < 5; i++) expect((await attempt()).principal).toMatchObject({ type: 'api-key' });
    await new Promise((r) => setImmediate(r));
    expect(reads).toBe(1);
    expect(writes).toBe(1);
    reads = 0;
    const unknown = newApiToken();
    expect(await apiKeys.resolve(hashApiToken(unknown))).toBeNull();
    expect(await apiKeys.resolve(hashApiToken(unknown))).toBeNull();
    expect(reads).toBe(2);
  });

  it('api key cache: revoke, then a request in the same process: 401 revoked-token at once, with the key cached', async () => {
    const { apiKeys, record, attempt } = await setup(60_000);
    expect((await attempt()).principal).toBeDefined();
    await apiKeys.revoke(record._id, 'usr_1', NOW);
    const after = await attempt();
    expect(after.err).toMatchObject({ code: 'unauthorized' });
    expect(after.denial).toMatchObject({ reason: 'revoked-token', actor: { type: 'api-key', id: record._id } });
  });

  it('api key cache: a lookup that read the key before a revoke and answers after it is not reused: the next request gets 401', async () => {
    const { apiKeys, record, attempt } = await setup(60_000);
    let release!: () => void;
    hold = new Promise((r) => (release = r));
    // In flight across the revoke: it read the key while it was still valid.
    const racing = attempt();
    while (reads === 0) await new Promise((r) => setImmediate(r));
    hold = undefined;
    await apiKeys.revoke(record._id, 'usr_1', NOW);
    release();
    // Concurrent with the revoke: either answer is right for it.
    await racing;
    const after = await attempt();
    expect(after.err).toMatchObject({ code: 'unauthorized' });
    expect(after.denial).toMatchObject({ reason: 'revoked-token' });
  });

  it('api key cache: requests racing a revoke: every request that starts after the revoke answered gets 401', async () => {
    const { apiKeys, record, attempt } = await setup(60_000);
    const before = Array.from({ length: 20 }, () => attempt());
    const revoked = apiKeys.revoke(record._id, 'usr_1', NOW);
    const during = Array.from({ length: 20 }, () => attempt());
    await revoked;
    const after = await Promise.all(Array.from({ length: 20 }, () => attempt()));
    await Promise.all([...before, ...during]);
    for (const a of after) expect(a.err).toMatchObject({ code: 'unauthorized' });
    expect(after.every((a) => a.denial?.reason === 'revoked-token')).toBe(true);
  });

  it('api key cache: a change made elsewhere (another replica) applies once the TTL has passed; TTL 0 reads every time', async () => {
    const { record, attempt } = await setup(2_000);
    expect((await attempt()).principal).toBeDefined();
    // Another replica revokes: this one does not hear of it.
    await store.collection('api_keys').updateOne({ _id: record._id }, { $set: { revokedAt: NOW.toISOString(), revokedBy: 'usr_1' } });
    expect((await attempt()).principal).toBeDefined();
    now += 2_000;
    expect((await attempt()).denial).toMatchObject({ reason: 'revoked-token' });
    await store.close();

    const uncached = await setup(0);
    expect((await uncached.attempt()).principal).toBeDefined();
    await store.collection('api_keys').updateOne({ _id: uncached.record._id }, { $set: { disabled: true } });
    expect((await uncached.attempt()).denial).toMatchObject({ reason: 'disabled-token' });
  });
});
