import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { ok, page } from '../openapi.js';
import { programJson, programSchema } from './planning-json.js';
import { cursorSchema, idSchema, limitSchema, qSchema } from './planning-input.js';

const PROGRAM_STATUS = ['active', 'paused', 'completed', 'archived'] as const;

/** Programs: groups of initiatives. */
export async function programRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.get<{ Querystring: { workspaceId?: string; status?: string; q?: string; limit?: number; cursor?: string } }>(
    '/api/programs',
    {
      schema: {
        operationId: 'listPrograms',
        summary: 'List programs',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { workspaceId: idSchema, status: { type: 'string', enum: PROGRAM_STATUS }, q: qSchema, limit: limitSchema, cursor: cursorSchema },
        },
        response: { 200: page(programSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:read' } },
    },
    async (request) => {
      const result = await deps.rpc.programs.listPrograms(request.query, { principal: request.principal });
      return { data: result.programs.map(programJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Body: { workspaceId: string; name: string; ownerId?: string; status?: string; description?: string } }>(
    '/api/programs',
    {
      schema: {
        operationId: 'createProgram',
        summary: 'Create a program',
        description: '`ownerId` must be a member of the workspace (default: the caller).',
        body: {
          type: 'object',
          required: ['workspaceId', 'name'],
          examples: [{ workspaceId: 'ws_01J0EXAMPLE', name: 'Platform', description: 'Core services and their tooling' }],
          additionalProperties: false,
          properties: {
            workspaceId: idSchema,
            name: { type: 'string', minLength: 1, maxLength: 200 },
            ownerId: idSchema,
            status: { type: 'string', enum: PROGRAM_STATUS },
            description: { type: 'string', maxLength: 2000 },
          },
        },
        response: { 201: ok(programSchema, 'The new program') },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:write' } },
    },
    async (request, reply) => {
      const result = await deps.rpc.programs.createProgram(request.body, { principal: request.principal });
      if (!result.program) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: programJson(result.program) };
    },
  );
}
