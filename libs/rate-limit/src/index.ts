export type { BucketSpec, RateDecision, RateLimiter } from './port.js';
export {
  createInProcessLimiter,
  type InProcessLimiter,
  type InProcessLimiterOptions,
} from './in-process/in-process-limiter.js';
// The Redis client loads only where a Redis limiter is built: `@planning/rate-limit/redis`.
export type { RedisLimiter, RedisLimiterOptions } from './redis/redis-limiter.js';
export {
  createResilientLimiter,
  type LimiterLogger,
  type LimiterStatus,
  type ResilientLimiter,
  type ResilientLimiterOptions,
} from './resilient.js';
