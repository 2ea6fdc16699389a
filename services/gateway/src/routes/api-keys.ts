import { authorizeWorkspace, createRemoteAccess, isAgentId } from '@planning/access';
import { ServiceError } from '@planning/errors';
import { isScope, PLAN_IDS, PLANS, SCOPES, type Scope } from '@planning/plans';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { hashApiToken, newApiToken } from '../identity/tokens.js';
import { apiKeySchema, ok, page } from '../openapi.js';
import { ACTOR_TYPES, apiKeyJson, type ActorType } from '../store/api-keys.js';
import { decodeCursor, encodeCursor, pageLimit } from './paging.js';

const createBody = {
  type: 'object',
  required: ['workspaceId', 'agentId', 'planId', 'scopes'],
  examples: [{ workspaceId: 'ws_01J0EXAMPLE', agentId: 'builder-1', planId: 'pro', scopes: ['issues:read', 'issues:write', 'agents:read', 'agents:execute'], label: 'CI builder' }],
  additionalProperties: false,
  properties: {
    label: { type: 'string', minLength: 1, maxLength: 200, description: 'Defaults to the agent id.' },
    workspaceId: { type: 'string', minLength: 1, maxLength: 64 },
    agentId: { type: 'string', maxLength: 64, pattern: '^[a-z0-9][a-z0-9._-]{0,63}$', description: 'The agent record is created with the first key that names it.' },
    planId: { type: 'string', enum: [...PLAN_IDS], description: "Must be the workspace's plan." },
    scopes: {
      type: 'array',
      minItems: 1,
      maxItems: SCOPES.length,
      uniqueItems: true,
      items: { type: 'string', minLength: 1, maxLength: 64 },
      description: `A non-empty subset of the plan's scopes (${SCOPES.join(', ')}). Unknown names: 400; beyond the plan: 403.`,
    },
    actorType: { type: 'string', enum: [...ACTOR_TYPES], default: 'agent' },
  },
} as const;

interface CreateBody {
  label?: string;
  workspaceId: string;
  agentId: string;
  planId: string;
  scopes: string[];
  actorType: ActorType;
}

const createdKeySchema = {
  type: 'object',
  required: ['id', 'workspaceId', 'agentId', 'scopes', 'rateLimit', 'label', 'actorType', 'createdAt'],
  properties: {
    id: { type: 'string' },
    workspaceId: { type: 'string' },
    agentId: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string' } },
    rateLimit: {
      type: 'object',
      required: ['requestsPerMinute', 'burst'],
      properties: { requestsPerMinute: { type: 'integer' }, burst: { type: 'integer' } },
    },
    label: { type: 'string' },
    actorType: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
  },
} as const;

const listQuery = {
  type: 'object',
  required: ['workspaceId'],
  additionalProperties: false,
  properties: {
    workspaceId: { type: 'string', minLength: 1, maxLength: 64 },
    limit: { type: 'integer', minimum: 1, maximum: 200 },
    cursor: { type: 'string', maxLength: 400 },
  },
} as const;

const keyParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 64 } },
} as const;

