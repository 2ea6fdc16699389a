import type { BucketSpec, RateDecision } from '../port.js';
import { TOKEN_EPSILON } from '../spec.js';

/**
 * The token bucket arithmetic, kept free of storage so the in-process adapter and the tests share
 * it; the Redis adapter's Lua script is a line-by-line transcription of the same rules.
 */

export interface BucketState {
  /** Fractional tokens at `updatedAt`. */
  tokens: number;
  /** Clock reading (ms) of the last decision. */
  updatedAt: number;
  /** The spec the bucket was last used with: needed to honour a capacity change. */
  capacity: number;
  refillPerMinute: number;
}

/**
 * Tokens in the bucket at `now` under `spec`. A capacity raise credits the difference (a full
 * bucket stays full, exactly like a fresh bucket at the new size would be); a capacity cut clamps.
 * The elapsed interval refills at the new rate.
 */
export function tokensAt(state: BucketState | undefined, spec: BucketSpec, now: number): number {
  if (state === undefined) return spec.capacity;
  let tokens = state.tokens;
  if (spec.capacity > state.capacity) tokens += spec.capacity - state.capacity;
  // A clock that steps backwards must not drain the bucket.
  const elapsed = Math.max(0, now - state.updatedAt);
  // Multiply before dividing: keeps whole-token refills exact for round rates (500 ms × 60/min = 0.5).
  tokens += (elapsed * spec.refillPerMinute) / 60_000;
  return tokens >= spec.capacity - TOKEN_EPSILON ? spec.capacity : tokens;
}

/** Milliseconds to gain `missing` tokens at `refillPerMinute`, rounded up to whole ms. */
function msFor(missing: number, refillPerMinute: number): number {
  if (missing <= TOKEN_EPSILON) return 0;
  // The tiny subtraction absorbs float noise (1000.0000000001 must not become 1001).
  return Math.max(1, Math.ceil((missing * 60_000) / refillPerMinute - 1e-6));
}

/** Decides one request and returns the decision and the bucket's next state. */
export function decide(
  state: BucketState | undefined,
  spec: BucketSpec,
  cost: number,
  now: number,
): { decision: RateDecision; next: BucketState } {
  let tokens = tokensAt(state, spec, now);
  const allowed = tokens + TOKEN_EPSILON >= cost;
  if (allowed) tokens = Math.max(0, tokens - cost);
  const decision: RateDecision = {
    allowed,
    remaining: Math.floor(tokens + TOKEN_EPSILON),
    retryAfterMs: msFor(cost - tokens, spec.refillPerMinute),
    resetMs: msFor(spec.capacity - tokens, spec.refillPerMinute),
    capacity: spec.capacity,
  };
  return {
    decision,
    next: { tokens, updatedAt: now, capacity: spec.capacity, refillPerMinute: spec.refillPerMinute },
  };
}

/** Is the bucket full at `now` (so dropping it loses nothing: a fresh bucket is identical)? */
export function isFullAt(state: BucketState, now: number): boolean {
  const elapsed = Math.max(0, now - state.updatedAt);
  return state.tokens + (elapsed * state.refillPerMinute) / 60_000 >= state.capacity - TOKEN_EPSILON;
}
