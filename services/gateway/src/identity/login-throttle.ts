import { createHash } from 'node:crypto';
import { ServiceError } from '@planning/errors';
import type { BucketSpec, RateLimiter } from '@planning/rate-limit';

/**
 * Throttles FAILED sign-ins per email and per client address with token buckets on the rate
 * limiter port (shared through Redis when configured). Keys are SHA-256 hashes: no email or
 * address is stored in the limiter.
 *
 * The port only has `consume`, so the check is done with slivers: an attempt first takes a sliver
 * (`SLIVER` of a token) and is refused while less than one whole token would be left; a failure
 * then takes the rest of its token. A success costs only the sliver, so signing in
 * successfully never locks anyone out. Buckets hold `max + 0.5` tokens so exactly `max` failures
 * pass from a full bucket.
 */
const SLIVER = 1e-6;

export interface LoginThrottleOptions {
  limiter: RateLimiter;
  maxFailuresPerEmail: number;
  maxFailuresPerAddress: number;
  /** How long an emptied bucket takes to refill completely. */
  windowSeconds: number;
}

export interface LoginThrottle {
  /** Throws 429 `rate-limited` (with retry-after) when the email or address has failed too often. */
  check(email: string, address: string): Promise<void>;
  /** Counts a failed attempt against both. */
  failed(email: string, address: string): Promise<void>;
}

const digest = (value: string): string => createHash('sha256').update(value, 'utf8').digest('base64url');

export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const spec = (max: number): BucketSpec => ({
    capacity: max + 0.5,
    refillPerMinute: ((max + 0.5) * 60) / options.windowSeconds,
  });
  const buckets = (email: string, address: string) => [
    { key: `login:email:${digest(email.trim().toLowerCase())}`, spec: spec(options.maxFailuresPerEmail) },
    { key: `login:addr:${digest(address)}`, spec: spec(options.maxFailuresPerAddress) },
  ];
  return {
    async check(email, address) {
      for (const bucket of buckets(email, address)) {
        const decision = await options.limiter.consume(bucket.key, bucket.spec, SLIVER);
        if (!decision.allowed || decision.remaining < 1) {
          // At most one whole token is missing: that much refill time is an upper bound.
          const retryAfterSeconds = Math.ceil(60 / bucket.spec.refillPerMinute);
          throw new ServiceError('rate-limited', 'Too many failed sign-ins; try again later', { retryAfterSeconds });
        }
      }
    },
    async failed(email, address) {
      for (const bucket of buckets(email, address)) {
        await options.limiter.consume(bucket.key, bucket.spec, 1 - SLIVER);
      }
    },
  };
}
