import { DEFAULT_DONE_POLICY, type DoneGate, type DoneRequirement } from '../domain/done-policy.js';
import type { Role } from '@planning/access';
import { conflict, ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import type { Outbox } from '@planning/outbox';
import type { PlanId } from '@planning/plans';
import {
  isDuplicateKeyError,
  type Collection,
  type DocumentStore,
  type Filter,
  type StoreSession,
  type StoredDocument,
} from '@planning/store';
import { DEFAULT_SANDBOX, slugify, type WorkspaceStatus } from '../domain/workspaces.js';

export interface WorkspaceRecord extends StoredDocument {
  name: string;
  slug: string;
  status: WorkspaceStatus;
  ownerId: string;
  defaultSandbox: string;
  planId: PlanId;
  createdAt: string;
  updatedAt: string;
  version: number;
  /** Bumped by every membership change, so concurrent owner changes conflict on this document. */
  membersVersion?: number;
  /** The done policy (domain/done-policy.ts); absent: `nothing`, gated at `done`. */
  doneRequires?: DoneRequirement;
  doneGate?: DoneGate;
}

export interface MemberRecord extends StoredDocument {
  workspaceId: string;
  userId: string;
  role: Role;
  createdAt: string;
  updatedAt: string;
}

export interface NewWorkspace {
  name: string;
  ownerId: string;
  planId: PlanId;
  actor: { type: string; id: string };
}

export const memberId = (workspaceId: string, userId: string): string => `${workspaceId}:${userId}`;

export interface WorkspacePatch {
  name?: string;
  status?: WorkspaceStatus;
  planId?: PlanId;
  ownerId?: string;
  doneRequires?: DoneRequirement;
  doneGate?: DoneGate;
}

export type Actor = { type: string; id: string };

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export class WorkspaceRepository {
  private constructor(
    readonly workspaces: Collection<WorkspaceRecord>,
    readonly members: Collection<MemberRecord>,
    private readonly outbox: Outbox,
  ) {}

  static async open(store: DocumentStore, outbox: Outbox): Promise<WorkspaceRepository> {
    const workspaces = store.collection<WorkspaceRecord>('workspaces');
    const members = store.collection<MemberRecord>('members');
    await workspaces.createIndexes([
      { name: 'slug_unique', keys: { slug: 1 }, unique: true },
      { name: 'name', keys: { name: 1 } },
    ]);
    await members.createIndexes([
      { name: 'user_workspace', keys: { userId: 1, workspaceId: 1 } },
      { name: 'workspace_role', keys: { workspaceId: 1, role: 1 } },
      { name: 'workspace_user', keys: { workspaceId: 1, userId: 1 } },
    ]);
    return new WorkspaceRepository(workspaces, members, outbox);
  }

  /**
   * Creates the workspace, its owner's membership and the `workspace.created` event in one
   * transaction. A taken slug moves on to the next numbered candidate.
   */
  async create(input: NewWorkspace, now = new Date()): Promise<WorkspaceRecord> {
    for (let n = 1; n <= 50; n++) {
      const at = now.toISOString();
      const record: WorkspaceRecord = {
        _id: newId('ws'),
        name: input.name,
        slug: slugify(input.name, n),
        status: 'active',
        ownerId: input.ownerId,
        defaultSandbox: DEFAULT_SANDBOX,
        planId: input.planId,
        createdAt: at,
        updatedAt: at,
        version: 1,
      };
      try {
        await this.outbox.transaction(async (session) => {
          await this.workspaces.insertOne(record, { session });
          await this.members.insertOne(
            {
              _id: memberId(record._id, input.ownerId),
              workspaceId: record._id,
              userId: input.ownerId,
              role: 'owner',
              createdAt: at,
              updatedAt: at,
            },
            { session },
          );
          await this.outbox.add(
            {
              type: 'workspace.created',
              workspaceId: record._id,
              actor: input.actor,
              data: { subject: { type: 'workspace', id: record._id }, ownerId: input.ownerId, planId: input.planId },
            },
            { session },
          );
        });
        return record;
      } catch (err) {
        if (isDuplicateKeyError(err, 'slug_unique')) continue;
        throw err;
      }
    }
    throw new ServiceError('invalid-input', 'Could not derive a free slug from this name; choose another name', {
      field: 'name',
    });
  }

  findById(id: string, session?: StoreSession): Promise<WorkspaceRecord | null> {
    return this.workspaces.findOne({ _id: id }, session ? { session } : undefined);
  }

  findBySlug(slug: string): Promise<WorkspaceRecord | null> {
    return this.workspaces.findOne({ slug });
  }

  async roleOf(workspaceId: string, userId: string): Promise<Role | undefined> {
    const member = await this.members.findOne({ _id: memberId(workspaceId, userId) });
    return member?.role;
  }

  async workspaceIdsOf(userId: string): Promise<string[]> {
    const rows = await this.members.find({ userId }, { projection: { workspaceId: 1 } });
    return rows.map((r) => r.workspaceId);
  }

  /**
   * A page of workspaces, newest id last, optionally limited to `ids` and matching `q` (literal,
   * case-insensitive, in name or slug).
   */
  list(options: { ids?: readonly string[]; q?: string; limit: number; after?: string }): Promise<WorkspaceRecord[]> {
    const filter: Filter = {};
    const and: Filter[] = [];
    if (options.ids) and.push({ _id: { $in: [...options.ids] } });
    if (options.after) and.push({ _id: { $gt: options.after } });
    if (options.q) {
      const pattern = escapeRegex(options.q);
      and.push({ $or: [{ name: { $regex: pattern, $options: 'i' } }, { slug: { $regex: pattern, $options: 'i' } }] });
    }
    if (and.length > 0) filter.$and = and;
    return this.workspaces.find(filter, { sort: { _id: 1 }, limit: options.limit });
  }

  /**
   * Applies the fields of `patch` that differ from the stored workspace, increments `version` and
   * records `workspace.updated` (with the changed field names) in one transaction. Applying the
   * same patch again changes nothing (retry-safe). A new owner becomes an owner member; the
   * previous owner stays a member as admin.
   */
  async update(
    id: string,
    patch: WorkspacePatch,
    actor: Actor,
    now = new Date(),
  ): Promise<{ workspace: WorkspaceRecord; changedFields: string[] }> {
    return this.outbox.transaction(async (session) => {
      const current = await this.workspaces.findOne({ _id: id }, { session });
      if (!current) throw new ServiceError('not-found', 'Workspace not found');
      const set: Record<string, unknown> = {};
      for (const field of ['name', 'status', 'planId', 'ownerId'] as const) {
        const value = patch[field];
        if (value !== undefined && value !== current[field]) set[field] = value;
      }
      // The done policy's defaults are stored as absent: setting a default is no change.
      if (patch.doneRequires !== undefined && patch.doneRequires !== (current.doneRequires ?? DEFAULT_DONE_POLICY.requires)) set.doneRequires = patch.doneRequires;
      if (patch.doneGate !== undefined && patch.doneGate !== (current.doneGate ?? DEFAULT_DONE_POLICY.gate)) set.doneGate = patch.doneGate;
      const changedFields = Object.keys(set);
      if (changedFields.length === 0) return { workspace: current, changedFields };
      const at = now.toISOString();
      if (set.ownerId !== undefined) {
        const newOwner = set.ownerId as string;
        await this.members.updateOne(
          { _id: memberId(id, newOwner) },
          {
            $set: { role: 'owner', updatedAt: at },
            $setOnInsert: { workspaceId: id, userId: newOwner, createdAt: at },
          },
          { upsert: true, session },
        );
        if (current.ownerId !== newOwner) {
          await this.members.updateOne(
            { _id: memberId(id, current.ownerId), role: 'owner' },
            { $set: { role: 'admin', updatedAt: at } },
            { session },
          );
        }
      }
      const updated = await this.workspaces.findOneAndUpdate(
        { _id: id, version: current.version },
        {
          $set: { ...set, updatedAt: at },
          $inc: { version: 1, ...(set.ownerId !== undefined ? { membersVersion: 1 } : {}) },
        },
        { session },
      );
      if (!updated) throw conflict('version-conflict', 'The workspace changed meanwhile; retry');
      await this.outbox.add(
        {
          type: 'workspace.updated',
          workspaceId: id,
          actor,
          data: { subject: { type: 'workspace', id }, changedFields },
        },
        { session },
      );
      return { workspace: updated, changedFields };
    });
  }

  getMember(workspaceId: string, userId: string): Promise<MemberRecord | null> {
    return this.members.findOne({ _id: memberId(workspaceId, userId) });
  }

  /** A page of members ordered by user id. */
  listMembers(workspaceId: string, options: { limit: number; after?: string }): Promise<MemberRecord[]> {
    const filter: Filter = { workspaceId };
    if (options.after) filter.userId = { $gt: options.after };
    return this.members.find(filter, { sort: { userId: 1 }, limit: options.limit });
  }

  /**
   * Adds a member, or changes an existing member's role. Refuses to demote the last owner (409
   * `last-owner`). The owner count is read in the same transaction that bumps the workspace's
   * `membersVersion`, so two concurrent demotions cannot leave a workspace without an owner.
   */
  async addMember(
    workspaceId: string,
    userId: string,
    role: Role,
    actor: Actor,
    now = new Date(),
  ): Promise<{ member: MemberRecord; created: boolean; changed: boolean }> {
    return this.outbox.transaction(async (session) => {
      const workspace = await this.workspaces.findOne({ _id: workspaceId }, { session });
      if (!workspace) throw new ServiceError('not-found', 'Workspace not found');
      const id = memberId(workspaceId, userId);
      const existing = await this.members.findOne({ _id: id }, { session });
      if (existing && existing.role === role) return { member: existing, created: false, changed: false };
      if (existing?.role === 'owner') await this.assertAnotherOwner(workspaceId, userId, session);
      const at = now.toISOString();
      const member: MemberRecord = existing
        ? { ...existing, role, updatedAt: at }
        : { _id: id, workspaceId, userId, role, createdAt: at, updatedAt: at };
      if (existing) await this.members.updateOne({ _id: id }, { $set: { role, updatedAt: at } }, { session });
      else await this.members.insertOne(member, { session });
      await this.touchMembers(workspace, userId, role === 'owner', session, at);
      await this.outbox.add(
        {
          type: existing ? 'member.role-changed' : 'member.added',
          workspaceId,
          actor,
          data: { subject: { type: 'member', id }, userId, changedFields: ['role'] },
        },
        { session },
      );
      return { member, created: !existing, changed: true };
    });
  }

  /** Removes a member; the last owner cannot be removed (409 `last-owner`). */
  async removeMember(workspaceId: string, userId: string, actor: Actor, now = new Date()): Promise<MemberRecord> {
    return this.outbox.transaction(async (session) => {
      const workspace = await this.workspaces.findOne({ _id: workspaceId }, { session });
      if (!workspace) throw new ServiceError('not-found', 'Workspace not found');
      const id = memberId(workspaceId, userId);
      const existing = await this.members.findOne({ _id: id }, { session });
      if (!existing) throw new ServiceError('not-found', 'Member not found');
      if (existing.role === 'owner') await this.assertAnotherOwner(workspaceId, userId, session);
      await this.members.deleteOne({ _id: id }, { session });
      await this.touchMembers(workspace, userId, false, session, now.toISOString());
      await this.outbox.add(
        { type: 'member.removed', workspaceId, actor, data: { subject: { type: 'member', id }, userId } },
        { session },
      );
      return existing;
    });
  }

  private async assertAnotherOwner(workspaceId: string, userId: string, session: StoreSession): Promise<void> {
    const others = await this.members.countDocuments({ workspaceId, role: 'owner', userId: { $ne: userId } }, { session });
    if (others === 0) {
      throw new ServiceError('work-already-claimed', 'The last owner of a workspace cannot be removed or demoted', {
        reason: 'last-owner',
      });
    }
  }

  /**
   * Bumps `membersVersion` (the conflict point for concurrent member changes) and keeps `ownerId`
   * naming an owner: when the named owner stops being one, another owner takes the field.
   */
  private async touchMembers(
    workspace: WorkspaceRecord,
    userId: string,
    userIsOwnerNow: boolean,
    session: StoreSession,
    at: string,
  ): Promise<void> {
    const set: Record<string, unknown> = {};
    if (workspace.ownerId === userId && !userIsOwnerNow) {
      const next = await this.members.findOne(
        { workspaceId: workspace._id, role: 'owner', userId: { $ne: userId } },
        { sort: { userId: 1 }, session },
      );
      if (next) set.ownerId = next.userId;
    }
    const inc: Record<string, number> = { membersVersion: 1 };
    if (set.ownerId !== undefined) {
      inc.version = 1;
      set.updatedAt = at;
    }
    await this.workspaces.updateOne({ _id: workspace._id }, { ...(Object.keys(set).length ? { $set: set } : {}), $inc: inc }, { session });
  }
}
