import { randomBytes } from 'node:crypto';
import { expectFor, type MatrixEntry } from '../world.js';

/** API keys, usage and administration (gateway + audit). */
export const entries: MatrixEntry[] = [
  {
    method: 'POST',
    path: '/api/api-keys',
    scope: null,
    request: (world) => ({
      method: 'POST',
      path: '/api/api-keys',
      body: { workspaceId: world.a.id, agentId: `m-${randomBytes(3).toString('hex')}`, planId: 'enterprise', scopes: ['issues:read'] },
    }),
    againstB: (world) => ({
      method: 'POST',
      path: '/api/api-keys',
      body: { workspaceId: world.b.id, agentId: 'intruder', planId: 'enterprise', scopes: ['admin'] },
    }),
    expect: expectFor.session('admin', 201),
  },
  {
    method: 'GET',
    path: '/api/api-keys',
    scope: 'admin',
    request: (world) => ({ method: 'GET', path: `/api/api-keys?workspaceId=${world.a.id}` }),
    againstB: (world) => ({ method: 'GET', path: `/api/api-keys?workspaceId=${world.b.id}` }),
    expect: expectFor.workspace('admin'),
  },
  {
    method: 'DELETE',
    path: '/api/api-keys/{id}',
    scope: 'admin',
    request: async (world) => ({ method: 'DELETE', path: `/api/api-keys/${(await world.freshKey('a', ['issues:read'])).id}` }),
    againstB: async (world) => ({ method: 'DELETE', path: `/api/api-keys/${(await world.freshKey('b', ['issues:read'])).id}` }),
    expect: expectFor.workspace('admin'),
  },
  {
    method: 'GET',
    path: '/api/billing/usage',
    scope: 'billing:read',
    request: (world) => ({ method: 'GET', path: `/api/billing/usage?workspaceId=${world.a.id}` }),
    againstB: (world) => ({ method: 'GET', path: `/api/billing/usage?workspaceId=${world.b.id}` }),
    expect: expectFor.workspace('admin'),
  },
  {
    method: 'GET',
    path: '/api/admin/diagnostics',
    scope: 'admin',
    request: () => ({ method: 'GET', path: '/api/admin/diagnostics' }),
    // Answers for the workspaces the caller administers: a token of B gets B's.
    expect: { ...expectFor.workspace('admin'), wrongWorkspaceToken: 200 },
  },
  {
    method: 'GET',
    path: '/api/admin/audit-events',
    scope: 'admin',
    request: () => ({ method: 'GET', path: '/api/admin/audit-events?limit=5' }),
    againstB: (world) => ({ method: 'GET', path: `/api/admin/audit-events?workspaceId=${world.b.id}` }),
    expect: { ...expectFor.workspace('admin'), wrongWorkspaceToken: 200 },
  },
];
