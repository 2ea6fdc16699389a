/**
 * Where the authorization server keeps its state (oidc-provider's adapter interface): clients,
 * grants, codes, tokens, sessions and interactions. In the gateway's document store — shared by
 * every replica through MongoDB in distributed mode, on disk in all-in-one — and, when Redis is
 * configured, the short-lived, hot models (sessions, interactions, codes, access tokens) in Redis
 * (redis-state.ts).
 * Either way a flow begun on one replica finishes on another.
 *
 * Payloads are stored as JSON text (client metadata may hold keys a document store refuses).
 * Consuming a code or refresh token is one atomic step: of two concurrent redemptions exactly one
 * succeeds, and the other is treated as a replay.
 */
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

export const epoch = (date: Date) => Math.floor(date.getTime() / 1000);

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

/** Models that live long (registered clients, grants, refresh tokens) stay in the store even when Redis is there. */
export const DURABLE_MODELS: ReadonlySet<string> = new Set(['Client', 'Grant', 'RefreshToken', 'RegistrationAccessToken', 'InitialAccessToken']);
