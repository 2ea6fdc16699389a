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

export class ApiKeyRepository {
  private constructor(private readonly keys: Collection<ApiKeyRecord>) {}

  static async open(store: DocumentStore): Promise<ApiKeyRepository> {
    const keys = store.collection<ApiKeyRecord>('api_keys');
    await keys.createIndexes([
      { name: 'token_hash_unique', keys: { tokenHash: 1 }, unique: true },
      { name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } },
    ]);
    return new ApiKeyRepository(keys);
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
    const revoked = await this.keys.findOneAndUpdate(
      { _id: id, revokedAt: null },
      { $set: { revokedAt: now.toISOString(), revokedBy: by } },
    );
    if (revoked) return { key: revoked, changed: true };
    return { key: await this.findById(id), changed: false };
  }

  /** Records use at most once per `intervalMs`: the filter makes concurrent requests write once. */
  async touch(key: ApiKeyRecord, now: Date, intervalMs: number): Promise<void> {
    const last = key.lastUsedAt ? Date.parse(key.lastUsedAt) : 0;
    if (now.getTime() - last < intervalMs) return;
    const threshold = new Date(now.getTime() - intervalMs).toISOString();
    await this.keys.updateOne(
      { _id: key._id, $or: [{ lastUsedAt: null }, { lastUsedAt: { $lt: threshold } }] },
      { $set: { lastUsedAt: now.toISOString() } },
    );
  }
}
