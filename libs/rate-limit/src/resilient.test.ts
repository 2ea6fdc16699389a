import { randomUUID } from 'node:crypto';
import { startRedisServer, type RedisServerHandle } from '@planning/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createInProcessLimiter } from './in-process/in-process-limiter.js';
import type { BucketSpec, RateDecision, RateLimiter } from './port.js';
import { createRedisLimiter } from './redis/redis-limiter.js';
import { createResilientLimiter } from './resilient.js';

function recordingLogger() {
  return { warn: vi.fn<(obj: object, msg: string) => void>(), info: vi.fn<(obj: object, msg: string) => void>() };
}

/** A primary that can be switched between answering (from an in-process bucket), failing and hanging. */
function switchablePrimary(): RateLimiter & { mode: 'up' | 'down' | 'hang'; calls: number } {
  const inner = createInProcessLimiter();
  const primary = {
    kind: 'fake',
    mode: 'up' as 'up' | 'down' | 'hang',
    calls: 0,
    consume(key: string, spec: BucketSpec, cost?: number): Promise<RateDecision> {
      primary.calls++;
      if (primary.mode === 'down') return Promise.reject(new Error('connection refused'));
      if (primary.mode === 'hang') return new Promise<RateDecision>(() => {});
      return inner.consume(key, spec, cost);
    },
    ping(): Promise<void> {
      primary.calls++;
      if (primary.mode === 'down') return Promise.reject(new Error('connection refused'));
      if (primary.mode === 'hang') return new Promise<void>(() => {});
      return Promise.resolve();
    },
    close: () => inner.close(),
  };
  return primary;
}

const spec: BucketSpec = { capacity: 3, refillPerMinute: 0.01 };

describe('resilient limiter: circuit breaker', () => {
  it('resilient: a failing primary hands decisions to the fallback, which still limits', async () => {
    const primary = switchablePrimary();
    const logger = recordingLogger();
    const limiter = createResilientLimiter({ primary, fallback: createInProcessLimiter(), logger });
    expect(limiter.status()).toEqual({ mode: 'shared' });

    primary.mode = 'down';
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('k', spec));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);

    const status = limiter.status();
    expect(status.mode).toBe('per-replica');
    expect(status.lastError).toBe('connection refused');
    expect(Number.isNaN(Date.parse(status.degradedSince ?? ''))).toBe(false);
    expect(logger.warn).toHaveBeenCalledTimes(1);
    expect(logger.info).not.toHaveBeenCalled();
  });

  it('resilient: while open it does not call the primary, then probes once per interval and recovers', async () => {
    let now = 1_000_000;
    const primary = switchablePrimary();
    const logger = recordingLogger();
    const limiter = createResilientLimiter({
      primary,
      fallback: createInProcessLimiter(),
      logger,
      retryAfterMs: 1000,
      clock: () => now,
    });

    primary.mode = 'down';
    await limiter.consume('k', spec);
    expect(primary.calls).toBe(1);
    for (let i = 0; i < 10; i++) await limiter.consume(`k${i}`, spec);
    expect(primary.calls).toBe(1);

    // Interval over, primary still down: one probe, then quiet again.
    now += 1000;
    await limiter.consume('k', spec);
    await limiter.consume('k', spec);
    expect(primary.calls).toBe(2);
    expect(limiter.status().mode).toBe('per-replica');
    expect(logger.warn).toHaveBeenCalledTimes(1);

    primary.mode = 'up';
    now += 999;
    await limiter.consume('k', spec);
    expect(primary.calls).toBe(2);
    now += 1;
    const probe = await limiter.consume('fresh', spec);
    expect(primary.calls).toBe(3);
    expect(probe).toMatchObject({ allowed: true, remaining: 2 });
    expect(limiter.status()).toEqual({ mode: 'shared' });
    expect(logger.info).toHaveBeenCalledTimes(1);

    // Closed again: every call goes to the primary.
    await limiter.consume('fresh', spec);
    expect(primary.calls).toBe(4);
  });

  it('resilient: a primary that hangs is timed out and the fallback decides', async () => {
    const primary = switchablePrimary();
    primary.mode = 'hang';
    const limiter = createResilientLimiter({ primary, fallback: createInProcessLimiter(), primaryTimeoutMs: 20 });
    const decision = await limiter.consume('k', spec);
    expect(decision).toMatchObject({ allowed: true, remaining: 2 });
    expect(limiter.status()).toMatchObject({ mode: 'per-replica', lastError: expect.stringContaining('20 ms') });
  });

  it('resilient: concurrent failures open the circuit once and log once', async () => {
    const primary = switchablePrimary();
    primary.mode = 'down';
    const logger = recordingLogger();
    const limiter = createResilientLimiter({ primary, fallback: createInProcessLimiter(), logger });
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume('k', spec)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(3);
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  it('resilient: invalid input is rejected without opening the circuit', async () => {
    const primary = switchablePrimary();
    const limiter = createResilientLimiter({ primary, fallback: createInProcessLimiter() });
    await expect(limiter.consume('k', { capacity: 0, refillPerMinute: 1 })).rejects.toThrow(RangeError);
    expect(limiter.status().mode).toBe('shared');
    expect(primary.calls).toBe(0);
  });

  it('resilient: ping resolves during an outage and updates the status both ways', async () => {
    let now = 0;
    const primary = switchablePrimary();
    const limiter = createResilientLimiter({
      primary,
      fallback: createInProcessLimiter(),
      retryAfterMs: 100,
      clock: () => now,
    });
    primary.mode = 'down';
    await expect(limiter.ping()).resolves.toBeUndefined();
    expect(limiter.status().mode).toBe('per-replica');
    primary.mode = 'up';
    now += 100;
    await limiter.ping();
    expect(limiter.status().mode).toBe('shared');
  });
});

describe('resilient limiter over a real Redis', () => {
  let server: RedisServerHandle;

  beforeAll(async () => {
    server = await startRedisServer();
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('resilient: Redis stopped mid-run → per-replica limits; Redis back → shared again', async () => {
    const logger = recordingLogger();
    const limiter = createResilientLimiter({
      primary: createRedisLimiter({ url: server.url, keyPrefix: `resilient-${randomUUID()}:` }),
      fallback: createInProcessLimiter(),
      logger,
      retryAfterMs: 50,
    });
    try {
      // Shared: the bucket lives in Redis.
      expect(await limiter.consume('a', spec)).toMatchObject({ allowed: true, remaining: 2 });
      expect(limiter.status()).toEqual({ mode: 'shared' });

      await server.stop();

      // Every request is still decided, and still limited, by this replica's own bucket (which
      // starts full: the Redis bucket is out of reach).
      const during = [];
      for (let i = 0; i < 4; i++) during.push(await limiter.consume('b', spec));
      expect(during.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(limiter.status()).toMatchObject({ mode: 'per-replica', lastError: expect.stringContaining('redis') });
      expect(logger.warn).toHaveBeenCalledTimes(1);

      await server.start();

      // The client reconnects in the background; a probe every 50 ms notices.
      const deadline = Date.now() + 10_000;
      while (limiter.status().mode !== 'shared' && Date.now() < deadline) {
        await limiter.consume('c', spec);
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(limiter.status()).toEqual({ mode: 'shared' });
      expect(logger.info).toHaveBeenCalledTimes(1);
      expect(logger.warn).toHaveBeenCalledTimes(1);

      // Decided by the (fresh, empty) Redis again, not the fallback, where 'b' is drained.
      expect(await limiter.consume('b', spec)).toMatchObject({ allowed: true, remaining: 2 });
    } finally {
      await limiter.close();
    }
  });
});
