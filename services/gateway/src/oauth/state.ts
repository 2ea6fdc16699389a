/**
 * Where the authorization server keeps its state (oidc-provider's adapter interface): clients,
 * grants, codes, tokens, sessions and interactions. In the gateway's document store — shared by
 * every replica through MongoDB in distributed mode, on disk in all-in-one — and, when Redis is
 * configured, the short-lived, hot models (sessions, interactions, codes, access tokens) in Redis.
 * Either way a flow begun on one replica finishes on another.
 *
 * Payloads are stored as JSON text (client metadata may hold keys a document store refuses).
 * Consuming a code or refresh token is one atomic step: of two concurrent redemptions exactly one
 * succeeds, and the other is treated as a replay.
 */
import { ServiceError } from '@planning/errors';
import type { Collection, DocumentStore, StoredDocument } from '@planning/store';

export type Payload = Record<string, unknown> & { grantId?: string; uid?: string; userCode?: string; consumed?: number };

/** One place the state lives. `model` is oidc-provider's model name (`AccessToken`, `Grant`, ...). */
export interface StateBackend {
  readonly kind: 'store' | 'redis';
  upsert(model: string, id: string, payload: Payload, expiresInSeconds: number | undefined): Promise<void>;
  find(model: string, id: string): Promise<Payload | undefined>;
  findBy(model: string, field: 'uid' | 'userCode', value: string): Promise<Payload | undefined>;
  /** Marks consumed; false when it was consumed already (the caller lost a race or sees a replay). */
  consume(model: string, id: string): Promise<boolean>;
  destroy(model: string, id: string): Promise<void>;
  /** Deletes every instance of `model` that belongs to the grant; returns how many. */
  revokeByGrantId(model: string, grantId: string): Promise<number>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

const epoch = (date: Date) => Math.floor(date.getTime() / 1000);

interface StateDocument extends StoredDocument {
  model: string;
  id: string;
  payload: string;
  grantId: string | null;
  uid: string | null;
  userCode: string | null;
  consumed: number | null;
  /** Null: no expiry (registered clients). */
  expiresAt: Date | null;
}

export async function createStoreBackend(store: DocumentStore, clock: () => Date = () => new Date()): Promise<StateBackend> {
  const docs: Collection<StateDocument> = store.collection<StateDocument>('oauth_state');
  await docs.createIndexes([
    { name: 'expiry_ttl', keys: { expiresAt: 1 }, expireAfterSeconds: 0 },
    { name: 'model_grant', keys: { model: 1, grantId: 1 } },
    { name: 'model_uid', keys: { model: 1, uid: 1 } },
    { name: 'model_user_code', keys: { model: 1, userCode: 1 } },
  ]);
  const live = () => ({ $or: [{ expiresAt: null }, { expiresAt: { $gt: clock() } }] });
  const read = (doc: StateDocument | null): Payload | undefined =>
    doc ? { ...(JSON.parse(doc.payload) as Payload), ...(doc.consumed !== null ? { consumed: doc.consumed } : {}) } : undefined;
  return {
    kind: 'store',
    async upsert(model, id, payload, expiresIn) {
      const { consumed: _consumed, ...rest } = payload;
      const fields = {
        model,
        id,
        payload: JSON.stringify(rest),
        grantId: payload.grantId ?? null,
        uid: payload.uid ?? null,
        userCode: payload.userCode ?? null,
        expiresAt: expiresIn ? new Date(clock().getTime() + expiresIn * 1000) : null,
      };
      await docs.updateOne({ _id: `${model}:${id}` }, { $set: fields, $setOnInsert: { consumed: null } }, { upsert: true });
    },
    async find(model, id) {
      return read(await docs.findOne({ _id: `${model}:${id}`, ...live() }));
    },
    async findBy(model, field, value) {
      return read(await docs.findOne({ model, [field]: value, ...live() }));
    },
    async consume(model, id) {
      const done = await docs.findOneAndUpdate({ _id: `${model}:${id}`, consumed: null }, { $set: { consumed: epoch(clock()) } });
      return done !== null;
    },
    async destroy(model, id) {
      await docs.deleteOne({ _id: `${model}:${id}` });
    },
    async revokeByGrantId(model, grantId) {
      return (await docs.deleteMany({ model, grantId })).deletedCount;
    },
    async ping() {
      await store.ping();
    },
    async close() {},
  };
}

/**
 * The same in Redis: one key per instance (expiring with it), a `consumed` marker set with NX (so
 * exactly one consumer wins), and per-grant and per-uid index keys.
 */
export function createRedisBackend(options: { url: string; keyPrefix?: string }): StateBackend {
  const prefix = options.keyPrefix ?? 'planning:oauth:';
  // The Redis client's code is read only when Redis is configured (a process without it never loads it).
  const loading = import('redis').then(({ createClient }) => {
    const client = createClient({
      url: options.url,
      disableOfflineQueue: true,
      commandOptions: { timeout: 1_000 },
      socket: {
        connectTimeout: 2_000,
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 10), 1_000) + Math.floor(Math.random() * 50),
      },
    });
    client.on('error', () => {});
    return client;
  });
  const connecting = loading.then((client) => client.connect()).catch(() => undefined);
  let client!: Awaited<typeof loading>;
  void loading.then((loaded) => (client = loaded));
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    await connecting;
    try {
      return await fn();
    } catch (err) {
      throw new ServiceError('unavailable', 'The authorization state store cannot be reached', {}, { cause: err });
    }
  };
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
      await connecting;
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
    async close() {
      await connecting;
      // (Undefined only when the client's code could not be loaded: nothing to close.)
      if (!client?.isOpen) return;
      if (client.isReady) await client.close();
      else client.destroy();
    },
  };
}

/** Models that live long (registered clients, grants, refresh tokens) stay in the store even when Redis is there. */
export const DURABLE_MODELS: ReadonlySet<string> = new Set(['Client', 'Grant', 'RefreshToken', 'RegistrationAccessToken', 'InitialAccessToken']);
