import { describe, expect, it } from 'vitest';
import { describeLimiterContract } from '../contract/limiter-contract.js';
import { createInProcessLimiter } from './in-process-limiter.js';

describeLimiterContract('in-process', async () => {
  const limiter = createInProcessLimiter();
  return { limiter, cleanup: () => limiter.close() };
});

function manualClock(start = 1_000_000): { now: () => number; advance(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

// 60/min = exactly one token per second, which keeps the expected numbers readable.
const perSecond = { capacity: 10, refillPerMinute: 60 };

describe('in-process limiter: refill math with an injected clock', () => {
  it('in-process: a drained bucket reports exact retry-after and reset times', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now });
    for (let i = 0; i < 9; i++) await limiter.consume('k', perSecond);
    const last = await limiter.consume('k', perSecond);
    expect(last).toEqual({ allowed: true, remaining: 0, retryAfterMs: 1000, resetMs: 10_000, capacity: 10 });

    const denied = await limiter.consume('k', perSecond);
    expect(denied).toEqual({ allowed: false, remaining: 0, retryAfterMs: 1000, resetMs: 10_000, capacity: 10 });
  });

  it('in-process: tokens refill continuously, fractions included', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now });
    for (let i = 0; i < 10; i++) await limiter.consume('k', perSecond);

    clock.advance(500);
    const half = await limiter.consume('k', perSecond);
    expect(half).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 500, resetMs: 9500 });

    clock.advance(500);
    const one = await limiter.consume('k', perSecond);
    expect(one).toMatchObject({ allowed: true, remaining: 0, retryAfterMs: 1000, resetMs: 10_000 });

    clock.advance(2250);
    const more = await limiter.consume('k', perSecond);
    // 2.25 tokens back, one taken: 1.25 left.
    expect(more).toMatchObject({ allowed: true, remaining: 1, retryAfterMs: 0, resetMs: 8750 });
  });

  it('in-process: retry-after is the time until the requested cost is available', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now });
    await limiter.consume('k', perSecond, 9);
    const denied = await limiter.consume('k', perSecond, 4);
    // 1 token held, 3 missing at 1/s.
    expect(denied).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: 3000, resetMs: 9000 });
    clock.advance(3000);
    expect(await limiter.consume('k', perSecond, 4)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('in-process: a long idle refills to the capacity and no further', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now });
    await limiter.consume('k', perSecond, 5);
    clock.advance(3_600_000);
    const d = await limiter.consume('k', perSecond);
    expect(d).toMatchObject({ allowed: true, remaining: 9, resetMs: 1000 });
  });

  it('in-process: a clock that steps back does not drain or fill the bucket', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now });
    await limiter.consume('k', perSecond, 5);
    clock.advance(-10_000);
    expect(await limiter.consume('k', perSecond)).toMatchObject({ allowed: true, remaining: 4 });
  });

  it('in-process: an odd refill rate still rounds retry-after up to whole milliseconds', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now });
    // 7/min: one token every 8571.43 ms.
    const spec = { capacity: 1, refillPerMinute: 7 };
    await limiter.consume('k', spec);
    const denied = await limiter.consume('k', spec);
    expect(denied.retryAfterMs).toBe(8572);
    clock.advance(8571);
    expect((await limiter.consume('k', spec)).allowed).toBe(false);
    clock.advance(1);
    expect((await limiter.consume('k', spec)).allowed).toBe(true);
  });
});

describe('in-process limiter: bounded memory', () => {
  it('in-process: the sweep drops buckets that have refilled to full and keeps the rest', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now, sweepIntervalMs: 60_000 });
    await limiter.consume('quick', perSecond); // full again after 1 s
    await limiter.consume('slow', { capacity: 10, refillPerMinute: 0.5 }); // full again after 120 s
    expect(limiter.size).toBe(2);

    clock.advance(59_000);
    await limiter.consume('other', perSecond);
    expect(limiter.size).toBe(3); // not sweep time yet

    clock.advance(1_000);
    await limiter.consume('other', perSecond);
    // 'quick' (and 'other', 1 s after its use) had refilled and went; 'slow' is still half a token short.
    expect(limiter.size).toBe(2);
    expect(await limiter.consume('slow', { capacity: 10, refillPerMinute: 0.5 })).toMatchObject({ remaining: 8 });
  });

  it('in-process: a swept bucket comes back full, as it would have been', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now, sweepIntervalMs: 1000 });
    await limiter.consume('k', perSecond, 3);
    clock.advance(5000);
    await limiter.consume('x', perSecond); // triggers the sweep
    expect(limiter.size).toBe(1);
    expect(await limiter.consume('k', perSecond)).toMatchObject({ allowed: true, remaining: 9 });
  });

  it('in-process: beyond maxKeys the least recently used bucket is dropped', async () => {
    const clock = manualClock();
    const limiter = createInProcessLimiter({ clock: clock.now, maxKeys: 2 });
    const spec = { capacity: 2, refillPerMinute: 0.01 };
    await limiter.consume('a', spec);
    await limiter.consume('a', spec);
    await limiter.consume('b', spec);
    await limiter.consume('a', spec); // a is now the most recent (denied, still tracked)
    await limiter.consume('c', spec); // evicts b, the least recently used
    expect(limiter.size).toBe(2);
    // a kept its empty bucket.
    expect((await limiter.consume('a', spec)).allowed).toBe(false);
    // b was dropped, so it starts over full.
    expect(await limiter.consume('b', spec)).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('in-process: close empties the buckets', async () => {
    const limiter = createInProcessLimiter();
    await limiter.consume('k', perSecond);
    await limiter.close();
    expect(limiter.size).toBe(0);
  });
});
