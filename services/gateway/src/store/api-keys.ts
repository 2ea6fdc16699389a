import { newId } from '@planning/ids';
import type { PlanId, Scope } from '@planning/plans';
import type { Collection, DocumentStore, Filter, StoredDocument } from '@planning/store';

export const ACTOR_TYPES = ['agent', 'automation', 'user-integration'] as const;
export type ActorType = (typeof ACTOR_TYPES)[number];

/** An API key (DECISIONS §3). The token itself is never stored: only its SHA-256 (`tokenHash`). */
export interface ApiKeyRecord extends StoredDocument {
  tokenHash: string;
  workspaceId: string;
  agentId: string;
  label: string;
  actorType: ActorType;
  /** The workspace's plan when the key was created; the current plan caps it (see docs/auth.md). */
  planId: PlanId;
  scopes: Scope[];
  rateLimit: { requestsPerMinute: number; burst: number };
  createdBy: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  revokedBy: string | null;
  disabled: boolean;
}

/** A key as the API shows it: never the hash. */
export function apiKeyJson(key: ApiKeyRecord) {
  return {
    id: key._id,
    workspaceId: key.workspaceId,
    agentId: key.agentId,
    scopes: key.scopes,
    rateLimit: { requestsPerMinute: key.rateLimit.requestsPerMinute, burst: key.rateLimit.burst },
    label: key.label,
    actorType: key.actorType,
    planId: key.planId,
    createdBy: key.createdBy,
    createdAt: key.createdAt,
    lastUsedAt: key.lastUsedAt,
    revokedAt: key.revokedAt,
    disabled: key.disabled,
  };
}

export interface NewApiKey {
  tokenHash: string;
  workspaceId: string;
  agentId: string;
  label: string;
  actorType: ActorType;
  planId: PlanId;
  scopes: Scope[];
  rateLimit: { requestsPerMinute: number; burst: number };
  createdBy: string;
}

export interface ApiKeyCacheOptions {
  /**
   * How long a key looked up by its token hash is reused for token requests (0: never). A revoke
   * through this repository (this replica) takes effect at once; another replica's revoke within
   * this time.
   */
  ttlMs: number;
  /** Keys kept at most (the oldest entry goes first). */
  maxEntries?: number;
  clock?: () => number;
}

interface CachedKey {
  /** The lookup of a known token (an unknown token's is not remembered). */
  value: Promise<ApiKeyRecord | null>;
  expiresAt: number;
}

export class ApiKeyRepository {
  /** Token hash → the key's lookup, for `resolve`. */
  private readonly cache = new Map<string, CachedKey>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;

  private constructor(
    private readonly keys: Collection<ApiKeyRecord>,
    cache: ApiKeyCacheOptions,
  ) {
    this.ttlMs = cache.ttlMs;
    this.maxEntries = cache.maxEntries ?? 10_000;
    this.now = cache.clock ?? Date.now;
  }

  /** `cache`: see `ApiKeyCacheOptions` (default: no cache, every `resolve` reads the store). */
  static async open(store: DocumentStore, cache: ApiKeyCacheOptions = { ttlMs: 0 }): Promise<ApiKeyRepository> {
    const keys = store.collection<ApiKeyRecord>('api_keys');
    await keys.createIndexes([
      { name: 'token_hash_unique', keys: { tokenHash: 1 }, unique: true },
      { name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } },
    ]);
    return new ApiKeyRepository(keys, cache);
  }

  /**
   * The key a token request presents (by the token's hash), for authentication: the store's
   * record, reused for up to `ttlMs`. Callers check `revokedAt` and `disabled` themselves and must
   * not change the record (it is shared by the requests that reuse it).
   */
  resolve(tokenHash: string): Promise<ApiKeyRecord | null> {
    if (this.ttlMs <= 0) return this.findByTokenHash(tokenHash);
    const now = this.now();
    const cached = this.cache.get(tokenHash);
    if (cached && cached.expiresAt > now) return cached.value;
    if (cached) this.cache.delete(tokenHash);
    const value = this.findByTokenHash(tokenHash);
    const entry: CachedKey = { value, expiresAt: now + this.ttlMs };
    if (this.cache.size >= this.maxEntries) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(tokenHash, entry);
    value.then(
      (record) => {
        if (record === null && this.cache.get(tokenHash) === entry) this.cache.delete(tokenHash);
      },
      // A failed lookup is not remembered.
      () => {
        if (this.cache.get(tokenHash) === entry) this.cache.delete(tokenHash);
      },
    );
    return value;
  }

  /**
   * Forgets every remembered lookup, once a change of a key's state is written: a request that
   * starts after that reads the key again, and a lookup still in flight (it may have read the key
   * before the change) is no longer found.
   */
  private forget(): void {
    this.cache.clear();
  }

  async create(input: NewApiKey, now = new Date()): Promise<ApiKeyRecord> {
    const record: ApiKeyRecord = {
      ...input,
      _id: newId('key'),
      createdAt: now.toISOString(),
      lastUsedAt: null,
      revokedAt: null,
      revokedBy: null,
      disabled: false,
    };
    await this.keys.insertOne(record);
    return record;
  }

  findByTokenHash(tokenHash: string): Promise<ApiKeyRecord | null> {
    return this.keys.findOne({ tokenHash });
  }

  findById(id: string): Promise<ApiKeyRecord | null> {
    return this.keys.findOne({ _id: id });
  }

  /** A page of a workspace's keys, oldest first. */
  list(workspaceId: string, options: { limit: number; after?: string }): Promise<ApiKeyRecord[]> {
    const filter: Filter = { workspaceId };
    if (options.after) filter._id = { $gt: options.after };
    return this.keys.find(filter, { sort: { _id: 1 }, limit: options.limit });
  }

  /** Revokes once; a second revoke returns the record as it is (the record stays, for audit). */
  async revoke(id: string, by: string, now = new Date()): Promise<{ key: ApiKeyRecord | null; changed: boolean }> {
    try {
      const revoked = await this.keys.findOneAndUpdate(
        { _id: id, revokedAt: null },
        { $set: { revokedAt: now.toISOString(), revokedBy: by } },
      );
      if (revoked) return { key: revoked, changed: true };
      return { key: await this.findById(id), changed: false };
    } finally {
      this.forget();
    }
  }

  /** Records use at most once per `intervalMs`: the filter makes concurrent requests write once. */
  async touch(key: ApiKeyRecord, now: Date, intervalMs: number): Promise<void> {
    const last = key.lastUsedAt ? Date.parse(key.lastUsedAt) : 0;
    if (now.getTime() - last < intervalMs) return;
    const threshold = new Date(now.getTime() - intervalMs).toISOString();
    // `key` may be the record `resolve` reuses: noting the write on it spares the requests that reuse it a write each.
    key.lastUsedAt = now.toISOString();
    await this.keys.updateOne(
      { _id: key._id, $or: [{ lastUsedAt: null }, { lastUsedAt: { $lt: threshold } }] },
      { $set: { lastUsedAt: now.toISOString() } },
    );
  }
}