export async function apiKeyRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const access = createRemoteAccess(deps.rpc.workspaces);

  app.post<{ Body: CreateBody }>(
    '/api/api-keys',
    {
      schema: {
        operationId: 'createApiKey',
        summary: 'Create an API key',
        description:
          "Admins and owners of a workspace whose plan allows API access (free: 403). The token is in this response only. `rateLimit` is the plan's.",
        body: createBody,
        response: {
          201: ok(
            { type: 'object', required: ['apiKey', 'token'], properties: { apiKey: createdKeySchema, token: { type: 'string', description: 'Shown once.' } } },
            'The key and its token',
          ),
        },
      },
      config: { access: { auth: 'session' } },
    },
    async (request, reply) => {
      const body = request.body;
      if (!isAgentId(body.agentId)) {
        throw new ServiceError('invalid-input', "'agentId' must match ^[a-z0-9][a-z0-9._-]{0,63}$", { field: 'agentId' });
      }
      const workspace = await authorizeWorkspace(access, { principal: request.principal }, body.workspaceId, { action: 'manage' });
      const plan = PLANS[workspace.planId];
      const unknown = body.scopes.filter((s) => !isScope(s));
      if (unknown.length > 0) {
        throw new ServiceError('invalid-input', `'scopes' names unknown scopes: ${unknown.map((s) => JSON.stringify(s.slice(0, 64))).join(', ')}`, {
          field: 'scopes',
        });
      }
      if (!plan.rateLimit) {
        throw new ServiceError('forbidden', `The workspace's plan (${plan.id}) does not include API access`, { reason: 'plan-without-api' });
      }
      if (body.planId !== workspace.planId) {
        throw new ServiceError('invalid-input', `'planId' must be the workspace's plan (${workspace.planId})`, { field: 'planId' });
      }
      const beyond = (body.scopes as Scope[]).filter((s) => !plan.scopes.includes(s));
      if (beyond.length > 0) {
        throw new ServiceError('forbidden', `The ${plan.id} plan does not include the scopes ${beyond.join(', ')}`, {
          reason: 'scope-beyond-plan',
        });
      }
      if (workspace.status !== 'active') {
        throw new ServiceError('forbidden', `The workspace is ${workspace.status}`, { reason: 'workspace-inactive' });
      }
      await deps.rpc.agents.ensureAgent({ workspaceId: body.workspaceId, agentId: body.agentId }, { principal: request.principal });
      const token = newApiToken();
      const key = await deps.apiKeys.create(
        {
          tokenHash: hashApiToken(token),
          workspaceId: body.workspaceId,
          agentId: body.agentId,
          label: body.label?.trim() || body.agentId,
          actorType: body.actorType,
          planId: plan.id,
          scopes: body.scopes as Scope[],
          rateLimit: { ...plan.rateLimit },
          createdBy: request.principal.id,
        },
        deps.clock(),
      );
      await deps.outbox.add({
        type: 'api-key.created',
        workspaceId: key.workspaceId,
        actor: { type: 'user', id: request.principal.id },
        data: { subject: { type: 'api-key', id: key._id }, outcome: 'allowed', agentId: key.agentId },
      });
      void reply.status(201).header('cache-control', 'no-store');
      const json = apiKeyJson(key);
      return {
        data: {
          apiKey: {
            id: json.id,
            workspaceId: json.workspaceId,
            agentId: json.agentId,
            scopes: json.scopes,
            rateLimit: json.rateLimit,
            label: json.label,
            actorType: json.actorType,
            createdAt: json.createdAt,
          },
          token,
        },
      };
    },
  );

  app.get<{ Querystring: { workspaceId: string; limit?: number; cursor?: string } }>(
    '/api/api-keys',
    {
      schema: { operationId: 'listApiKeys', summary: "A workspace's API keys (never token material)", querystring: listQuery, response: { 200: page(apiKeySchema) } },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const { workspaceId } = request.query;
      await authorizeWorkspace(access, { principal: request.principal }, workspaceId, { action: 'manage', scope: 'admin' });
      const limit = pageLimit(request.query.limit);
      const rows = await deps.apiKeys.list(workspaceId, { limit: limit + 1, after: decodeCursor(request.query.cursor) });
      const items = rows.slice(0, limit);
      const last = items[items.length - 1];
      return { data: items.map(apiKeyJson), page: { nextCursor: rows.length > limit && last ? encodeCursor(last._id) : null } };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/api-keys/:id',
    {
      schema: {
        operationId: 'revokeApiKey',
        summary: 'Revoke an API key',
        description: 'The key stops working at once; its record stays (for audit). Revoking twice is harmless.',
        params: keyParams,
        response: { 200: ok(apiKeySchema, 'The revoked key') },
      },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const principal = request.principal;
      const key = await deps.apiKeys.findById(request.params.id);
      if (!key || (principal.type === 'api-key' && principal.workspaceId !== key.workspaceId)) {
        throw new ServiceError('not-found', 'API key not found');
      }
      await authorizeWorkspace(access, { principal: request.principal }, key.workspaceId, { action: 'manage', scope: 'admin' });
      const actorId = principal.keyId ?? principal.id;
      const result = await deps.apiKeys.revoke(key._id, actorId, deps.clock());
      if (!result.key) throw new ServiceError('not-found', 'API key not found');
      if (result.changed) {
        await deps.outbox.add({
          type: 'api-key.revoked',
          workspaceId: key.workspaceId,
          actor: { type: principal.type === 'api-key' ? 'api-key' : 'user', id: actorId },
          data: { subject: { type: 'api-key', id: key._id }, outcome: 'allowed' },
        });
      }
      return { data: apiKeyJson(result.key) };
    },
  );
}
