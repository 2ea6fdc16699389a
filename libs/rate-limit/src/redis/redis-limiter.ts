import { createClient } from 'redis';
import type { BucketSpec, RateDecision, RateLimiter } from '../port.js';
import { assertValidRequest } from '../spec.js';
import { TOKEN_BUCKET_SCRIPT, TOKEN_BUCKET_SHA1 } from './token-bucket-script.js';

export interface RedisLimiterOptions {
  /** `redis://[[user][:password]@]host[:port][/db]` (or `rediss://`). */
  url: string;
  /** Prefix of every bucket key. Default `planning:rl:`. */
  keyPrefix?: string;
  /** A command that gets no reply within this many ms fails. Default 200. */
  commandTimeoutMs?: number;
  /** A connection attempt that does not complete within this many ms fails. Default 2000. */
  connectTimeoutMs?: number;
}

export interface RedisLimiter extends RateLimiter {
  readonly kind: 'redis';
}

const DEFAULT_KEY_PREFIX = 'planning:rl:';
const DEFAULT_COMMAND_TIMEOUT_MS = 200;
const DEFAULT_CONNECT_TIMEOUT_MS = 2000;
const MAX_RECONNECT_DELAY_MS = 1000;

/**
 * A token bucket per key in Redis, shared by every process that uses the same Redis and prefix.
 *
 * Built to fail fast, because the resilient wrapper decides with a local bucket whenever this one
 * throws: no offline queue (a command issued while disconnected rejects at once instead of
 * waiting for a reconnect), a timeout on every command, and a bounded connect timeout. The client
 * keeps reconnecting in the background, so calls succeed again as soon as Redis is back.
 *
 * The factory does not wait for the connection; the first call waits for the first connection
 * attempt (at most `connectTimeoutMs`), later calls never wait for one.
 */
export function createRedisLimiter(options: RedisLimiterOptions): RedisLimiter {
  const keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
  const commandTimeoutMs = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;

  const client = createClient({
    url: options.url,
    disableOfflineQueue: true,
    commandOptions: { timeout: commandTimeoutMs },
    socket: {
      connectTimeout: connectTimeoutMs,
      // Keep trying forever (never give up: Redis coming back must heal the limiter), capped
      // backoff with jitter so replicas do not reconnect in lockstep.
      reconnectStrategy: (retries: number) =>
        Math.min(50 * 2 ** Math.min(retries, 10), MAX_RECONNECT_DELAY_MS) + Math.floor(Math.random() * 50),
    },
  });

  let everReady = false;
  // Without an 'error' listener the client's EventEmitter would throw and crash the process on the
  // first refused connection; the errors that matter reach callers through rejected commands.
  client.on('error', () => {});
  client.on('ready', () => {
    everReady = true;
  });
  const firstAttempt = new Promise<void>((resolve) => {
    const settle = (): void => {
      client.off('ready', settle);
      client.off('error', settle);
      resolve();
    };
    client.on('ready', settle);
    client.on('error', settle);
  });
  client.connect().catch(() => {
    // connect() only rejects when the client is closed while connecting; calls report the state.
  });

  const send = async (args: string[]): Promise<unknown> => {
    if (!everReady) await firstAttempt;
    try {
      try {
        return await client.sendCommand(args);
      } catch (err) {
        if (args[0] !== 'EVALSHA' || !(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        // The server lost its script cache (restart, failover, SCRIPT FLUSH): EVAL runs the
        // script and caches it again, so the next EVALSHA hits.
        return await client.sendCommand(['EVAL', TOKEN_BUCKET_SCRIPT, ...args.slice(2)]);
      }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new Error(`redis rate limiter: ${args[0]} failed: ${message || (err as Error).name}`, { cause: err });
    }
  };

  return {
    kind: 'redis',
    async consume(key: string, spec: BucketSpec, cost = 1): Promise<RateDecision> {
      assertValidRequest(key, spec, cost);
      const reply = await send([
        'EVALSHA',
        TOKEN_BUCKET_SHA1,
        '1',
        keyPrefix + key,
        String(spec.capacity),
        String(spec.refillPerMinute),
        String(cost),
      ]);
      return toDecision(reply, spec);
    },
    async ping(): Promise<void> {
      await send(['PING']);
    },
    async close(): Promise<void> {
      if (!client.isOpen) return;
      // Connected: let in-flight commands finish (each is bounded by the command timeout).
      // Reconnecting: nothing is in flight; stop the reconnect loop at once.
      if (client.isReady) await client.close();
      else client.destroy();
    },
  };
}

function toDecision(reply: unknown, spec: BucketSpec): RateDecision {
  if (!Array.isArray(reply) || reply.length !== 4 || !reply.every((v) => typeof v === 'number')) {
    throw new Error(`redis rate limiter: unexpected script reply ${JSON.stringify(reply)}`);
  }
  const [allowed, remaining, retryAfterMs, resetMs] = reply as [number, number, number, number];
  return { allowed: allowed === 1, remaining, retryAfterMs, resetMs, capacity: spec.capacity };
}
