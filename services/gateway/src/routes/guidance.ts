import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { errors, ok, page } from '../openapi.js';
import { agentPreflight, clientBootstrap } from './guidance-agent.js';
import {
  bootstrapSchema,
  contextPackJson,
  contextPackSchema,
  customizationJson,
  customizationSchema,
  documentJson,
  documentSchema,
  hitJson,
  hitSchema,
  launchReadinessJson,
  launchReadinessSchema,
  preflightSchema,
  standardsJson,
  standardsSchema,
} from './guidance-json.js';
import { commaList, cursorSchema, idParams, idSchema, labelsSchema, limitSchema, nullableId, qSchema } from './planning-input.js';

const READ = { access: { auth: 'session-or-token', scope: 'issues:read' } } as const;
const MANAGE = { access: { auth: 'session-or-token', scope: 'admin' } } as const;
const KNOWLEDGE_WRITE = { access: { auth: 'session-or-token', scope: 'projects:write' } } as const;
const AGENT = { access: { auth: 'token', scope: 'issues:read' } } as const;

const version = { type: 'integer', minimum: 0, maximum: 2147483647, description: 'Apply only if still at this version (0: never changed).' } as const;
const shortList = (maxItems: number, maxLength: number) => ({ type: 'array', maxItems, items: { type: 'string', maxLength } }) as const;
const slug = { type: 'string', minLength: 1, maxLength: 40 } as const;

// Bodies are checked for shape here (400 naming the field); the issues service checks every rule again.
const customizationBody = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    enabledViewModes: { type: 'array', minItems: 1, maxItems: 4, items: { type: 'string', enum: ['cards', 'list', 'tags', 'swimlanes'] } },
    defaultViewMode: { type: 'string', enum: ['cards', 'list', 'tags', 'swimlanes'] },
    viewPresets: {
      type: 'array',
      maxItems: 20,
      items: {
        type: 'object',
        required: ['id', 'name', 'viewMode'],
        additionalProperties: false,
        properties: {
          id: slug,
          name: { type: 'string', minLength: 1, maxLength: 200 },
          viewMode: { type: 'string', enum: ['cards', 'list', 'tags', 'swimlanes'] },
          filters: {
            type: 'object',
            additionalProperties: false,
            properties: {
              status: shortList(7, 20),
              priority: shortList(5, 10),
              labels: labelsSchema,
              assignedAgentId: { type: ['string', 'null'], maxLength: 64 },
              projectId: nullableId,
            },
          },
          groupBy: { type: ['string', 'null'], enum: ['status', 'priority', 'label', 'agent', 'project', 'milestone', null] },
          sort: { type: ['string', 'null'], enum: ['priority', 'updatedAt', 'createdAt', 'dueDate', 'title', null] },
          direction: { type: ['string', 'null'], enum: ['asc', 'desc', null] },
        },
      },
    },
    workspaceRules: {
      type: 'array',
      maxItems: 30,
      items: {
        type: 'object',
        required: ['id', 'title'],
        additionalProperties: false,
        properties: {
          id: slug,
          title: { type: 'string', minLength: 1, maxLength: 300 },
          description: { type: 'string', maxLength: 1000 },
          severity: { type: 'string', enum: ['must', 'should'] },
        },
      },
    },
    evidencePolicy: {
      type: 'object',
      additionalProperties: false,
      properties: {
        requiredForDone: { type: 'boolean' },
        minimumItems: { type: 'integer', minimum: 0, maximum: 20 },
        acceptedKinds: { type: 'array', maxItems: 5, items: { type: 'string', enum: ['link', 'log', 'test-result', 'artifact', 'note'] } },
        requireCheckCoverage: { type: 'boolean' },
      },
    },
    handoffPacket: {
      type: 'object',
      additionalProperties: false,
      properties: {
        requiredSections: { type: 'array', maxItems: 12, items: slug },
        template: { type: 'string', maxLength: 5000 },
        postAs: { type: 'string', enum: ['comment', 'evidence'] },
      },
    },
    version,
  },
} as const;

interface CustomizationBody {
  enabledViewModes?: string[];
  defaultViewMode?: string;
  viewPresets?: {
    id: string;
    name: string;
    viewMode: string;
    filters?: { status?: string[]; priority?: string[]; labels?: string[]; assignedAgentId?: string | null; projectId?: string | null };
    groupBy?: string | null;
    sort?: string | null;
    direction?: string | null;
  }[];
  workspaceRules?: { id: string; title: string; description?: string; severity?: string }[];
  evidencePolicy?: { requiredForDone?: boolean; minimumItems?: number; acceptedKinds?: string[]; requireCheckCoverage?: boolean };
  handoffPacket?: { requiredSections?: string[]; template?: string; postAs?: string };
  version?: number;
}

