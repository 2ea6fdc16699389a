import type { BucketSpec, RateDecision, RateLimiter } from '../port.js';
import { assertValidRequest } from '../spec.js';
import { decide, isFullAt, type BucketState } from './token-bucket.js';

export interface InProcessLimiterOptions {
  /** Milliseconds clock; `Date.now` by default. Tests inject one to drive refills exactly. */
  clock?: () => number;
  /**
   * Most buckets held at once (default 100,000). Beyond it the least recently used bucket is
   * dropped, full or not: a dropped bucket that was not full starts over full, which forgives that
   * key some tokens. Size it well above the number of keys active within a refill period.
   */
  maxKeys?: number;
  /** How often (ms, by the injected clock) a call also drops every bucket that has refilled to full. Default 60 s. */
  sweepIntervalMs?: number;
}

export interface InProcessLimiter extends RateLimiter {
  readonly kind: 'in-process';
  /** Buckets currently held (for metrics and tests). */
  readonly size: number;
}

const DEFAULT_MAX_KEYS = 100_000;
const DEFAULT_SWEEP_INTERVAL_MS = 60_000;

/**
 * A token bucket per key in this process's memory. Each call runs to completion synchronously
 * before its promise resolves, so decisions are atomic without locks.
 *
 * Memory stays bounded two ways, neither needing a timer: the map is kept in least-recently-used
 * order (a hit moves the key to the end) and capped at `maxKeys`; and at most once per
 * `sweepIntervalMs` a call walks the map and drops buckets that have refilled to full, which
 * carry no information (a fresh bucket is identical).
 */
export function createInProcessLimiter(options: InProcessLimiterOptions = {}): InProcessLimiter {
  const clock = options.clock ?? Date.now;
  const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
  const sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
  if (!Number.isInteger(maxKeys) || maxKeys < 1) throw new RangeError(`maxKeys must be a positive integer, got ${maxKeys}`);

  const buckets = new Map<string, BucketState>();
  let lastSweep = clock();

  const sweep = (now: number): void => {
    lastSweep = now;
    for (const [key, state] of buckets) {
      if (isFullAt(state, now)) buckets.delete(key);
    }
  };

  return {
    kind: 'in-process',
    get size() {
      return buckets.size;
    },
    consume(key: string, spec: BucketSpec, cost = 1): Promise<RateDecision> {
      try {
        assertValidRequest(key, spec, cost);
      } catch (err) {
        return Promise.reject(err);
      }
      const now = clock();
      if (now - lastSweep >= sweepIntervalMs) sweep(now);

      const state = buckets.get(key);
      const { decision, next } = decide(state, spec, cost, now);
      // Delete then set: moves the key to the end of the map's insertion order (most recently used).
      buckets.delete(key);
      buckets.set(key, next);
      while (buckets.size > maxKeys) {
        const oldest = buckets.keys().next();
        if (oldest.done) break;
        buckets.delete(oldest.value);
      }
      return Promise.resolve(decision);
    },
    ping(): Promise<void> {
      return Promise.resolve();
    },
    close(): Promise<void> {
      buckets.clear();
      return Promise.resolve();
    },
  };
}
