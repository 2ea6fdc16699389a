import { describe, expect, it } from 'vitest';
import { memberChangeAction, validateRole, validateUserId } from './members.js';

describe('members: rules', () => {
  it('members: admins manage ordinary roles, owners manage owners', () => {
    expect(memberChangeAction({ kind: 'set-role', currentRole: undefined, newRole: 'member' })).toBe('manage');
    expect(memberChangeAction({ kind: 'set-role', currentRole: 'viewer', newRole: 'admin' })).toBe('manage');
    expect(memberChangeAction({ kind: 'set-role', currentRole: 'admin', newRole: 'owner' })).toBe('own');
    expect(memberChangeAction({ kind: 'set-role', currentRole: 'owner', newRole: 'admin' })).toBe('own');
  });

  it('members: anyone may leave; removing others needs manage, an owner needs own', () => {
    expect(memberChangeAction({ kind: 'remove', currentRole: 'viewer', self: true })).toBe('read');
    expect(memberChangeAction({ kind: 'remove', currentRole: 'member', self: false })).toBe('manage');
    expect(memberChangeAction({ kind: 'remove', currentRole: 'owner', self: false })).toBe('own');
  });

  it('members: roles and user ids are validated', () => {
    expect(validateRole('viewer')).toBe('viewer');
    expect(() => validateRole('superuser')).toThrow(/must be one of viewer, member, admin, owner/);
    expect(validateUserId('usr_01ABC')).toBe('usr_01ABC');
    expect(() => validateUserId('')).toThrow(/user id/);
    expect(() => validateUserId('a b')).toThrow(/user id/);
  });
});