const standardsBody = {
  type: 'object',
  additionalProperties: false,
  description: 'The sections sent replace theirs; an empty body publishes the current (default) standards as they are.',
  properties: {
    summary: { type: 'string', maxLength: 2000 },
    definitionOfDone: shortList(30, 500),
    reviewExpectations: shortList(30, 500),
    evidenceExpectations: shortList(30, 500),
    version,
  },
} as const;

interface StandardsBody {
  summary?: string;
  definitionOfDone?: string[];
  reviewExpectations?: string[];
  evidenceExpectations?: string[];
  version?: number;
}

const documentProperties = {
  title: { type: 'string', minLength: 1, maxLength: 300 },
  body: { type: 'string', maxLength: 50000, description: 'Markdown.' },
  tags: labelsSchema,
  projectId: idSchema,
  initiativeId: idSchema,
  path: { type: 'string', minLength: 1, maxLength: 500 },
  url: { type: 'string', maxLength: 2000 },
} as const;

const createDocumentBody = {
  type: 'object',
  required: ['workspaceId', 'title'],
  additionalProperties: false,
  properties: { workspaceId: idSchema, ...documentProperties },
} as const;

interface DocumentBody {
  workspaceId: string;
  title: string;
  body?: string;
  tags?: string[];
  projectId?: string;
  initiativeId?: string;
  path?: string;
  url?: string;
}

const patchDocumentBody = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    title: documentProperties.title,
    body: documentProperties.body,
    tags: documentProperties.tags,
    projectId: nullableId,
    initiativeId: nullableId,
    path: { type: ['string', 'null'], minLength: 1, maxLength: 500 },
    url: { type: ['string', 'null'], maxLength: 2000 },
    version: { type: 'integer', minimum: 1, maximum: 2147483647 },
  },
} as const;

interface DocumentPatchBody {
  title?: string;
  body?: string;
  tags?: string[];
  projectId?: string | null;
  initiativeId?: string | null;
  path?: string | null;
  url?: string | null;
  version?: number;
}

const searchQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    workspaceId: idSchema,
    q: { ...qSchema, description: 'Words matched literally, case-insensitively, in title, tags and body; every word must match.' },
    tag: { type: 'array', maxItems: 20, items: { type: 'string', maxLength: 1000 }, description: 'Comma-separated tags (any of); may repeat.' },
    projectId: idSchema,
    initiativeId: idSchema,
    limit: limitSchema,
    cursor: cursorSchema,
  },
} as const;

const changed = (data: object) => ({
  type: 'object',
  required: ['data', 'meta'],
  properties: { data, meta: { type: 'object', required: ['changedFields'], properties: { changedFields: { type: 'array', items: { type: 'string' } } } } },
});

/**
 * Guidance: each workspace's customization and working standards, its knowledge documents, a
 * task's context pack, launch readiness, and the bootstrap and preflight of the calling agent.
 * The MCP guidance tools return the same shapes through the same gRPC methods.
 */
