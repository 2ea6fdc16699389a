import type { MessageInitShape } from '@bufbuild/protobuf';
import { authorize, isRole, requireUser, roleAllows, ROLES, type Role } from '@planning/access';
import { ServiceError } from '@planning/errors';
import type { Workspace, WorkspaceSchema } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { Principal, ServiceImplementation } from '@planning/rpc';
import { validatePlanId, validateWorkspaceName } from '../domain/workspaces.js';
import type { WorkspaceRecord, WorkspaceRepository } from '../store/workspaces.js';
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
  };
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
  };
}
