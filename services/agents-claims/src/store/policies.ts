import { isDuplicateKeyError, type Collection, type DocumentStore, type StoredDocument } from '@planning/store';

/** A workspace's own claim settings (absent: the service defaults). */
export interface ClaimPolicyRecord extends StoredDocument {
  /** The workspace id. */
  leaseSeconds: number;
  updatedAt: Date;
  updatedBy: string;
}

export interface ClaimPolicy {
  workspaceId: string;
  leaseSeconds: number;
  defaultLeaseSeconds: number;
  custom: boolean;
  updatedAt?: Date;
}

/** Lease length per workspace (DECISIONS §7: configurable per workspace). */
export class PolicyRepository {
  private constructor(
    private readonly policies: Collection<ClaimPolicyRecord>,
    private readonly defaultLeaseSeconds: number,
  ) {}

  static async open(store: DocumentStore, defaultLeaseSeconds: number): Promise<PolicyRepository> {
    return new PolicyRepository(store.collection<ClaimPolicyRecord>('claim_policies'), defaultLeaseSeconds);
  }

  async get(workspaceId: string): Promise<ClaimPolicy> {
    const found = await this.policies.findOne({ _id: workspaceId });
    return found
      ? { workspaceId, leaseSeconds: found.leaseSeconds, defaultLeaseSeconds: this.defaultLeaseSeconds, custom: true, updatedAt: found.updatedAt }
      : { workspaceId, leaseSeconds: this.defaultLeaseSeconds, defaultLeaseSeconds: this.defaultLeaseSeconds, custom: false };
  }

  async leaseSeconds(workspaceId: string): Promise<number> {
    return (await this.get(workspaceId)).leaseSeconds;
  }

  /** Sets the workspace's lease, or (null) goes back to the default. */
  async set(workspaceId: string, leaseSeconds: number | null, actorId: string, now: Date): Promise<ClaimPolicy> {
    if (leaseSeconds === null) {
      await this.policies.deleteOne({ _id: workspaceId });
    } else {
      const write = () =>
        this.policies.updateOne({ _id: workspaceId }, { $set: { leaseSeconds, updatedAt: now, updatedBy: actorId } }, { upsert: true });
      try {
        await write();
      } catch (err) {
        // Two first settings at once: the other inserted it; this one updates it.
        if (!isDuplicateKeyError(err)) throw err;
        await write();
      }
    }
    return this.get(workspaceId);
  }
}
