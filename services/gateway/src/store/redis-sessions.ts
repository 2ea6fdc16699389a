import { ServiceError } from '@planning/errors';
import { createClient } from 'redis';
import type { SessionRecord, SessionStore } from './sessions.js';

export interface RedisSessionStore extends SessionStore {
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Sessions in Redis (shared by every gateway replica): one key per session, named by the hash of
 * the cookie value, expiring with the session. Fails fast (no offline queue, short timeouts):
 * while Redis is unreachable, requests that need a session get 503 `unavailable`, never a hang.
 */
export function createRedisSessionStore(options: { url: string; keyPrefix?: string }): RedisSessionStore {
  const prefix = options.keyPrefix ?? 'planning:session:';
  const client = createClient({
    url: options.url,
    disableOfflineQueue: true,
    commandOptions: { timeout: 500 },
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
      throw new ServiceError('unavailable', 'The session store cannot be reached', {}, { cause: err });
    }
  };
  return {
    kind: 'redis',
    async create(tokenHash, session) {
      const ttlMs = Date.parse(session.expiresAt) - Date.now();
      if (ttlMs <= 0) return;
      await call(() => client.set(`${prefix}${tokenHash}`, JSON.stringify(session), { PX: ttlMs }));
    },
    async get(tokenHash, now = new Date()) {
      const raw = await call(() => client.get(`${prefix}${tokenHash}`));
      if (!raw) return null;
      const session = JSON.parse(raw) as SessionRecord;
      return Date.parse(session.expiresAt) > now.getTime() ? session : null;
    },
    async delete(tokenHash) {
      await call(() => client.del(`${prefix}${tokenHash}`));
    },
    async ping() {
      await call(() => client.ping());
    },
    async close() {
      await connecting;
      if (!client.isOpen) return;
      if (client.isReady) await client.close();
      else client.destroy();
    },
  };
}
