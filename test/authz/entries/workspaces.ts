import { expectFor, type MatrixEntry } from '../world.js';

/** Workspaces, members and agents (gateway + issues). */
export const entries: MatrixEntry[] = [
  {
    method: 'GET',
    path: '/api/workspaces',
    scope: 'projects:read',
    request: () => ({ method: 'GET', path: '/api/workspaces' }),
    // Not bound to one workspace: a token of B lists its own.
    expect: { ...expectFor.workspace('viewer'), wrongWorkspaceToken: 200 },
  },
  {
    method: 'POST',
    path: '/api/workspaces',
    scope: null,
    request: () => ({ method: 'POST', path: '/api/workspaces', body: { name: 'Matrix created' } }),
    expect: expectFor.session('none', 201),
  },
  {
    method: 'PATCH',
    path: '/api/workspaces/{id}',
    scope: null,
    request: (world) => ({ method: 'PATCH', path: `/api/workspaces/${world.a.id}`, body: { name: 'Matrix A renamed' } }),
    againstB: (world) => ({ method: 'PATCH', path: `/api/workspaces/${world.b.id}`, body: { name: 'Hijacked' } }),
    expect: expectFor.session('admin'),
  },
  {
    method: 'GET',
    path: '/api/workspaces/{id}/members',
    scope: null,
    request: (world) => ({ method: 'GET', path: `/api/workspaces/${world.a.id}/members` }),
    againstB: (world) => ({ method: 'GET', path: `/api/workspaces/${world.b.id}/members` }),
    expect: expectFor.session('viewer'),
  },
  {
    method: 'POST',
    path: '/api/workspaces/{id}/members',
    scope: null,
    request: async (world) => ({
      method: 'POST',
      path: `/api/workspaces/${world.a.id}/members`,
      body: { userId: (await world.freshUser('invitee')).id, role: 'viewer' },
    }),
    againstB: async (world) => ({
      method: 'POST',
      path: `/api/workspaces/${world.b.id}/members`,
      body: { userId: (await world.freshUser('invitee')).id, role: 'admin' },
    }),
    expect: expectFor.session('admin', 201),
  },
  {
    method: 'DELETE',
    path: '/api/workspaces/{id}/members/{userId}',
    scope: null,
    request: async (world) => ({ method: 'DELETE', path: `/api/workspaces/${world.a.id}/members/${(await world.freshMember('a', 'viewer')).id}` }),
    againstB: async (world) => ({ method: 'DELETE', path: `/api/workspaces/${world.b.id}/members/${(await world.freshMember('b', 'viewer')).id}` }),
    expect: expectFor.session('admin'),
  },
  {
    method: 'GET',
    path: '/api/workspaces/{id}/agents',
    scope: 'agents:read',
    request: (world) => ({ method: 'GET', path: `/api/workspaces/${world.a.id}/agents` }),
    againstB: (world) => ({ method: 'GET', path: `/api/workspaces/${world.b.id}/agents` }),
    expect: expectFor.workspace('viewer'),
  },
];
