import { failFastRedis } from './redis-client.js';
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
  const { client, call, close } = failFastRedis(options.url, 500, 'session store');
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
    close,
  };
}
