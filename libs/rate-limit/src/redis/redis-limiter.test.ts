import { randomUUID } from 'node:crypto';
import { startRedisServer, type RedisServerHandle } from '@planning/testing';
import { createClient } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { describeLimiterContract } from '../contract/limiter-contract.js';
import { createRedisLimiter, type RedisLimiter } from './redis-limiter.js';

let server: RedisServerHandle;

beforeAll(async () => {
  server = await startRedisServer();
});

afterAll(async () => {
  await server?.stop();
});

describeLimiterContract('redis', async () => {
  const limiter = createRedisLimiter({ url: server.url, keyPrefix: `contract-${randomUUID()}:` });
  await limiter.ping();
  return { limiter, cleanup: () => limiter.close() };
});

describe('redis limiter', () => {
  const opened: RedisLimiter[] = [];
  const open = (keyPrefix: string): RedisLimiter => {
    const limiter = createRedisLimiter({ url: server.url, keyPrefix });
    opened.push(limiter);
    return limiter;
  };

  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(opened.splice(0).map((l) => l.close()));
  });

  it('redis: two instances (two connections, like two replicas) share one bucket', async () => {
    const prefix = `shared-${randomUUID()}:`;
    const a = open(prefix);
    const b = open(prefix);
    await Promise.all([a.ping(), b.ping()]);
    const spec = { capacity: 40, refillPerMinute: 0.01 };

    // Taken in turns: each replica sees what the other took.
    expect((await a.consume('turns', spec, 30)).remaining).toBe(10);
    expect((await b.consume('turns', spec, 5)).remaining).toBe(5);
    expect((await a.consume('turns', spec, 5)).remaining).toBe(0);
    expect((await b.consume('turns', spec)).allowed).toBe(false);

    // Racing: 100 calls spread over both connections, at most the capacity accepted in total.
    const calls = Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? a : b).consume('race', spec));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(40);
    expect((await a.consume('race', spec)).allowed).toBe(false);
    expect((await b.consume('race', spec)).allowed).toBe(false);
  });

  it('redis: decisions use the Redis clock, not the replica clock', async () => {
    const prefix = `clock-${randomUUID()}:`;
    const a = open(prefix);
    const b = open(prefix);
    const spec = { capacity: 2, refillPerMinute: 60 };
    await a.consume('key', spec);
    await a.consume('key', spec);
    // A replica whose clock runs an hour ahead would see a full bucket if it trusted its own clock.
    const realNow = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(realNow + 3_600_000);
    const skewed = await b.consume('key', spec);
    expect(skewed.allowed).toBe(false);
  });

  it('redis: a bucket key expires about when it would be full again', async () => {
    const prefix = `ttl-${randomUUID()}:`;
    const limiter = open(prefix);
    const decision = await limiter.consume('key', { capacity: 10, refillPerMinute: 600 }, 4);
    // 4 tokens at 10/s: full again in 400 ms; the key lives that plus a second of slack.
    expect(decision.resetMs).toBe(400);
    const raw = createClient({ url: server.url });
    await raw.connect();
    try {
      const ttl = await raw.pTTL(`${prefix}key`);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1400);
      expect(await raw.hGetAll(`${prefix}key`)).toMatchObject({ cap: '10' });
    } finally {
      await raw.close();
    }
  });

  it('redis: the script is loaded again after the server forgets it (NOSCRIPT)', async () => {
    const limiter = open(`noscript-${randomUUID()}:`);
    const spec = { capacity: 3, refillPerMinute: 0.01 };
    expect((await limiter.consume('key', spec)).remaining).toBe(2);
    const raw = createClient({ url: server.url });
    await raw.connect();
    try {
      await raw.scriptFlush();
    } finally {
      await raw.close();
    }
    expect((await limiter.consume('key', spec)).remaining).toBe(1);
    expect((await limiter.consume('key', spec)).remaining).toBe(0);
  });

  it('redis: calls fail fast with a clear error when Redis is unreachable', async () => {
    // A port with nothing listening: the first connection attempt is refused.
    const unreachable = createRedisLimiter({ url: 'redis://127.0.0.1:1', keyPrefix: 'x:' });
    opened.push(unreachable);
    await expect(unreachable.consume('key', { capacity: 1, refillPerMinute: 1 })).rejects.toThrow(/redis rate limiter/);
    await expect(unreachable.ping()).rejects.toThrow(/redis rate limiter/);
  });

  it('redis: after a Redis restart the same limiter answers again (fresh buckets)', async () => {
    const local = await startRedisServer();
    const limiter = createRedisLimiter({ url: local.url, keyPrefix: 'restart:' });
    try {
      const spec = { capacity: 2, refillPerMinute: 0.01 };
      expect((await limiter.consume('key', spec)).remaining).toBe(1);
      await local.stop();
      await expect(limiter.consume('key', spec)).rejects.toThrow(/redis rate limiter/);
      await local.start();
      let decision;
      for (let i = 0; i < 100 && !decision; i++) {
        decision = await limiter.consume('key', spec).catch(() => undefined);
        if (!decision) await new Promise((r) => setTimeout(r, 50));
      }
      // Nothing is persisted, so the bucket starts over full.
      expect(decision).toMatchObject({ allowed: true, remaining: 1 });
    } finally {
      await limiter.close();
      await local.stop();
    }
  });
});
