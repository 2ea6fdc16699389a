import { DEFAULT_DONE_POLICY, validateDoneGate, validateDoneRequires } from '../domain/done-policy.js';
import type { MessageInitShape } from '@bufbuild/protobuf';
import {
  authorize,
  authorizeWorkspace,
  isRole,
  requireUser,
  roleAllows,
  ROLES,
  type AccessLookup,
  type Role,
  type WorkspaceAccess,
  type WorkspaceAction,
} from '@planning/access';
import { ServiceError } from '@planning/errors';
import type { MemberSchema, Workspace, WorkspaceSchema } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { Principal, ServiceImplementation } from '@planning/rpc';
import { memberChangeAction, validateRole, validateUserId } from '../domain/members.js';
import { validatePlanId, validateWorkspaceName, validateWorkspaceStatus } from '../domain/workspaces.js';
import type { MemberRecord, WorkspacePatch, WorkspaceRecord, WorkspaceRepository } from '../store/workspaces.js';
import { decodeCursor, encodeCursor, pageLimit } from './cursor.js';

export { WorkspaceService };

export function toWorkspaceMessage(record: WorkspaceRecord): MessageInitShape<typeof WorkspaceSchema> {
  return {
    id: record._id,
    name: record.name,
    slug: record.slug,
    status: record.status,
    ownerId: record.ownerId,
    defaultSandbox: record.defaultSandbox,
    planId: record.planId,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    version: record.version,
    doneRequires: record.doneRequires ?? DEFAULT_DONE_POLICY.requires,
    doneGate: record.doneGate ?? DEFAULT_DONE_POLICY.gate,
  };
}

