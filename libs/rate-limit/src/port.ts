/**
 * The rate limiter port: a token bucket per key. Capacity is the burst; tokens come back at
 * `refillPerMinute` per minute, continuously (not in windows).
 */

export interface BucketSpec {
  /** Bucket size: how many requests may be made at once from a full bucket. */
  capacity: number;
  /** Tokens added per minute. */
  refillPerMinute: number;
}

export interface RateDecision {
  allowed: boolean;
  /** Whole tokens left after this decision. */
  remaining: number;
  /**
   * Milliseconds until `cost` tokens are available again, measured after this decision (0 when a
   * request of the same cost would be allowed now). With the default cost 1: until a token is back.
   */
  retryAfterMs: number;
  /** Milliseconds until the bucket is full again. */
  resetMs: number;
  capacity: number;
}

export interface RateLimiter {
  /** The adapter's technology (`in-process`, `redis`). */
  readonly kind: string;
  /** Takes `cost` tokens (default 1) if that many are available; decided atomically. */
  consume(key: string, spec: BucketSpec, cost?: number): Promise<RateDecision>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
