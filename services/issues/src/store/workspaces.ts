import type { Role } from '@planning/access';
import { ServiceError } from '@planning/errors';
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

const memberId = (workspaceId: string, userId: string): string => `${workspaceId}:${userId}`;

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
}
