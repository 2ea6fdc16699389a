import type { BucketSpec } from './port.js';

/**
 * Checks a bucket spec and a cost before any adapter touches state. Bad values are a programming
 * or configuration error (the plan table), not a client error, so they throw `RangeError`
 * (reported as `internal` at the edge) rather than a `ServiceError('invalid-input')`.
 */
export function assertValidRequest(key: string, spec: BucketSpec, cost: number): void {
  if (typeof key !== 'string' || key.length === 0) {
    throw new RangeError('rate limit key must be a non-empty string');
  }
  if (!Number.isFinite(spec.capacity) || spec.capacity <= 0) {
    throw new RangeError(`rate limit capacity must be a positive number, got ${spec.capacity}`);
  }
  // A zero refill would make a bucket that never recovers and a retry-after of infinity.
  if (!Number.isFinite(spec.refillPerMinute) || spec.refillPerMinute <= 0) {
    throw new RangeError(`rate limit refillPerMinute must be a positive number, got ${spec.refillPerMinute}`);
  }
  // A cost above the capacity could never be granted; refusing it loudly beats denying forever.
  if (!Number.isFinite(cost) || cost <= 0 || cost > spec.capacity) {
    throw new RangeError(`rate limit cost must be > 0 and <= capacity (${spec.capacity}), got ${cost}`);
  }
}

/**
 * Floating-point slack for token comparisons: `elapsed * rate` sums can land a hair below a whole
 * token (0.9999999999) and must not turn an exact refill into a 1 ms denial.
 */
export const TOKEN_EPSILON = 1e-9;
