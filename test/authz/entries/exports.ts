import { expectFor, type MatrixEntry } from '../world.js';

/**
 * Issue exports and their history (imports-exports service): a workspace admin action
 * (DECISIONS §1) — admin or owner sessions, system administrators, tokens with scope `admin` of
 * the workspace. Workspace A is enterprise, so every format is entitled and the quota unlimited.
 */
export const entries: MatrixEntry[] = [
  {
    method: 'GET',
    path: '/api/issues/export',
    scope: 'admin',
    request: (world) => ({ method: 'GET', path: `/api/issues/export?workspaceSlug=${world.a.slug}&format=json` }),
    againstB: (world) => ({ method: 'GET', path: `/api/issues/export?workspaceSlug=${world.b.slug}&format=json` }),
    expect: expectFor.workspace('admin'),
  },
  {
    method: 'GET',
    path: '/api/issues/export/history',
    scope: 'admin',
    request: (world) => ({ method: 'GET', path: `/api/issues/export/history?workspaceId=${world.a.id}` }),
    againstB: (world) => ({ method: 'GET', path: `/api/issues/export/history?workspaceId=${world.b.id}` }),
    expect: expectFor.workspace('admin'),
  },
];
