import { describe, expect, it } from 'vitest';
import type { Principal } from '@planning/rpc';
import {
  authorize,
  authorizeWorkspace,
  createRemoteAccess,
  requireSystemAdmin,
  requireUser,
  roleAllows,
  type AccessLookup,
  type WorkspaceAccess,
} from './index.js';

const user = (over: Partial<Principal> = {}): Principal => ({ type: 'user', id: 'usr_1', isAdmin: false, scopes: [], ...over });
const token = (over: Partial<Principal> = {}): Principal => ({
  type: 'api-key',
  id: 'key_1',
  isAdmin: false,
  workspaceId: 'ws_a',
  scopes: ['issues:read'],
  ...over,
});

const codeOf = (fn: () => void): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
};

describe('access: roles', () => {
  it('access: each role allows its actions and those below', () => {
    expect(roleAllows('viewer', 'read')).toBe(true);
    expect(roleAllows('viewer', 'write-tasks')).toBe(false);
    expect(roleAllows('member', 'write-tasks')).toBe(true);
    expect(roleAllows('member', 'manage')).toBe(false);
    expect(roleAllows('admin', 'manage')).toBe(true);
    expect(roleAllows('admin', 'own')).toBe(false);
    expect(roleAllows('owner', 'own')).toBe(true);
    expect(roleAllows(undefined, 'read')).toBe(false);
  });
});

describe('access: authorize', () => {
  it('access: users need membership and a high enough role', () => {
    expect(codeOf(() => authorize(user(), 'ws_a', undefined, { action: 'read' }))).toBe('forbidden');
    expect(codeOf(() => authorize(user(), 'ws_a', 'viewer', { action: 'write-tasks' }))).toBe('forbidden');
    expect(codeOf(() => authorize(user(), 'ws_a', 'member', { action: 'write-tasks' }))).toBeUndefined();
  });

  it('access: system administrators may do everything', () => {
    expect(codeOf(() => authorize(user({ isAdmin: true }), 'ws_a', undefined, { action: 'own' }))).toBeUndefined();
  });

  it('access: tokens never see another workspace', () => {
    expect(codeOf(() => authorize(token(), 'ws_b', undefined, { action: 'read', scope: 'issues:read' }))).toBe('not-found');
  });

  it('access: tokens need the scope, and session-only requests refuse them', () => {
    expect(codeOf(() => authorize(token(), 'ws_a', undefined, { action: 'read', scope: 'issues:read' }))).toBeUndefined();
    expect(codeOf(() => authorize(token(), 'ws_a', undefined, { action: 'write-tasks', scope: 'issues:write' }))).toBe(
      'forbidden',
    );
    expect(codeOf(() => authorize(token(), 'ws_a', undefined, { action: 'manage' }))).toBe('forbidden');
  });

  it('access: anonymous callers are unauthorized', () => {
    const anonymous: Principal = { type: 'anonymous', id: 'anonymous', isAdmin: false, scopes: [] };
    expect(codeOf(() => authorize(anonymous, 'ws_a', undefined, { action: 'read' }))).toBe('unauthorized');
    expect(codeOf(() => requireUser(anonymous))).toBe('unauthorized');
    expect(codeOf(() => requireUser(token()))).toBe('forbidden');
    expect(codeOf(() => requireUser(user()))).toBeUndefined();
  });
});

describe('access: authorizeWorkspace', () => {
  const lookupOf = (answer: Partial<WorkspaceAccess>) => {
    const calls: string[] = [];
    const lookup: AccessLookup = async (_principal, workspaceId) => {
      calls.push(workspaceId);
      return { exists: true, role: undefined, planId: 'pro', status: 'active', ...answer };
    };
    return { lookup, calls };
  };

  it('access: a missing workspace is 404 before any role check', async () => {
    const { lookup } = lookupOf({ exists: false });
    await expect(authorizeWorkspace(lookup, { principal: user() }, 'ws_a', { action: 'read' })).rejects.toMatchObject({
      code: 'not-found',
    });
  });

  it('access: a token of another workspace is 404 without a lookup', async () => {
    const { lookup, calls } = lookupOf({});
    await expect(
      authorizeWorkspace(lookup, { principal: token() }, 'ws_b', { action: 'read', scope: 'issues:read' }),
    ).rejects.toMatchObject({ code: 'not-found' });
    expect(calls).toEqual([]);
  });

  it('access: members pass with their role and get the access record back', async () => {
    const { lookup } = lookupOf({ role: 'member' });
    const access = await authorizeWorkspace(lookup, { principal: user() }, 'ws_a', { action: 'write-tasks' });
    expect(access.planId).toBe('pro');
    await expect(authorizeWorkspace(lookup, { principal: user() }, 'ws_a', { action: 'manage' })).rejects.toMatchObject({
      code: 'forbidden',
      details: { reason: 'insufficient-role' },
    });
  });

  it('access: createRemoteAccess passes the principal and normalises the answer', async () => {
    let seen: unknown;
    const lookup = createRemoteAccess({
      async getAccess(request, options) {
        seen = { request, principal: options?.principal?.id };
        return { exists: true, role: 'bogus', planId: 'gold', status: 'active' };
      },
    });
    const access = await lookup(user(), 'ws_a');
    expect(seen).toEqual({ request: { workspaceId: 'ws_a' }, principal: 'usr_1' });
    expect(access).toEqual({ exists: true, role: undefined, planId: 'free', status: 'active' });
  });

  it('access: only system administrators pass requireSystemAdmin', () => {
    expect(codeOf(() => requireSystemAdmin(user()))).toBe('forbidden');
    expect(codeOf(() => requireSystemAdmin(user({ isAdmin: true })))).toBeUndefined();
    expect(codeOf(() => requireSystemAdmin(token()))).toBe('forbidden');
  });
});