export async function guidanceRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const guidance = deps.rpc.guidance;

  app.get<{ Params: { id: string } }>(
    '/api/workspaces/:id/customization',
    {
      schema: {
        operationId: 'getCustomization',
        summary: "The workspace's customization: view modes, presets, setup path, rules, evidence policy, handoff packet",
        description: 'Defaults (`source: default`) until an admin changes it; `adminSetupPath[].done` is computed from the workspace\'s records.',
        params: idParams,
        response: { 200: ok(customizationSchema) },
      },
      config: READ,
    },
    async (request) => {
      const { customization } = await guidance.getWorkspaceCustomization({ workspaceId: request.params.id }, { principal: request.principal });
      return { data: customizationJson(customization) };
    },
  );

  app.patch<{ Params: { id: string }; Body: CustomizationBody }>(
    '/api/workspaces/:id/customization',
    {
      schema: {
        operationId: 'updateCustomization',
        summary: "Change the workspace's customization",
        description:
          'For workspace admins. The sections sent replace theirs (service rules stay fixed; `workspaceRules` are the workspace\'s own). Retry-safe: the same body again changes nothing; `meta.changedFields` names what changed.',
        params: idParams,
        body: customizationBody,
        response: { ...errors('work-already-claimed'), 200: changed(customizationSchema) },
      },
      config: MANAGE,
    },
    async (request) => {
      const b = request.body;
      const { customization, changedFields } = await guidance.updateWorkspaceCustomization(
        {
          workspaceId: request.params.id,
          ...(b.enabledViewModes ? { enabledViewModes: { values: b.enabledViewModes } } : {}),
          ...(b.defaultViewMode !== undefined ? { defaultViewMode: b.defaultViewMode } : {}),
          ...(b.viewPresets
            ? {
                viewPresets: {
                  presets: b.viewPresets.map((p) => ({
                    id: p.id,
                    name: p.name,
                    viewMode: p.viewMode,
                    filters: {
                      status: p.filters?.status ?? [],
                      priority: p.filters?.priority ?? [],
                      labels: p.filters?.labels ?? [],
                      assignedAgentId: p.filters?.assignedAgentId ?? undefined,
                      projectId: p.filters?.projectId ?? undefined,
                    },
                    groupBy: p.groupBy ?? undefined,
                    sort: p.sort ?? undefined,
                    direction: p.direction ?? undefined,
                  })),
                },
              }
            : {}),
          ...(b.workspaceRules
            ? { workspaceRules: { rules: b.workspaceRules.map((r) => ({ id: r.id, title: r.title, description: r.description ?? '', severity: r.severity ?? '', enforcedBy: 'workspace' })) } }
            : {}),
          ...(b.evidencePolicy
            ? {
                evidencePolicy: {
                  requiredForDone: b.evidencePolicy.requiredForDone ?? false,
                  minimumItems: b.evidencePolicy.minimumItems ?? 0,
                  acceptedKinds: b.evidencePolicy.acceptedKinds ?? ['link', 'log', 'test-result', 'artifact', 'note'],
                  requireCheckCoverage: b.evidencePolicy.requireCheckCoverage ?? false,
                },
              }
            : {}),
          ...(b.handoffPacket
            ? { handoffPacket: { requiredSections: b.handoffPacket.requiredSections ?? [], template: b.handoffPacket.template ?? '', postAs: b.handoffPacket.postAs ?? '' } }
            : {}),
          expectedVersion: b.version,
        },
        { principal: request.principal },
      );
      return { data: customizationJson(customization), meta: { changedFields } };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/workspaces/:id/standards',
    {
      schema: {
        operationId: 'getStandards',
        summary: "The workspace's published working standards",
        description: 'Definition of done, review and evidence expectations; the defaults (`source: default`) until an admin publishes the workspace\'s own.',
        params: idParams,
        response: { 200: ok(standardsSchema) },
      },
      config: READ,
    },
    async (request) => {
      const { standards } = await guidance.getWorkingStandards({ workspaceId: request.params.id }, { principal: request.principal });
      return { data: standardsJson(standards) };
    },
  );

  app.patch<{ Params: { id: string }; Body: StandardsBody }>(
    '/api/workspaces/:id/standards',
    {
      schema: {
        operationId: 'publishStandards',
        summary: "Publish the workspace's working standards",
        description: 'For workspace admins. Retry-safe; `meta.changedFields` names what changed.',
        params: idParams,
        body: standardsBody,
        response: { ...errors('work-already-claimed'), 200: changed(standardsSchema) },
      },
      config: MANAGE,
    },
    async (request) => {
      const b = request.body;
      const { standards, changedFields } = await guidance.updateWorkingStandards(
        {
          workspaceId: request.params.id,
          summary: b.summary,
          ...(b.definitionOfDone ? { definitionOfDone: { values: b.definitionOfDone } } : {}),
          ...(b.reviewExpectations ? { reviewExpectations: { values: b.reviewExpectations } } : {}),
          ...(b.evidenceExpectations ? { evidenceExpectations: { values: b.evidenceExpectations } } : {}),
          expectedVersion: b.version,
        },
        { principal: request.principal },
      );
      return { data: standardsJson(standards), meta: { changedFields } };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/workspaces/:id/launch-readiness',
    {
      schema: {
        operationId: 'getLaunchReadiness',
        summary: 'Launch readiness of the workspace, with its open launch blockers',
        description:
          'Issues labelled `launch-blocker` are launch blockers, evidence records proof packets (DECISIONS §10): the numbers `/api/admin/diagnostics` shows, for one workspace, readable by any member.',
        params: idParams,
        response: { 200: ok(launchReadinessSchema) },
      },
      config: READ,
    },
    async (request) => {
      const result = await guidance.getLaunchReadiness({ workspaceId: request.params.id }, { principal: request.principal });
      return { data: launchReadinessJson(result) };
    },
  );

  app.get<{ Querystring: { workspaceId?: string; q?: string; tag?: string[]; projectId?: string; initiativeId?: string; limit?: number; cursor?: string } }>(
    '/api/knowledgebase',
    {
      schema: {
        operationId: 'searchKnowledge',
        summary: "Search or list the workspace's knowledge documents",
        description: 'Best match first with `q` (title words count 3, tags 2, body 1), else newest change first. A token searches its own workspace by default.',
        querystring: searchQuery,
        response: { 200: page(hitSchema) },
      },
      config: READ,
    },
    async (request) => {
      const q = request.query;
      const result = await guidance.searchKnowledgeDocuments(
        { workspaceId: q.workspaceId, q: q.q, tags: commaList(q.tag), projectId: q.projectId, initiativeId: q.initiativeId, limit: q.limit, cursor: q.cursor },
        { principal: request.principal },
      );
      return { data: result.hits.map(hitJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Body: DocumentBody }>(
    '/api/knowledgebase',
    {
      schema: { operationId: 'createKnowledgeDocument', summary: 'Add a knowledge document', description: 'For workspace admins.', body: createDocumentBody, response: { 201: ok(documentSchema) } },
      config: KNOWLEDGE_WRITE,
    },
    async (request, reply) => {
      const b = request.body;
      const { document } = await guidance.createKnowledgeDocument({ ...b, body: b.body ?? '', tags: b.tags ?? [] }, { principal: request.principal });
      void reply.status(201);
      return { data: documentJson(document) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/knowledgebase/:id',
    { schema: { operationId: 'getKnowledgeDocument', summary: 'A knowledge document', params: idParams, response: { 200: ok(documentSchema) } }, config: READ },
    async (request) => {
      const { document } = await guidance.getKnowledgeDocument({ id: request.params.id }, { principal: request.principal });
      return { data: documentJson(document) };
    },
  );

  app.patch<{ Params: { id: string }; Body: DocumentPatchBody }>(
    '/api/knowledgebase/:id',
    {
      schema: {
        operationId: 'updateKnowledgeDocument',
        summary: 'Change a knowledge document',
        description: 'For workspace admins. Only the fields sent change; `null` unsets projectId, initiativeId, path or url. Retry-safe.',
        params: idParams,
        body: patchDocumentBody,
        response: { ...errors('work-already-claimed'), 200: changed(documentSchema) },
      },
      config: KNOWLEDGE_WRITE,
    },
    async (request) => {
      const { version: expectedVersion, ...b } = request.body;
      const clearFields = (['projectId', 'initiativeId', 'path', 'url'] as const).filter((f) => b[f] === null);
      const { document, changedFields } = await guidance.updateKnowledgeDocument(
        {
          id: request.params.id,
          title: b.title,
          body: b.body,
          ...(b.tags ? { tags: { values: b.tags } } : {}),
          projectId: b.projectId ?? undefined,
          initiativeId: b.initiativeId ?? undefined,
          path: b.path ?? undefined,
          url: b.url ?? undefined,
          clearFields,
          expectedVersion,
        },
        { principal: request.principal },
      );
      return { data: documentJson(document), meta: { changedFields } };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/knowledgebase/:id',
    { schema: { operationId: 'deleteKnowledgeDocument', summary: 'Delete a knowledge document', description: 'For workspace admins.', params: idParams, response: { 200: ok(documentSchema, 'The deleted document') } }, config: KNOWLEDGE_WRITE },
    async (request) => {
      const { document } = await guidance.deleteKnowledgeDocument({ id: request.params.id }, { principal: request.principal });
      return { data: documentJson(document) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/issues/:id/context-pack',
    {
      schema: {
        operationId: 'getContextPack',
        summary: "An issue's context pack",
        description: "The files, docs and links attached to the issue's project and initiative (the issue's own, else its project's), and the knowledge documents linked to either.",
        params: idParams,
        response: { 200: ok(contextPackSchema) },
      },
      config: READ,
    },
    async (request) => {
      const result = await guidance.getContextPack({ issueId: request.params.id }, { principal: request.principal });
      return { data: contextPackJson(result) };
    },
  );

  app.get(
    '/api/agents/bootstrap',
    {
      schema: {
        operationId: 'getAgentBootstrap',
        summary: 'The calling agent: identity, workspace, scopes, rate limit and the recommended call order',
        response: { 200: ok(bootstrapSchema) },
      },
      config: AGENT,
    },
    async (request) => ({ data: await clientBootstrap(deps, request.principal) }),
  );

  app.get(
    '/api/agents/preflight',
    {
      schema: {
        operationId: 'getAgentPreflight',
        summary: "The calling agent's preflight: firstSessionDecision and the checks behind it",
        description: 'Checks: scopes, API request quota, agent-run budget, the claim the agent holds, approval requests pending on its tasks, claimable ready work.',
        response: { 200: ok(preflightSchema) },
      },
      config: AGENT,
    },
    async (request) => ({ data: await agentPreflight(deps, request.principal) }),
  );
}
