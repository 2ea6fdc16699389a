/**
 * OAuth grants as the service sees them: who consented (a user), for which client, in which
 * workspace, as which agent, with which scopes and rate. A grant acts like an API key — its own
 * rate-limit bucket, the workspace's API quota and metering, capped by the current plan — and is
 * listed and revoked through the API. The authorization server's own Grant (oidc-provider) has
 * the same id, so every token it issues names this record.
 */
import { newId } from '@planning/ids';
import type { PlanId, Scope } from '@planning/plans';
import type { Collection, DocumentStore, Filter, StoredDocument } from '@planning/store';

export const GRANT_ID_PREFIX = 'grt';

export function isGrantId(id: string | undefined): boolean {
  return typeof id === 'string' && id.startsWith(`${GRANT_ID_PREFIX}_`);
}

export type GrantRevokeReason = 'revoked' | 'client-revoked' | 'replay' | 'user-removed';

export interface GrantRecord extends StoredDocument {
  workspaceId: string;
  agentId: string;
  userId: string;
  clientId: string;
  clientName: string | null;
  scopes: Scope[];
  /** The workspace's plan when the grant was made; the current plan caps it, as for API keys. */
  planId: PlanId;
  rateLimit: { requestsPerMinute: number; burst: number };
  createdAt: string;
  expiresAt: string;
  lastUsedAt: string | null;
  lastRefreshedAt: string | null;
  revokedAt: string | null;
  revokedBy: string | null;
  revokeReason: GrantRevokeReason | null;
}

export type NewGrant = Pick<GrantRecord, 'workspaceId' | 'agentId' | 'userId' | 'clientId' | 'clientName' | 'scopes' | 'planId' | 'rateLimit' | 'expiresAt'>;

/** A grant as the API shows it (no token material exists on it to hide). */
export function grantJson(g: GrantRecord) {
  return {
    id: g._id,
    workspaceId: g.workspaceId,
    agentId: g.agentId,
    userId: g.userId,
    clientId: g.clientId,
    clientName: g.clientName,
    scopes: g.scopes,
    planId: g.planId,
    rateLimit: { requestsPerMinute: g.rateLimit.requestsPerMinute, burst: g.rateLimit.burst },
    createdAt: g.createdAt,
    expiresAt: g.expiresAt,
    lastUsedAt: g.lastUsedAt,
    lastRefreshedAt: g.lastRefreshedAt,
    revokedAt: g.revokedAt,
    revokeReason: g.revokeReason,
  };
}

export class GrantRepository {
  private constructor(private readonly grants: Collection<GrantRecord>) {}

  static async open(store: DocumentStore): Promise<GrantRepository> {
    const grants = store.collection<GrantRecord>('oauth_grants');
    await grants.createIndexes([
      { name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } },
      { name: 'user_id', keys: { userId: 1, _id: 1 } },
    ]);
    return new GrantRepository(grants);
  }

  /** A fresh grant id (the authorization server's Grant takes the same one). */
  static newId(): string {
    return newId(GRANT_ID_PREFIX);
  }

  async create(id: string, input: NewGrant, now: Date): Promise<GrantRecord> {
    const record: GrantRecord = {
      ...input,
      _id: id,
      createdAt: now.toISOString(),
      lastUsedAt: null,
      lastRefreshedAt: null,
      revokedAt: null,
      revokedBy: null,
      revokeReason: null,
    };
    await this.grants.insertOne(record);
    return record;
  }

  findById(id: string): Promise<GrantRecord | null> {
    return this.grants.findOne({ _id: id });
  }

  /** A page of grants, oldest first: a workspace's, or a user's (across workspaces). */
  list(by: { workspaceId: string } | { userId: string }, options: { limit: number; after?: string }): Promise<GrantRecord[]> {
    const filter: Filter = { ...by };
    if (options.after) filter._id = { $gt: options.after };
    return this.grants.find(filter, { sort: { _id: 1 }, limit: options.limit });
  }

  /** Revokes once; `changed` is false when it was revoked already (the first reason stays). */
  async revoke(id: string, by: string, reason: GrantRevokeReason, now: Date): Promise<{ grant: GrantRecord | null; changed: boolean }> {
    const revoked = await this.grants.findOneAndUpdate({ _id: id, revokedAt: null }, { $set: { revokedAt: now.toISOString(), revokedBy: by, revokeReason: reason } });
    if (revoked) return { grant: revoked, changed: true };
    return { grant: await this.findById(id), changed: false };
  }

  async refreshed(id: string, now: Date): Promise<void> {
    await this.grants.updateOne({ _id: id }, { $set: { lastRefreshedAt: now.toISOString() } });
  }

  /** Records use at most once per `intervalMs` (as API keys do). */
  async touch(grant: GrantRecord, now: Date, intervalMs: number): Promise<void> {
    const last = grant.lastUsedAt ? Date.parse(grant.lastUsedAt) : 0;
    if (now.getTime() - last < intervalMs) return;
    const threshold = new Date(now.getTime() - intervalMs).toISOString();
    await this.grants.updateOne({ _id: grant._id, $or: [{ lastUsedAt: null }, { lastUsedAt: { $lt: threshold } }] }, { $set: { lastUsedAt: now.toISOString() } });
  }
}
