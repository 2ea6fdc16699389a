import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { ok, page } from '../openapi.js';
import { milestoneJson, milestoneSchema } from './planning-json.js';
import { cursorSchema, dateSchema, idSchema, limitSchema } from './planning-input.js';

const MILESTONE_STATUS = ['active', 'completed', 'cancelled'] as const;

/** Milestones (release slices) of a project. */
export async function milestoneRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.get<{ Querystring: { projectId?: string; workspaceId?: string; status?: string; limit?: number; cursor?: string } }>(
    '/api/milestones',
    {
      schema: {
        operationId: 'listMilestones',
        summary: "A project's milestones",
        description: '`projectId` (or `workspaceId` for every milestone of a workspace) is required.',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            projectId: idSchema,
            workspaceId: idSchema,
            status: { type: 'string', enum: MILESTONE_STATUS },
            limit: limitSchema,
            cursor: cursorSchema,
          },
        },
        response: { 200: page(milestoneSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:read' } },
    },
    async (request) => {
      const result = await deps.rpc.projects.listMilestones(request.query, { principal: request.principal });
      return { data: result.milestones.map(milestoneJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Body: { projectId: string; name: string; targetDate?: string; status?: string } }>(
    '/api/milestones',
    {
      schema: {
        operationId: 'createMilestone',
        summary: 'Create a milestone in a project',
        body: {
          type: 'object',
          required: ['projectId', 'name'],
          examples: [{ projectId: 'prj_01J0EXAMPLE', name: 'Beta', targetDate: '2027-03-31' }],
          additionalProperties: false,
          properties: {
            projectId: idSchema,
            name: { type: 'string', minLength: 1, maxLength: 200 },
            targetDate: dateSchema,
            status: { type: 'string', enum: MILESTONE_STATUS },
          },
        },
        response: { 201: ok(milestoneSchema, 'The new milestone') },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:write' } },
    },
    async (request, reply) => {
      const result = await deps.rpc.projects.createMilestone(request.body, { principal: request.principal });
      if (!result.milestone) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: milestoneJson(result.milestone) };
    },
  );
}