export function toMemberMessage(record: MemberRecord): MessageInitShape<typeof MemberSchema> {
  return {
    workspaceId: record.workspaceId,
    userId: record.userId,
    role: record.role,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

/**
 * Access in the issues service itself, from its own data: what `GetAccess` answers other
 * services. Handlers use it with `authorizeWorkspace(access, ctx, workspaceId, requirement)`.
 */
export function createLocalAccess(workspaces: WorkspaceRepository): AccessLookup {
  return async (principal, workspaceId) => {
    if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
    const workspace = workspaceId ? await workspaces.findById(workspaceId) : null;
    const hidden = principal.type === 'api-key' && principal.workspaceId !== workspaceId;
    if (!workspace || hidden) return { exists: false, role: undefined, planId: 'free', status: '' };
    const role = principal.type === 'user' ? await workspaces.roleOf(workspaceId, principal.id) : undefined;
    const access: WorkspaceAccess = { exists: true, role, planId: workspace.planId, status: workspace.status };
    readWorkspaces.set(access, workspace);
    return access;
  };
}

/** The workspace record each local access answer was read from (see `workspaceReadFor`). */
const readWorkspaces = new WeakMap<WorkspaceAccess, WorkspaceRecord>();

/**
 * The workspace record the local access lookup read to answer `access` (undefined for another
 * lookup): a handler holding the answer uses it instead of reading the workspace again in the
 * same request (the done policy of a task detail).
 */
export function workspaceReadFor(access: WorkspaceAccess): WorkspaceRecord | undefined {
  return readWorkspaces.get(access);
}

export type WorkspaceMessage = Workspace;

/** The actor an event names: the user, or the API key (never a token). */
export function actorOf(principal: Principal): { type: string; id: string } {
  if (principal.type === 'api-key') return { type: 'api-key', id: principal.keyId ?? principal.id };
  return { type: principal.type, id: principal.userId ?? principal.id };
}

export interface WorkspaceServiceDeps {
  workspaces: WorkspaceRepository;
  clock: () => Date;
}

export function createWorkspaceService(deps: WorkspaceServiceDeps): ServiceImplementation<typeof WorkspaceService> {
  const { workspaces } = deps;
  const access = createLocalAccess(workspaces);
  const requireId = (value: string, field: string): string => {
    if (!value) throw new ServiceError('invalid-input', `'${field}' is required`, { field });
    return value;
  };

  /** The workspace if the principal may read it; 404 when it does not exist. */
  const readable = async (principal: Principal, id: string): Promise<WorkspaceRecord> => {
    if (!id) throw new ServiceError('invalid-input', "'id' is required", { field: 'id' });
    const workspace = await workspaces.findById(id);
    if (!workspace) throw new ServiceError('not-found', 'Workspace not found');
    const role = principal.type === 'user' ? await workspaces.roleOf(id, principal.id) : undefined;
    authorize(principal, id, role, { action: 'read', scope: 'projects:read' });
    return workspace;
  };

  return {
    async createWorkspace(request, ctx) {
      // Creating a workspace is for signed-in users only (DECISIONS §3).
      requireUser(ctx.principal);
      const name = validateWorkspaceName(request.name);
      const ownerId = request.ownerId?.trim() || ctx.principal.id;
      if (ownerId !== ctx.principal.id && !ctx.principal.isAdmin) {
        throw new ServiceError('forbidden', 'Only a system administrator may create a workspace for another user');
      }
      const planId = request.planId === undefined ? 'free' : validatePlanId(request.planId);
      const record = await workspaces.create({ name, ownerId, planId, actor: actorOf(ctx.principal) }, deps.clock());
      return { workspace: toWorkspaceMessage(record) };
    },

    async listWorkspaces(request, ctx) {
      const principal = ctx.principal;
      if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
      const limit = pageLimit(request.limit);
      const after = decodeCursor(request.cursor);
      let ids: string[] | undefined;
      if (principal.type === 'api-key') ids = principal.workspaceId ? [principal.workspaceId] : [];
      else if (principal.type === 'user' && !principal.isAdmin) ids = await workspaces.workspaceIdsOf(principal.id);
      const q = request.q?.trim();
      const rows = await workspaces.list({ ids, q: q || undefined, limit: limit + 1, after });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        workspaces: page.map(toWorkspaceMessage),
        ...(rows.length > limit && last ? { nextCursor: encodeCursor(last._id) } : {}),
      };
    },

    async getWorkspace(request, ctx) {
      return { workspace: toWorkspaceMessage(await readable(ctx.principal, request.id)) };
    },

    async getWorkspaceBySlug(request, ctx) {
      const slug = request.slug;
      if (!slug) throw new ServiceError('invalid-input', "'slug' is required", { field: 'slug' });
      // An exact match on the unique slug; a token of another workspace hears what an unknown slug does.
      const found = await workspaces.findBySlug(slug);
      const principal = ctx.principal;
      if (!found || (principal.type === 'api-key' && principal.workspaceId !== found._id)) {
        throw new ServiceError('not-found', 'Workspace not found');
      }
      return { workspace: toWorkspaceMessage(await readable(principal, found._id)) };
    },

    async listMemberships(request, ctx) {
      const principal = ctx.principal;
      let minRole: Role = 'viewer';
      if (request.minRole !== undefined) {
        if (!isRole(request.minRole)) {
          throw new ServiceError('invalid-input', `'minRole' must be one of ${ROLES.join(', ')}`, { field: 'minRole' });
        }
        minRole = request.minRole;
      }
      if (principal.type === 'system' || (principal.type === 'user' && principal.isAdmin)) {
        return { memberships: [], allWorkspaces: true };
      }
      if (principal.type !== 'user') return { memberships: [], allWorkspaces: false };
      const rows = await workspaces.members.find({ userId: principal.id });
      const action = minRole === 'viewer' ? 'read' : minRole === 'member' ? 'write-tasks' : minRole === 'admin' ? 'manage' : 'own';
      return {
        memberships: rows
          .filter((m) => roleAllows(m.role, action))
          .map((m) => ({ workspaceId: m.workspaceId, role: m.role })),
        allWorkspaces: false,
      };
    },

    async updateWorkspace(request, ctx) {
      const id = requireId(request.id, 'id');
      const patch: WorkspacePatch = {};
      let action: WorkspaceAction = 'manage';
      if (request.name !== undefined) patch.name = validateWorkspaceName(request.name);
      if (request.status !== undefined) patch.status = validateWorkspaceStatus(request.status);
      if (request.planId !== undefined) {
        patch.planId = validatePlanId(request.planId);
        action = 'own';
      }
      if (request.ownerId !== undefined) {
        patch.ownerId = validateUserId(request.ownerId, 'ownerId');
        action = 'own';
      }
      if (request.doneRequires !== undefined) patch.doneRequires = validateDoneRequires(request.doneRequires);
      if (request.doneGate !== undefined) patch.doneGate = validateDoneGate(request.doneGate);
      // Workspace changes are for signed-in users (API document §5.4): no scope admits a token.
      await authorizeWorkspace(access, ctx, id, { action });
      const result = await workspaces.update(id, patch, actorOf(ctx.principal), deps.clock());
      return { workspace: toWorkspaceMessage(result.workspace), changedFields: result.changedFields };
    },

    async listMembers(request, ctx) {
      const workspaceId = requireId(request.workspaceId, 'workspaceId');
      await authorizeWorkspace(access, ctx, workspaceId, { action: 'read' });
      const limit = pageLimit(request.limit);
      const after = decodeCursor(request.cursor);
      const rows = await workspaces.listMembers(workspaceId, { limit: limit + 1, after });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        members: page.map(toMemberMessage),
        ...(rows.length > limit && last ? { nextCursor: encodeCursor(last.userId) } : {}),
      };
    },

    async addMember(request, ctx) {
      const workspaceId = requireId(request.workspaceId, 'workspaceId');
      const userId = validateUserId(request.userId);
      const role = validateRole(request.role);
      const current = await workspaces.getMember(workspaceId, userId);
      const action = memberChangeAction({ kind: 'set-role', currentRole: current?.role, newRole: role });
      await authorizeWorkspace(access, ctx, workspaceId, { action });
      const result = await workspaces.addMember(workspaceId, userId, role, actorOf(ctx.principal), deps.clock());
      return { member: toMemberMessage(result.member), created: result.created, changed: result.changed };
    },

    async removeMember(request, ctx) {
      const workspaceId = requireId(request.workspaceId, 'workspaceId');
      const userId = validateUserId(request.userId);
      const current = await workspaces.getMember(workspaceId, userId);
      const self = ctx.principal.type === 'user' && ctx.principal.id === userId;
      // Authorize before telling whether the user is a member.
      const action = current ? memberChangeAction({ kind: 'remove', currentRole: current.role, self }) : 'manage';
      await authorizeWorkspace(access, ctx, workspaceId, { action });
      if (!current) throw new ServiceError('not-found', 'Member not found');
      const removed = await workspaces.removeMember(workspaceId, userId, actorOf(ctx.principal), deps.clock());
      return { member: toMemberMessage(removed) };
    },

    async getAccess(request, ctx) {
      const workspaceId = requireId(request.workspaceId, 'workspaceId');
      const answer = await access(ctx.principal, workspaceId);
      return {
        exists: answer.exists,
        ...(answer.role ? { role: answer.role } : {}),
        planId: answer.planId,
        status: answer.status,
      };
    },
  };
}
