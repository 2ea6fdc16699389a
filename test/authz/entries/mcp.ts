import { expectFor, type Expectation, type MatrixEntry } from '../world.js';

/**
 * The MCP endpoint: agent tokens only (`issues:read` to reach it; each tool's own scopes are
 * checked per call, see test/e2e/mcp.test.ts). It names no workspace resource in the request
 * line, so a token of workspace B lists its own tools (200). GET and DELETE are 405 for everyone:
 * no server-initiated stream, no sessions. OPTIONS is the CORS preflight, public (204).
 */
const tokenOnly = (ok: number): Expectation => ({
  anonymous: 401,
  wrongWorkspaceToken: ok,
  tokenLackingScope: 403,
  viewer: 403,
  member: 403,
  admin: 403,
  systemAdmin: 403,
});

export const entries: MatrixEntry[] = [
  {
    method: 'POST',
    path: '/api/mcp',
    scope: 'issues:read',
    request: () => ({ method: 'POST', path: '/api/mcp', body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } }),
    expect: tokenOnly(200),
  },
  { method: 'GET', path: '/api/mcp', scope: null, request: () => ({ method: 'GET', path: '/api/mcp' }), expect: expectFor.public(405) },
  // The CORS preflight: public (browsers send it without credentials); no Origin here, so 204 for everyone.
  { method: 'OPTIONS', path: '/api/mcp', scope: null, request: () => ({ method: 'OPTIONS', path: '/api/mcp' }), expect: expectFor.public(204) },
  { method: 'DELETE', path: '/api/mcp', scope: null, request: () => ({ method: 'DELETE', path: '/api/mcp' }), expect: expectFor.public(405) },
];
