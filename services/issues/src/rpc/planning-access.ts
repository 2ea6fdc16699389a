/**
 * Access for planning records: which workspaces a caller sees, and the check before touching a
 * task, project or anything else that belongs to a workspace. Built on `@planning/access`
 * (`authorizeWorkspace`), the one authorization rule of the service.
 */
import { authorizeWorkspace, type AccessLookup, type AccessRequirement, type WorkspaceAccess } from '@planning/access';
import { ServiceError } from '@planning/errors';
import type { CallContext, Principal } from '@planning/rpc';
import type { MoveActor } from '../domain/task-status.js';
import type { WorkspaceScope } from '../store/planning.js';
import type { WriteContext } from '../store/tasks.js';
import type { WorkspaceRepository } from '../store/workspaces.js';
import { actorOf } from './workspace-service.js';

export const READ_TASKS: AccessRequirement = { action: 'read', scope: 'issues:read' };
export const WRITE_TASKS: AccessRequirement = { action: 'write-tasks', scope: 'issues:write' };
export const READ_PROJECTS: AccessRequirement = { action: 'read', scope: 'projects:read' };
export const MANAGE_PROJECTS: AccessRequirement = { action: 'manage', scope: 'projects:write' };

export interface PlanningAccess {
  /** Authorizes `requirement` in a workspace the caller named (404 unknown, 403 not allowed). */
  workspace(ctx: CallContext, workspaceId: string, requirement: AccessRequirement): Promise<WorkspaceAccess>;
  /**
   * Authorizes `requirement` on a record of `workspaceId` the caller reached by the record's id:
   * a token of another workspace is told the record does not exist.
   */
  record(ctx: CallContext, what: string, workspaceId: string, requirement: AccessRequirement): Promise<WorkspaceAccess>;
  /** The workspaces a list covers: the named one (authorized), or all the caller can see. */
  scope(ctx: CallContext, workspaceId: string | undefined, requirement: AccessRequirement): Promise<WorkspaceScope>;
}

export function createPlanningAccess(access: AccessLookup, workspaces: WorkspaceRepository): PlanningAccess {
  const self: PlanningAccess = {
    workspace: (ctx, workspaceId, requirement) => authorizeWorkspace(access, ctx, workspaceId, requirement),
    async record(ctx, what, workspaceId, requirement) {
      const principal = ctx.principal;
      if (principal.type === 'api-key' && principal.workspaceId !== workspaceId) throw new ServiceError('not-found', `${what} not found`);
      return authorizeWorkspace(access, ctx, workspaceId, requirement);
    },
    async scope(ctx, workspaceId, requirement) {
      if (workspaceId) {
        await self.workspace(ctx, workspaceId, requirement);
        return { all: false, ids: [workspaceId] };
      }
      const principal = ctx.principal;
      if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
      if (principal.type === 'system' || (principal.type === 'user' && principal.isAdmin)) return { all: true };
      if (principal.type === 'api-key') {
        if (!principal.workspaceId) return { all: false, ids: [] };
        await self.workspace(ctx, principal.workspaceId, requirement);
        return { all: false, ids: [principal.workspaceId] };
      }
      // Every role may read; other requirements are checked where records are changed.
      return { all: false, ids: await workspaces.workspaceIdsOf(principal.id) };
    },
  };
  return self;
}

/** Agents (API tokens) move tasks under the agent rules; people and services under theirs. */
export function moveActorOf(principal: Principal): MoveActor {
  if (principal.type === 'api-key') return 'agent';
  if (principal.type === 'system') return 'system';
  return 'human';
}

/** Who is writing, when, and (for an agent token) as which agent. */
export function writeContextOf(principal: Principal, now: Date): WriteContext {
  return {
    actor: actorOf(principal),
    now,
    moveActor: moveActorOf(principal),
    ...(principal.type === 'api-key' && principal.agentId ? { agentId: principal.agentId } : {}),
  };
}
