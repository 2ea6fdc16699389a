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
];
