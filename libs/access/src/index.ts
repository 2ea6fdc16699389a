/**
 * The access model (DECISIONS §1, §3): workspace roles for users, scopes for API tokens, and the
 * one function every service calls before touching a workspace's data.
 */
import { ServiceError } from '@planning/errors';
import { isPlanId, type PlanId, type Scope } from '@planning/plans';
import { callOptionsFrom, type CallContext, type Principal, type RpcCallOptions } from '@planning/rpc';

export const ROLES = ['viewer', 'member', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];

const ROLE_RANK: Readonly<Record<Role, number>> = { viewer: 1, member: 2, admin: 3, owner: 4 };

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

/**
 * What a request does within a workspace:
 * - `read`: see tasks, projects and everything else (viewer and up);
 * - `write-tasks`: create and change tasks, comments, time, evidence, approvals (member and up);
 * - `manage`: projects, milestones, programs, initiatives, members, API keys, imports, exports,
 *   diagnostics (admin and up);
 * - `own`: plan and ownership (owner).
 */
export type WorkspaceAction = 'read' | 'write-tasks' | 'manage' | 'own';

export const ACTION_MIN_ROLE: Readonly<Record<WorkspaceAction, Role>> = {
  read: 'viewer',
  'write-tasks': 'member',
  manage: 'admin',
  own: 'owner',
};

export function roleAllows(role: Role | undefined, action: WorkspaceAction): boolean {
  return role !== undefined && ROLE_RANK[role] >= ROLE_RANK[ACTION_MIN_ROLE[action]];
}

export interface AccessRequirement {
  action: WorkspaceAction;
  /** The scope an API token must hold for this request. Without one, tokens are refused. */
  scope?: Scope;
}

/**
 * Decides whether `principal` may do `requirement` in the workspace `workspaceId`, where the
 * principal's membership role is `role` (undefined: not a member). Throws the documented error:
 * - anonymous: 401 `unauthorized`;
 * - a token of another workspace: 404 `not-found` (a token never learns other workspaces exist);
 * - a token without the scope, or on a session-only request: 403 `forbidden`;
 * - a user who is not a member, or whose role is too low: 403 `forbidden`.
 * System principals and system administrators may do everything.
 */
export function authorize(
  principal: Principal,
  workspaceId: string,
  role: Role | undefined,
  requirement: AccessRequirement,
): void {
  if (principal.type === 'system') return;
  if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
  if (principal.type === 'api-key') {
    if (principal.workspaceId !== workspaceId) throw new ServiceError('not-found', 'Workspace not found');
    if (!requirement.scope) {
      throw new ServiceError('forbidden', 'This operation needs a signed-in user session, not an API token', {
        reason: 'session-required',
      });
    }
    if (!principal.scopes.includes(requirement.scope)) {
      throw new ServiceError('forbidden', `The token lacks the '${requirement.scope}' scope`, { reason: 'missing-scope' });
    }
    return;
  }
  if (principal.isAdmin) return;
  if (role === undefined) throw new ServiceError('forbidden', 'Not a member of this workspace', { reason: 'not-a-member' });
  if (!roleAllows(role, requirement.action)) {
    throw new ServiceError('forbidden', `The '${role}' role cannot ${describeAction(requirement.action)}`, {
      reason: 'insufficient-role',
    });
  }
}

function describeAction(action: WorkspaceAction): string {
  switch (action) {
    case 'read':
      return 'read this workspace';
    case 'write-tasks':
      return 'change tasks';
    case 'manage':
      return 'manage this workspace';
    case 'own':
      return 'change the plan or ownership';
  }
}

/** Refuses anything but a signed-in user (session-only endpoints). */
export function requireUser(principal: Principal): void {
  if (principal.type === 'user') return;
  if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
  if (principal.type === 'system') return;
  throw new ServiceError('forbidden', 'This operation needs a signed-in user session, not an API token', {
    reason: 'session-required',
  });
}

/** Refuses anything but a system administrator (or a service). */
export function requireSystemAdmin(principal: Principal): void {
  requireUser(principal);
  if (!principal.isAdmin) {
    throw new ServiceError('forbidden', 'Only a system administrator may do this', { reason: 'insufficient-role' });
  }
}

/** What a principal may know about a workspace, as the issues service's `GetAccess` answers it. */
export interface WorkspaceAccess {
  /** False when the workspace does not exist, or the principal is a token of another workspace. */
  exists: boolean;
  /** The principal's membership role; undefined for non-members, tokens and services. */
  role: Role | undefined;
  planId: PlanId;
  status: string;
}

/** The part of the issues service's WorkspaceService client that access checks use. */
export interface AccessClient {
  getAccess(
    request: { workspaceId: string },
    options?: RpcCallOptions,
  ): Promise<{ exists: boolean; role?: string; planId: string; status: string }>;
}

/** Answers "what may this principal do in this workspace" (locally in issues, over gRPC elsewhere). */
export type AccessLookup = (principal: Principal, workspaceId: string, options?: RpcCallOptions) => Promise<WorkspaceAccess>;

/**
 * An AccessLookup over gRPC, for services other than issues: they learn a principal's role by
 * asking issues (which owns workspaces and members), never by reading its data.
 */
export function createRemoteAccess(client: AccessClient): AccessLookup {
  return async (principal, workspaceId, options = {}) => {
    const answer = await client.getAccess({ workspaceId }, { ...options, principal });
    return {
      exists: answer.exists,
      role: isRole(answer.role) ? answer.role : undefined,
      planId: isPlanId(answer.planId) ? answer.planId : 'free',
      status: answer.status,
    };
  };
}

/**
 * The check a service makes before touching a workspace's data when it does not own members:
 * looks the principal up, answers 404 for a workspace that does not exist (or that a token must
 * not see), then `authorize`s. Returns the access record (plan, status) for further checks.
 *
 * ```ts
 * const access = createRemoteAccess(clients.client('issues', WorkspaceService));
 * // in a gRPC handler:
 * const ws = await authorizeWorkspace(access, ctx, workspaceId, { action: 'write-tasks', scope: 'agents:execute' });
 * ```
 */
export async function authorizeWorkspace(
  lookup: AccessLookup,
  ctx: CallContext | { principal: Principal },
  workspaceId: string,
  requirement: AccessRequirement,
): Promise<WorkspaceAccess> {
  const principal = ctx.principal;
  if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
  if (!workspaceId) throw new ServiceError('invalid-input', "'workspaceId' is required", { field: 'workspaceId' });
  // A token of another workspace is answered 404 without asking anyone.
  if (principal.type === 'api-key' && principal.workspaceId !== workspaceId) {
    throw new ServiceError('not-found', 'Workspace not found');
  }
  const options = 'traceContext' in ctx && 'metadata' in ctx ? callOptionsFrom(ctx) : {};
  const access = await lookup(principal, workspaceId, options);
  if (!access.exists) throw new ServiceError('not-found', 'Workspace not found');
  authorize(principal, workspaceId, access.role, requirement);
  return access;
}

/** Agent ids (DECISIONS §3): lower-case letters, digits, `.`, `_` and `-`, at most 64, starting with a letter or digit. */
export const AGENT_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function isAgentId(value: unknown): value is string {
  return typeof value === 'string' && AGENT_ID_PATTERN.test(value);
}
