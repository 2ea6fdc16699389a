import type { BucketSpec, RateDecision, RateLimiter } from './port.js';
import { assertValidRequest } from './spec.js';

export interface LimiterLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface ResilientLimiterOptions {
  /** The shared limiter (Redis). */
  primary: RateLimiter;
  /** Decides while the primary is unreachable; this replica's own buckets (in-process). */
  fallback: RateLimiter;
  logger?: LimiterLogger;
  /** After a primary failure, how long (ms) to decide locally before trying the primary again. Default 2000. */
  retryAfterMs?: number;
  /**
   * Longest wait (ms) for a primary answer before deciding locally. Default 500. A backstop: the
   * Redis adapter's own command timeout is shorter; this also covers a primary that hangs.
   */
  primaryTimeoutMs?: number;
  /** Milliseconds clock for the retry interval; `Date.now` by default. */
  clock?: () => number;
}

export interface LimiterStatus {
  /** `shared`: the primary decides; `per-replica`: the fallback does (the primary is unreachable). */
  mode: 'shared' | 'per-replica';
  /** ISO time the primary was first seen failing (only while `per-replica`). */
  degradedSince?: string;
  /** The last primary failure (only while `per-replica`). */
  lastError?: string;
}

export interface ResilientLimiter extends RateLimiter {
  readonly kind: 'resilient';
  /** For readiness details and logs. */
  status(): LimiterStatus;
}

const DEFAULT_RETRY_AFTER_MS = 2000;
const DEFAULT_PRIMARY_TIMEOUT_MS = 500;

/**
 * Fail open per replica, never a total outage: the primary decides while it answers; when it
 * errors or times out, the fallback decides (the caller is still limited, per replica) and the
 * wrapper reports `per-replica`.
 *
 * A circuit breaker keeps degraded mode cheap: while open, requests go straight to the fallback
 * without waiting on the primary, and one request (or `ping`) per `retryAfterMs` probes it. A
 * successful probe closes the circuit. Each transition is logged once.
 *
 * What "per replica" means: each replica's fallback buckets start full when the primary is lost, so
 * for as long as the outage lasts a key may get up to its limit on every replica.
 */
export function createResilientLimiter(options: ResilientLimiterOptions): ResilientLimiter {
  const { primary, fallback, logger } = options;
  const retryAfterMs = options.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS;
  const primaryTimeoutMs = options.primaryTimeoutMs ?? DEFAULT_PRIMARY_TIMEOUT_MS;
  const clock = options.clock ?? Date.now;

  let degraded = false;
  let degradedAt = 0;
  let lastError: string | undefined;
  let nextProbeAt = 0;
  // Bumped on every transition. A call that started in an earlier epoch must not move the state:
  // a late failure from before a recovery, or a late success from before an outage, is stale news.
  let epoch = 0;

  const markFailed = (err: unknown, startedIn: number): void => {
    if (startedIn !== epoch) return;
    lastError = describe(err);
    nextProbeAt = clock() + retryAfterMs;
    if (degraded) return;
    degraded = true;
    degradedAt = clock();
    epoch++;
    logger?.warn(
      { primary: primary.kind, fallback: fallback.kind, err: lastError, retryAfterMs },
      'rate limiter degraded: shared limiter unreachable, deciding per replica',
    );
  };

  const markRecovered = (startedIn: number): void => {
    if (startedIn !== epoch || !degraded) return;
    const degradedForMs = clock() - degradedAt;
    degraded = false;
    lastError = undefined;
    epoch++;
    logger?.info({ primary: primary.kind, degradedForMs }, 'rate limiter recovered: deciding with the shared limiter again');
  };

  /** Should this call use the primary? While open, only one call per interval does (the probe). */
  const takePrimaryTurn = (): boolean => {
    if (!degraded) return true;
    const now = clock();
    if (now < nextProbeAt) return false;
    // Claim the probe before awaiting so concurrent calls keep going to the fallback.
    nextProbeAt = now + retryAfterMs;
    return true;
  };

  return {
    kind: 'resilient',
    async consume(key: string, spec: BucketSpec, cost = 1): Promise<RateDecision> {
      // Bad input is the caller's bug, not a primary outage: it must not open the circuit.
      assertValidRequest(key, spec, cost);
      if (!takePrimaryTurn()) return fallback.consume(key, spec, cost);
      const startedIn = epoch;
      try {
        const decision = await withTimeout(primary.consume(key, spec, cost), primaryTimeoutMs);
        markRecovered(startedIn);
        return decision;
      } catch (err) {
        markFailed(err, startedIn);
        return fallback.consume(key, spec, cost);
      }
    },
    /**
     * Resolves while this wrapper can decide (the fallback answers), so readiness does not fail on
     * a primary outage; it also checks the primary (subject to the retry interval while degraded),
     * so `status()` is current even on an idle replica.
     */
    async ping(): Promise<void> {
      await fallback.ping();
      if (!takePrimaryTurn()) return;
      const startedIn = epoch;
      try {
        await withTimeout(primary.ping(), primaryTimeoutMs);
        markRecovered(startedIn);
      } catch (err) {
        markFailed(err, startedIn);
      }
    },
    async close(): Promise<void> {
      const results = await Promise.allSettled([primary.close(), fallback.close()]);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
    status(): LimiterStatus {
      if (!degraded) return { mode: 'shared' };
      const status: LimiterStatus = { mode: 'per-replica', degradedSince: new Date(degradedAt).toISOString() };
      if (lastError !== undefined) status.lastError = lastError;
      return status;
    },
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer from the shared limiter within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
