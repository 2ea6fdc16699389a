import type { MessageShape } from '@bufbuild/protobuf';
import { authorizeWorkspace, createRemoteAccess } from '@planning/access';
import { ServiceError } from '@planning/errors';
import type { WorkspaceSchema } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { ok, page, workspaceSchema, errors } from '../openapi.js';

/** The REST shape of a workspace. */
export function workspaceJson(w: MessageShape<typeof WorkspaceSchema>) {
  return {
    id: w.id,
    name: w.name,
    slug: w.slug,
    status: w.status,
    ownerId: w.ownerId,
    defaultSandbox: w.defaultSandbox,
    planId: w.planId,
    createdAt: w.createdAt,
    updatedAt: w.updatedAt,
    version: w.version,
    doneRequires: w.doneRequires || 'nothing',
    doneGate: w.doneGate || 'done',
  };
}

const PLAN_ENUM = ['free', 'beginner', 'hobbyist', 'pro', 'enterprise'];

const createBody = {
  type: 'object',
  required: ['name'],
  examples: [{ name: 'Payments platform', planId: 'pro' }],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200 },
    ownerId: { type: 'string', minLength: 1, maxLength: 64, description: 'Another user (system administrators only).' },
    planId: { type: 'string', enum: PLAN_ENUM },
  },
} as const;

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    q: { type: 'string', maxLength: 200 },
    limit: { type: 'integer', minimum: 1, maximum: 200 },
    cursor: { type: 'string', maxLength: 400 },
  },
} as const;

export const workspaceParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 64 } },
} as const;

const patchBody = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200, description: 'Admins and owners.' },
    status: { type: 'string', enum: ['active', 'suspended', 'archived'], description: 'Admins and owners. Tokens of a workspace that is not active get 403.' },
    planId: { type: 'string', enum: PLAN_ENUM, description: 'The owner or a system administrator.' },
    ownerId: { type: 'string', minLength: 1, maxLength: 64, description: 'Transfers ownership (the owner or a system administrator); the previous owner becomes an admin.' },
    doneRequires: {
      type: 'string',
      enum: ['nothing', 'evidence', 'evidence-and-approval'],
      description: 'Admins and owners. What a task needs before done: nothing, evidence for every acceptance check, or that and an approval after the last evidence.',
    },
    doneGate: { type: 'string', enum: ['done', 'in-review'], description: 'Admins and owners. The first move the done policy gates (in-review: in-review and done).' },
  },
} as const;

interface PatchBody {
  name?: string;
  status?: string;
  planId?: string;
  ownerId?: string;
  doneRequires?: string;
  doneGate?: string;
}

export async function workspaceRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const access = createRemoteAccess(deps.rpc.workspaces);

  app.get<{ Querystring: { q?: string; limit?: number; cursor?: string } }>(
    '/api/workspaces',
    {
      schema: {
        operationId: 'listWorkspaces',
        summary: 'Workspaces visible to the caller',
        description: 'A session sees its memberships (a system administrator: all); a token sees its own workspace.',
        querystring: listQuery,
        response: { 200: page(workspaceSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:read' } },
    },
    async (request) => {
      const { q, limit, cursor } = request.query;
      const result = await deps.rpc.workspaces.listWorkspaces({ q, limit, cursor }, { principal: request.principal });
      return { data: result.workspaces.map(workspaceJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Body: { name: string; ownerId?: string; planId?: string } }>(
    '/api/workspaces',
    {
      schema: { operationId: 'createWorkspace', summary: 'Create a workspace', body: createBody, response: { 201: ok(workspaceSchema, 'The new workspace') } },
      config: { access: { auth: 'session' } },
    },
    async (request, reply) => {
      const { name, ownerId, planId } = request.body;
      if (ownerId !== undefined && ownerId !== request.principal.id) {
        if (!request.principal.isAdmin) {
          throw new ServiceError('forbidden', 'Only a system administrator may create a workspace for another user', {
            reason: 'insufficient-role',
          });
        }
        // The owner must be a known user (the gateway owns the user directory).
        const owner = await deps.users.findById(ownerId);
        if (!owner) throw new ServiceError('not-found', 'Owner user not found');
      }
      const result = await deps.rpc.workspaces.createWorkspace({ name, ownerId, planId }, { principal: request.principal });
      if (!result.workspace) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: workspaceJson(result.workspace) };
    },
  );

  app.patch<{ Params: { id: string }; Body: PatchBody }>(
    '/api/workspaces/:id',
    {
      schema: {
        operationId: 'updateWorkspace',
        summary: 'Change a workspace: name, status, plan, owner, done policy',
        description: 'Retry-safe: the same change again leaves `version` as it is.',
        params: workspaceParams,
        body: patchBody,
        response: { ...errors('work-already-claimed'), 200: ok(workspaceSchema, 'The workspace after the change') },
      },
      config: { access: { auth: 'session' } },
    },
    async (request) => {
      const { id } = request.params;
      const { name, status, planId, ownerId, doneRequires, doneGate } = request.body;
      if (ownerId !== undefined) {
        // Only someone allowed to transfer ownership learns whether the user exists.
        await authorizeWorkspace(access, { principal: request.principal }, id, { action: 'own' });
        if (!(await deps.users.findById(ownerId))) throw new ServiceError('not-found', 'User not found');
      }
      const result = await deps.rpc.workspaces.updateWorkspace({ id, name, status, planId, ownerId, doneRequires, doneGate }, { principal: request.principal });
      if (!result.workspace) throw new ServiceError('internal', 'Internal error');
      // This replica applies plan and status changes to token requests at once; others within WORKSPACE_CACHE_MS.
      deps.workspaceAccess.invalidate(id);
      return { data: workspaceJson(result.workspace) };
    },
  );
}
