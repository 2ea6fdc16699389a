export type { BucketSpec, RateDecision, RateLimiter } from './port.js';
export {
  createInProcessLimiter,
  type InProcessLimiter,
  type InProcessLimiterOptions,
} from './in-process/in-process-limiter.js';
export { createRedisLimiter, type RedisLimiter, type RedisLimiterOptions } from './redis/redis-limiter.js';
export {
  createResilientLimiter,
  type LimiterLogger,
  type LimiterStatus,
  type ResilientLimiter,
  type ResilientLimiterOptions,
} from './resilient.js';
