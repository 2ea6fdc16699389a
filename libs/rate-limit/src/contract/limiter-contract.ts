import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BucketSpec, RateLimiter } from '../port.js';

export interface OpenedLimiter {
  limiter: RateLimiter;
  cleanup(): Promise<void>;
}

/**
 * The one suite every rate limiter adapter passes. `open` is called once for the suite; every
 * test uses its own keys, so adapters may share state between tests.
 *
 * Timing: real time only ever adds tokens, so the assertions are the ones the arithmetic
 * guarantees whatever the machine's speed: "negligible" refills are slow enough (≤ 0.01 token per
 * second) that no test runs long enough to gain a token, and refill tests wait long enough to
 * gain more than a full bucket, then check the cap.
 */
export function describeLimiterContract(adapterName: string, open: () => Promise<OpenedLimiter>): void {
  describe(`rate limiter contract: ${adapterName}`, () => {
    let opened: OpenedLimiter | undefined;
    const limiter = (): RateLimiter => {
      if (!opened) throw new Error('limiter not opened');
      return opened.limiter;
    };
    const run = randomUUID().slice(0, 8);
    let n = 0;
    const freshKey = (): string => `contract-${run}-${++n}`;
    /** About one token per 100 minutes: nothing comes back during a test. */
    const still = (capacity: number): BucketSpec => ({ capacity, refillPerMinute: 0.01 });

    beforeAll(async () => {
      opened = await open();
    });
    afterAll(async () => {
      await opened?.cleanup();
    });

    it(`${adapterName}: a fresh bucket allows exactly capacity requests, then denies with a retry-after`, async () => {
      const key = freshKey();
      const spec = still(5);
      const allowed: boolean[] = [];
      for (let i = 0; i < 5; i++) allowed.push((await limiter().consume(key, spec)).allowed);
      expect(allowed).toEqual([true, true, true, true, true]);

      const denied = await limiter().consume(key, spec);
      expect(denied.allowed).toBe(false);
      expect(denied.remaining).toBe(0);
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      // One token at 0.01/min takes 6,000,000 ms; the bucket was just drained, so nearly all of it.
      expect(denied.retryAfterMs).toBeLessThanOrEqual(6_000_000);
      expect(denied.capacity).toBe(5);
    });

    it(`${adapterName}: remaining counts down and reset grows as tokens are taken`, async () => {
      const key = freshKey();
      const spec = still(3);
      const decisions = [];
      for (let i = 0; i < 3; i++) decisions.push(await limiter().consume(key, spec));
      expect(decisions.map((d) => d.remaining)).toEqual([2, 1, 0]);
      expect(decisions.map((d) => d.capacity)).toEqual([3, 3, 3]);
      // While a token is left, another request would pass now.
      expect(decisions[0]?.retryAfterMs).toBe(0);
      expect(decisions[2]?.retryAfterMs).toBeGreaterThan(0);
      const resets = decisions.map((d) => d.resetMs);
      expect(resets[0]).toBeGreaterThan(0);
      expect(resets[1]).toBeGreaterThan(resets[0] ?? 0);
      expect(resets[2]).toBeGreaterThan(resets[1] ?? 0);
      // Three tokens at 0.01/min: at most 18,000,000 ms to full.
      expect(resets[2]).toBeLessThanOrEqual(18_000_000);
    });

    it(`${adapterName}: tokens come back over real time, up to the capacity`, async () => {
      const key = freshKey();
      // 6,000/min = one token every 10 ms.
      const spec: BucketSpec = { capacity: 5, refillPerMinute: 6000 };
      // 50 at once: refilling the 45 beyond the capacity would take 450 ms, so some are denied.
      const burst = await Promise.all(Array.from({ length: 50 }, () => limiter().consume(key, spec)));
      const denied = burst.find((d) => !d.allowed);
      expect(denied).toBeDefined();
      expect(denied?.retryAfterMs).toBeGreaterThan(0);
      expect(denied?.retryAfterMs).toBeLessThanOrEqual(10);

      // 100 ms refill 10 tokens' worth: the bucket is full again, and not fuller.
      await sleep(100);
      const after = await limiter().consume(key, spec);
      expect(after.allowed).toBe(true);
      expect(after.remaining).toBe(4);
    });

    it(`${adapterName}: a bucket never holds more than its capacity after a long idle`, async () => {
      const key = freshKey();
      // 1,200/min = one token every 50 ms; 200 ms idle would add 4 tokens to the 2 left.
      const spec: BucketSpec = { capacity: 3, refillPerMinute: 1200 };
      expect((await limiter().consume(key, spec)).remaining).toBe(2);
      await sleep(200);
      const after = await limiter().consume(key, spec);
      expect(after.allowed).toBe(true);
      expect(after.remaining).toBe(2);
      expect(after.resetMs).toBeGreaterThan(0);
      expect(after.resetMs).toBeLessThanOrEqual(50);
    });

    it(`${adapterName}: a cost above 1 takes that many tokens and is denied whole when they are missing`, async () => {
      const key = freshKey();
      const spec = still(5);
      const first = await limiter().consume(key, spec, 3);
      expect(first).toMatchObject({ allowed: true, remaining: 2 });
      // A request of cost 3 would not pass now: retry-after is for 3 tokens, not 1.
      expect(first.retryAfterMs).toBeGreaterThan(0);

      const tooMuch = await limiter().consume(key, spec, 3);
      expect(tooMuch).toMatchObject({ allowed: false, remaining: 2 });
      expect(tooMuch.retryAfterMs).toBeGreaterThan(0);

      const rest = await limiter().consume(key, spec, 2);
      expect(rest).toMatchObject({ allowed: true, remaining: 0 });
    });

    it(`${adapterName}: keys are independent`, async () => {
      const a = freshKey();
      const b = freshKey();
      const spec = still(2);
      await limiter().consume(a, spec);
      await limiter().consume(a, spec);
      expect((await limiter().consume(a, spec)).allowed).toBe(false);

      const other = await limiter().consume(b, spec);
      expect(other).toMatchObject({ allowed: true, remaining: 1 });
    });

    it(`${adapterName}: concurrent calls are decided atomically (200 calls, capacity 50, exactly 50 allowed)`, async () => {
      const key = freshKey();
      const spec = still(50);
      const decisions = await Promise.all(Array.from({ length: 200 }, () => limiter().consume(key, spec)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(50);
      // Every allowed call saw a distinct remaining count: no two took the same token.
      const remainings = decisions.filter((d) => d.allowed).map((d) => d.remaining);
      expect(new Set(remainings).size).toBe(50);
      expect(Math.min(...remainings)).toBe(0);
    });

    it(`${adapterName}: a raised capacity is honoured at once (the difference is credited)`, async () => {
      const key = freshKey();
      await limiter().consume(key, still(2));
      await limiter().consume(key, still(2));
      expect((await limiter().consume(key, still(2))).allowed).toBe(false);

      // Plan upgrade: 5 instead of 2 means 3 more tokens now.
      const raised = await limiter().consume(key, still(5));
      expect(raised).toMatchObject({ allowed: true, remaining: 2, capacity: 5 });
      expect((await limiter().consume(key, still(5))).allowed).toBe(true);
      expect((await limiter().consume(key, still(5))).allowed).toBe(true);
      expect((await limiter().consume(key, still(5))).allowed).toBe(false);
    });

    it(`${adapterName}: a lowered capacity clamps the tokens held`, async () => {
      const key = freshKey();
      expect((await limiter().consume(key, still(10))).remaining).toBe(9);
      const lowered = await limiter().consume(key, still(3));
      expect(lowered).toMatchObject({ allowed: true, remaining: 2, capacity: 3 });
    });

    it(`${adapterName}: invalid specs and costs are refused`, async () => {
      const key = freshKey();
      await expect(limiter().consume(key, { capacity: 0, refillPerMinute: 60 })).rejects.toThrow(RangeError);
      await expect(limiter().consume(key, { capacity: 5, refillPerMinute: 0 })).rejects.toThrow(RangeError);
      await expect(limiter().consume(key, still(5), 6)).rejects.toThrow(RangeError);
      await expect(limiter().consume(key, still(5), 0)).rejects.toThrow(RangeError);
      await expect(limiter().consume('', still(5))).rejects.toThrow(RangeError);
    });

    it(`${adapterName}: ping answers`, async () => {
      await expect(limiter().ping()).resolves.toBeUndefined();
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
