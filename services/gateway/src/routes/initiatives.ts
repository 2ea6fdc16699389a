import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { ok, page } from '../openapi.js';
import { initiativeJson, initiativeSchema } from './planning-json.js';
import { contextPackInput, contextPackSchema, cursorSchema, dateSchema, idParams, idSchema, limitSchema, qSchema } from './planning-input.js';

const STATUS = ['active', 'paused', 'completed', 'archived'] as const;

interface CreateBody {
  programId: string;
  workspaceId?: string;
  name: string;
  ownerIds?: string[];
  goal?: string;
  startDate?: string;
  targetDate?: string;
  contextPack?: Parameters<typeof contextPackInput>[0];
  status?: string;
}

/** Initiatives: group projects; keep target dates, owners, goals and context packs. */
export async function initiativeRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.get<{ Querystring: { workspaceId?: string; programId?: string; status?: string; q?: string; limit?: number; cursor?: string } }>(
    '/api/initiatives',
    {
      schema: {
        operationId: 'listInitiatives',
        summary: 'List initiatives',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            workspaceId: idSchema,
            programId: idSchema,
            status: { type: 'string', enum: STATUS },
            q: qSchema,
            limit: limitSchema,
            cursor: cursorSchema,
          },
        },
        response: { 200: page(initiativeSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:read' } },
    },
    async (request) => {
      const result = await deps.rpc.programs.listInitiatives(request.query, { principal: request.principal });
      return { data: result.initiatives.map(initiativeJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Body: CreateBody }>(
    '/api/initiatives',
    {
      schema: {
        operationId: 'createInitiative',
        summary: 'Create an initiative in a program',
        description: '`ownerIds` must be members of the workspace (default: the caller). `contextPack` lists files, documents and links agents read as context.',
        body: {
          type: 'object',
          required: ['programId', 'name'],
          examples: [
            {
              programId: 'prg_01J0EXAMPLE',
              name: 'Public launch',
              goal: 'Launch with proof',
              targetDate: '2027-06-30',
              contextPack: [{ kind: 'doc', title: 'Launch checklist', path: 'docs/launch.md' }],
            },
          ],
          additionalProperties: false,
          properties: {
            programId: idSchema,
            workspaceId: { ...idSchema, description: "Optional: the program's workspace (400 if it is another)." },
            name: { type: 'string', minLength: 1, maxLength: 200 },
            ownerIds: { type: 'array', maxItems: 20, items: idSchema },
            goal: { type: 'string', maxLength: 2000 },
            startDate: dateSchema,
            targetDate: dateSchema,
            contextPack: contextPackSchema,
            status: { type: 'string', enum: STATUS },
          },
        },
        response: { 201: ok(initiativeSchema, 'The new initiative') },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:write' } },
    },
    async (request, reply) => {
      const { contextPack, ownerIds, ...rest } = request.body;
      const result = await deps.rpc.programs.createInitiative(
        { ...rest, ownerIds: ownerIds ?? [], contextPack: contextPackInput(contextPack) },
        { principal: request.principal },
      );
      if (!result.initiative) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: initiativeJson(result.initiative) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/initiatives/:id',
    {
      schema: { operationId: 'getInitiative', summary: 'An initiative (with its context pack)', params: idParams, response: { 200: ok(initiativeSchema) } },
      config: { access: { auth: 'session-or-token', scope: 'projects:read' } },
    },
    async (request) => {
      const result = await deps.rpc.programs.getInitiative({ id: request.params.id }, { principal: request.principal });
      if (!result.initiative) throw new ServiceError('internal', 'Internal error');
      return { data: initiativeJson(result.initiative) };
    },
  );
}
