import type { MessageShape } from '@bufbuild/protobuf';
import { ServiceError } from '@planning/errors';
import type { WorkspaceSchema } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';

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
  };
}

const createBody = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200 },
    ownerId: { type: 'string', minLength: 1, maxLength: 64 },
    planId: { type: 'string', enum: ['free', 'beginner', 'hobbyist', 'pro', 'enterprise'] },
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

export async function workspaceRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.get<{ Querystring: { q?: string; limit?: number; cursor?: string } }>(
    '/api/workspaces',
    { schema: { querystring: listQuery }, config: { access: { auth: 'session-or-token', scope: 'projects:read' } } },
    async (request) => {
      const { q, limit, cursor } = request.query;
      const result = await deps.rpc.workspaces.listWorkspaces(
        { q, limit, cursor },
        { principal: request.principal },
      );
      return { data: result.workspaces.map(workspaceJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Body: { name: string; ownerId?: string; planId?: string } }>(
    '/api/workspaces',
    { schema: { body: createBody }, config: { access: { auth: 'session' } } },
    async (request, reply) => {
      const { name, ownerId, planId } = request.body;
      if (ownerId !== undefined && ownerId !== request.principal.id) {
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
}
