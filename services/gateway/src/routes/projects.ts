import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { ok, page, errors } from '../openapi.js';
import { projectJson, projectSchema } from './planning-json.js';
import { contextPackInput, contextPackSchema, cursorSchema, idParams, idSchema, limitSchema, nullableId, qSchema } from './planning-input.js';

const PROJECT_STATUS = ['active', 'paused', 'completed', 'archived'] as const;
type ContextPack = Parameters<typeof contextPackInput>[0];

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    workspaceId: idSchema,
    q: qSchema,
    status: { type: 'string', enum: PROJECT_STATUS },
    initiativeId: idSchema,
    limit: limitSchema,
    cursor: cursorSchema,
  },
} as const;

const createBody = {
  type: 'object',
  required: ['workspaceId', 'name'],
  examples: [{ workspaceId: 'ws_01J0EXAMPLE', name: 'Checkout rewrite', goal: 'Ship the new checkout by June', status: 'active' }],
  additionalProperties: false,
  properties: {
    workspaceId: idSchema,
    name: { type: 'string', minLength: 1, maxLength: 200 },
    goal: { type: 'string', maxLength: 2000 },
    status: { type: 'string', enum: PROJECT_STATUS },
    initiativeId: idSchema,
    contextPack: contextPackSchema,
  },
} as const;

const patchBody = {
  type: 'object',
  required: ['projectId'],
  examples: [{ projectId: 'prj_01J0EXAMPLE', status: 'paused', doneRequires: 'evidence' }],
  additionalProperties: false,
  properties: {
    projectId: idSchema,
    status: { type: 'string', enum: PROJECT_STATUS },
    goal: { type: 'string', maxLength: 2000 },
    name: { type: 'string', minLength: 1, maxLength: 200 },
    contextPack: contextPackSchema,
    initiativeId: nullableId,
    doneRequires: {
      type: ['string', 'null'],
      enum: ['nothing', 'evidence', 'evidence-and-approval', null],
      description: "The project's own done policy; null: back to the workspace's.",
    },
    doneGate: { type: ['string', 'null'], enum: ['done', 'in-review', null], description: "The first move the project's policy gates; null: the workspace's." },
  },
} as const;

/** Projects: list, create, read, and the documented `PATCH /api/projects` (status and goal). */
export async function projectRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const projects = deps.rpc.projects;

  app.get<{ Querystring: { workspaceId?: string; q?: string; status?: string; initiativeId?: string; limit?: number; cursor?: string } }>(
    '/api/projects',
    {
      schema: { operationId: 'listProjects', summary: 'List projects', querystring: listQuery, response: { 200: page(projectSchema) } },
      config: { access: { auth: 'session-or-token', scope: 'projects:read' } },
    },
    async (request) => {
      const result = await projects.listProjects(request.query, { principal: request.principal });
      return { data: result.projects.map(projectJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Body: { workspaceId: string; name: string; goal?: string; status?: string; initiativeId?: string; contextPack?: ContextPack } }>(
    '/api/projects',
    {
      schema: { operationId: 'createProject', summary: 'Create a project', body: createBody, response: { 201: ok(projectSchema, 'The new project') } },
      config: { access: { auth: 'session-or-token', scope: 'projects:write' } },
    },
    async (request, reply) => {
      const { contextPack, ...rest } = request.body;
      const result = await projects.createProject({ ...rest, contextPack: contextPackInput(contextPack) }, { principal: request.principal });
      if (!result.project) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: projectJson(result.project) };
    },
  );

  app.patch<{
    Body: {
      projectId: string;
      status?: string;
      goal?: string;
      name?: string;
      contextPack?: ContextPack;
      initiativeId?: string | null;
      doneRequires?: string | null;
      doneGate?: string | null;
    };
  }>(
    '/api/projects',
    {
      schema: {
        operationId: 'updateProject',
        summary: "Change a project's status and/or goal",
        description:
          'Body: `projectId` plus `status` and/or `goal` (also `name`, `contextPack`, `initiativeId`; `null` detaches the initiative; `doneRequires`, `doneGate`: the project\'s own done policy, `null` back to the workspace\'s). Retry-safe: unchanged fields are returned as they are and `updatedAt` moves only when something changed.',
        body: patchBody,
        response: { ...errors('work-already-claimed'), 200: ok(projectSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'projects:write' } },
    },
    async (request) => {
      const { projectId, contextPack, initiativeId, doneRequires, doneGate, ...rest } = request.body;
      const nullable = { initiativeId, doneRequires, doneGate };
      const clearFields = Object.entries(nullable).flatMap(([k, v]) => (v === null ? [k] : []));
      const setFields = Object.fromEntries(Object.entries(nullable).filter(([, v]) => typeof v === 'string'));
      const result = await projects.updateProject(
        {
          id: projectId,
          ...rest,
          ...setFields,
          ...(contextPack !== undefined ? { contextPack: { items: contextPackInput(contextPack) } } : {}),
          ...(clearFields.length > 0 ? { clearFields } : {}),
        },
        { principal: request.principal },
      );
      if (!result.project) throw new ServiceError('internal', 'Internal error');
      return { data: projectJson(result.project) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/projects/:id',
    {
      schema: { operationId: 'getProject', summary: 'A project', params: idParams, response: { 200: ok(projectSchema) } },
      config: { access: { auth: 'session-or-token', scope: 'projects:read' } },
    },
    async (request) => {
      const result = await projects.getProject({ id: request.params.id }, { principal: request.principal });
      if (!result.project) throw new ServiceError('internal', 'Internal error');
      return { data: projectJson(result.project) };
    },
  );
}
