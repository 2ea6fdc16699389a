/**
 * OAuth grants (MCP sign-in) through the API: list and revoke. A grant is what a person allowed an
 * MCP client to do in a workspace as one of its agents (docs/mcp.md). Revoking one ends it at once:
 * its tokens stop working on their next request, its refresh tokens are refused; the record stays
 * for audit. Workspace admins (or a token with `admin`) see and revoke the workspace's grants;
 * every signed-in user sees and revokes their own.
 */
import { authorizeWorkspace, createRemoteAccess } from '@planning/access';
import { ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { grantJson, type GrantRecord } from '../oauth/grants.js';
import { component, ok, page, rateLimitSchema } from '../openapi.js';
import { decodeCursor, encodeCursor, pageLimit } from './paging.js';

const str = { type: 'string' } as const;
const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });
const time = { type: 'string', format: 'date-time' } as const;

export const grantSchema = component('OAuthGrant', {
  type: 'object',
  required: ['id', 'workspaceId', 'agentId', 'userId', 'clientId', 'clientName', 'scopes', 'planId', 'rateLimit', 'createdAt', 'expiresAt', 'lastUsedAt', 'lastRefreshedAt', 'revokedAt', 'revokeReason'],
  properties: {
    id: str,
    workspaceId: str,
    agentId: { ...str, description: 'The agent the grant acts as.' },
    userId: { ...str, description: 'Who consented.' },
    clientId: { ...str, description: 'The MCP client (a registered id or its metadata document URL).' },
    clientName: nullable(str),
    scopes: { type: 'array', items: str },
    planId: str,
    rateLimit: rateLimitSchema,
    createdAt: time,
    expiresAt: time,
    lastUsedAt: nullable(time),
    lastRefreshedAt: nullable(time),
    revokedAt: nullable(time),
    revokeReason: nullable({ type: 'string', enum: ['revoked', 'client-revoked', 'replay', 'user-removed'] }),
  },
});

const id = { type: 'string', minLength: 1, maxLength: 64 } as const;

export async function grantRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const access = createRemoteAccess(deps.rpc.workspaces);
  const grants = deps.oauth.grants;

  /** May this principal see or revoke this grant? Its own user may; else the workspace's admins (or an `admin` token of it). */
  const authorizeGrant = async (principal: Principal, grant: GrantRecord): Promise<void> => {
    if (principal.type === 'user' && principal.id === grant.userId) return;
    if (principal.type === 'api-key' && principal.workspaceId !== grant.workspaceId) throw new ServiceError('not-found', 'Grant not found');
    await authorizeWorkspace(access, { principal }, grant.workspaceId, { action: 'manage', scope: 'admin' });
  };

  app.get<{ Querystring: { workspaceId?: string; limit?: number; cursor?: string } }>(
    '/api/oauth/grants',
    {
      schema: {
        operationId: 'listOAuthGrants',
        summary: 'OAuth grants (MCP sign-in)',
        description:
          'With `workspaceId`: the workspace\'s grants (admins, or a token with `admin`). Without: the signed-in user\'s own grants, in every workspace (tokens must name their workspace). Oldest first; no token material.',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { workspaceId: id, limit: { type: 'integer', minimum: 1, maximum: 200 }, cursor: { type: 'string', maxLength: 400 } },
        },
        response: { 200: page(grantSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const principal = request.principal;
      const { workspaceId } = request.query;
      if (workspaceId) await authorizeWorkspace(access, { principal }, workspaceId, { action: 'manage', scope: 'admin' });
      else if (principal.type !== 'user') throw new ServiceError('invalid-input', "'workspaceId' is required for a token", { field: 'workspaceId' });
      const limit = pageLimit(request.query.limit);
      const rows = await grants.list(workspaceId ? { workspaceId } : { userId: principal.id }, { limit: limit + 1, after: decodeCursor(request.query.cursor) });
      const items = rows.slice(0, limit);
      const last = items[items.length - 1];
      return { data: items.map(grantJson), page: { nextCursor: rows.length > limit && last ? encodeCursor(last._id) : null } };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/oauth/grants/:id',
    {
      schema: {
        operationId: 'revokeOAuthGrant',
        summary: 'Revoke an OAuth grant',
        description:
          "Ends the grant at once: its access tokens are refused from the next request on, its refresh tokens too; the record stays, with `revokedAt`. Its user, the workspace's admins, or a token with `admin`. Revoking twice is harmless.",
        params: { type: 'object', required: ['id'], properties: { id } },
        response: { 200: ok(grantSchema, 'The revoked grant') },
      },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const principal = request.principal;
      const found = await grants.findById(request.params.id);
      if (!found) throw new ServiceError('not-found', 'Grant not found');
      await authorizeGrant(principal, found);
      const actorId = principal.keyId ?? principal.id;
      const { grant, changed } = await grants.revoke(found._id, actorId, 'revoked', deps.clock());
      if (!grant) throw new ServiceError('not-found', 'Grant not found');
      // The server's state goes too (codes, tokens, refresh tokens), even when the record was revoked before.
      await deps.oauth.server?.revokeGrant(grant._id);
      if (changed) {
        await deps.outbox.add({
          type: 'oauth.grant.revoked',
          workspaceId: grant.workspaceId,
          actor: { type: principal.type === 'api-key' ? 'api-key' : 'user', id: actorId },
          data: { subject: { type: 'oauth-grant', id: grant._id }, outcome: 'allowed', reason: 'revoked' },
        });
      }
      return { data: grantJson(grant) };
    },
  );
}
