import { randomBytes } from 'node:crypto';
import { expectFor, type MatrixEntry } from '../world.js';

/** Sign-in, sessions and users (gateway). */
export const entries: MatrixEntry[] = [
  {
    method: 'POST',
    path: '/api/auth/login',
    scope: null,
    // Signing in ends the session it presents: present a fresh one, so the principal's own stays valid.
    request: async (world, who) => ({
      method: 'POST',
      path: '/api/auth/login',
      body: { email: world.a.viewer.email, password: world.a.viewer.password },
      cookie: await world.freshCookie(who),
    }),
    expect: expectFor.public(200),
  },
  {
    method: 'POST',
    path: '/api/auth/logout',
    scope: null,
    // Ends the session it presents: a fresh one, so the principal's own stays valid.
    request: async (world, who) => ({ method: 'POST', path: '/api/auth/logout', cookie: await world.freshCookie(who) }),
    expect: expectFor.public(200),
  },
  {
    method: 'GET',
    path: '/api/auth/session',
    scope: null,
    request: () => ({ method: 'GET', path: '/api/auth/session' }),
    expect: expectFor.session('none'),
  },
  {
    method: 'POST',
    path: '/api/users',
    scope: null,
    request: () => ({
      method: 'POST',
      path: '/api/users',
      body: { email: `u-${randomBytes(4).toString('hex')}@example.com`, name: 'Matrix', password: 'matrix-password-123' },
    }),
    expect: expectFor.session('systemAdmin', 201),
  },
  {
    method: 'GET',
    path: '/api/users',
    scope: null,
    request: () => ({ method: 'GET', path: '/api/users?limit=5' }),
    expect: expectFor.session('systemAdmin'),
  },
  {
    method: 'PATCH',
    path: '/api/users/{id}',
    scope: null,
    request: (world) => ({ method: 'PATCH', path: `/api/users/${world.a.viewer.id}`, body: { name: 'Matrix viewer' } }),
    expect: expectFor.session('systemAdmin'),
  },
  {
    method: 'POST',
    path: '/api/auth/password',
    scope: null,
    // Any signed-in user may change their own password: a fresh user's session stands in for each
    // signed-in principal, so the principals' own passwords stay as the other entries need them.
    request: async (world, who) => {
      const body = { currentPassword: 'not-the-password', newPassword: `pw-${randomBytes(12).toString('hex')}` };
      if (!['viewer', 'member', 'admin', 'systemAdmin'].includes(who)) return { method: 'POST', path: '/api/auth/password', body };
      const user = await world.freshUser('pw');
      return { method: 'POST', path: '/api/auth/password', body: { ...body, currentPassword: user.password }, cookie: user.cookie };
    },
    expect: expectFor.session('none'),
  },
];
