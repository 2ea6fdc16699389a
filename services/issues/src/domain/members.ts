import { isRole, ROLES, type Role, type WorkspaceAction } from '@planning/access';
import { ServiceError } from '@planning/errors';

export function validateRole(role: unknown, field = 'role'): Role {
  if (!isRole(role)) throw new ServiceError('invalid-input', `'${field}' must be one of ${ROLES.join(', ')}`, { field });
  return role;
}

export function validateUserId(userId: unknown, field = 'userId'): string {
  if (typeof userId !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(userId)) {
    throw new ServiceError('invalid-input', `'${field}' must be a user id`, { field });
  }
  return userId;
}

/**
 * The workspace action a membership change needs (DECISIONS §1): admins manage members; making
 * someone an owner, or changing or removing an owner, is the owner's; anyone may leave.
 */
export function memberChangeAction(
  change: { kind: 'set-role'; currentRole: Role | undefined; newRole: Role } | { kind: 'remove'; currentRole: Role; self: boolean },
): WorkspaceAction {
  if (change.kind === 'set-role') {
    return change.newRole === 'owner' || change.currentRole === 'owner' ? 'own' : 'manage';
  }
  if (change.self) return 'read';
  return change.currentRole === 'owner' ? 'own' : 'manage';
}
