/**
 * The authorization server's hot state in Redis (see state.ts). Its own module so the Redis
 * client's code is read only when Redis is configured: setup.ts imports it on demand.
 */
import { failFastRedis } from '../store/redis-client.js';
import { epoch, type Payload, type StateBackend } from './state.js';

/**
 * The same in Redis: one key per instance (expiring with it), a `consumed` marker set with NX (so
 * exactly one consumer wins), and per-grant and per-uid index keys.
 */
export function createRedisBackend(options: { url: string; keyPrefix?: string }): StateBackend {
  const prefix = options.keyPrefix ?? 'planning:oauth:';
  const { client, call, close } = failFastRedis(options.url, 1_000, 'authorization state store');
  const key = (model: string, id: string) => `${prefix}${model}:${id}`;
  const consumedKey = (model: string, id: string) => `${prefix}${model}:${id}:consumed`;
  const indexKey = (model: string, field: string, value: string) => `${prefix}${model}:by-${field}:${value}`;
  const grantKey = (model: string, grantId: string) => `${prefix}${model}:grant:${grantId}`;
  const read = async (model: string, id: string): Promise<Payload | undefined> => {
    const [raw, consumed] = await call(() => client.mGet([key(model, id), consumedKey(model, id)]));
    if (!raw) return undefined;
    return { ...(JSON.parse(raw) as Payload), ...(consumed ? { consumed: Number(consumed) } : {}) };
  };
  return {
    kind: 'redis',
    async upsert(model, id, payload, expiresIn) {
      const { consumed: _consumed, ...rest } = payload;
      const ttl = expiresIn ? { EX: expiresIn } : {};
      const multi = client.multi().set(key(model, id), JSON.stringify(rest), ttl);
      if (payload.uid) multi.set(indexKey(model, 'uid', payload.uid), id, ttl);
      if (payload.userCode) multi.set(indexKey(model, 'userCode', payload.userCode), id, ttl);
      if (payload.grantId) {
        multi.sAdd(grantKey(model, payload.grantId), id);
        // The index lives as long as its longest member.
        if (expiresIn) multi.expire(grantKey(model, payload.grantId), expiresIn, 'GT');
        else multi.persist(grantKey(model, payload.grantId));
      }
      await call(() => multi.exec());
      if (payload.grantId && expiresIn) await call(() => client.expire(grantKey(model, payload.grantId!), expiresIn, 'NX'));
    },
    find: read,
    async findBy(model, field, value) {
      const id = await call(() => client.get(indexKey(model, field, value)));
      return id ? read(model, id) : undefined;
    },
    async consume(model, id) {
      const ttl = await call(() => client.pTTL(key(model, id)));
      const set = await call(() => client.set(consumedKey(model, id), String(epoch(new Date())), { NX: true, ...(ttl > 0 ? { PX: ttl } : {}) }));
      return set === 'OK';
    },
    async destroy(model, id) {
      await call(() => client.del([key(model, id), consumedKey(model, id)]));
    },
    async revokeByGrantId(model, grantId) {
      const ids = await call(() => client.sMembers(grantKey(model, grantId)));
      if (ids.length === 0) return 0;
      const deleted = await call(() => client.del([...ids.flatMap((id) => [key(model, id), consumedKey(model, id)]), grantKey(model, grantId)]));
      return Math.min(ids.length, deleted);
    },
    async ping() {
      await call(() => client.ping());
    },
    close,
  };
}
