/**
 * The access model (DECISIONS §1, §3): workspace roles for users, scopes for API tokens, and the
 * one function every service calls before touching a workspace's data.
 */
import { ServiceError } from '@planning/errors';
import type { Scope } from '@planning/plans';
import type { Principal } from '@planning/rpc';

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
      throw new ServiceError('forbidden', 'This operation needs a signed-in user session, not an API token');
    }
    if (!principal.scopes.includes(requirement.scope)) {
      throw new ServiceError('forbidden', `The token lacks the '${requirement.scope}' scope`);
    }
    return;
  }
  if (principal.isAdmin) return;
  if (role === undefined) throw new ServiceError('forbidden', 'Not a member of this workspace');
  if (!roleAllows(role, requirement.action)) {
    throw new ServiceError('forbidden', `The '${role}' role cannot ${describeAction(requirement.action)}`);
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
  throw new ServiceError('forbidden', 'This operation needs a signed-in user session, not an API token');
}
