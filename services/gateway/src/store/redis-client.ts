/**
 * A Redis client for the gateway's shared state (sessions, the authorization server's state) that
 * fails fast: no offline queue, short command and connect timeouts, capped backoff with jitter.
 * While Redis is unreachable, `call` answers 503 `unavailable` (`what` names the store in the
 * message) instead of hanging the request.
 */
import { ServiceError } from '@planning/errors';
import { createClient } from 'redis';

export function failFastRedis(url: string, commandTimeoutMs: number, what: string) {
  const client = createClient({
    url,
    disableOfflineQueue: true,
    commandOptions: { timeout: commandTimeoutMs },
    socket: {
      connectTimeout: 2_000,
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 10), 1_000) + Math.floor(Math.random() * 50),
    },
  });
  client.on('error', () => {});
  const connecting = client.connect().catch(() => undefined);
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    await connecting;
    try {
      return await fn();
    } catch (err) {
      throw new ServiceError('unavailable', `The ${what} cannot be reached`, {}, { cause: err });
    }
  };
  /** Closes the connection (gracefully when it is up). */
  const close = async (): Promise<void> => {
    await connecting;
    if (!client.isOpen) return;
    if (client.isReady) await client.close();
    else client.destroy();
  };
  return { client, call, close };
}
