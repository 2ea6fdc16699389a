import { ServiceError } from '@planning/errors';
import type { GetTaskResponse, SearchTasksResponse } from '@planning/proto/planning/issues/v1/tasks_pb';
import { RenderedResponse, renderedBody } from '@planning/rpc';
import type { FastifyInstance } from 'fastify';
import { ISSUE_DETAIL_VIEW, ISSUE_PAGE_VIEW } from '../views.js';
import { sendJsonBody } from './paging.js';
import type { GatewayDeps } from '../deps.js';
import { component, errors, ok, page, pageInfo } from '../openapi.js';
import {
  activityJson,
  activitySchema,
  dependencyGraphSchema,
  issueDetailSchema,
  issueJson,
  issueSchema,
  reminderItemJson,
  reminderSchema,
  safeActionSchema,
} from './planning-json.js';
import {
  agentIdSchema,
  checksSchema,
  commaList,
  cursorSchema,
  dateSchema,
  fencingTokenSchema,
  idParams,
  idSchema,
  instructionsSchema,
  issuePatchProperties,
  labelsSchema,
  limitSchema,
  overrideSchema,
  PRIORITY_ENUM,
  STATUS_ENUM,
  taskPatch,
  type RestIssueCreate,
  createTaskRequest,
  type RestIssuePatch,
  commaListOf,
  taskFilterProperties,
} from './planning-input.js';


const searchQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    workspaceId: idSchema,
    ...taskFilterProperties,
    includeDependencyGraph: { type: 'boolean' },
    limit: limitSchema,
    cursor: cursorSchema,
  },
} as const;

interface SearchQuery {
  workspaceId?: string;
  projectId?: string;
  milestoneId?: string;
  initiativeId?: string;
  parentId?: string;
  status?: string[];
  priority?: string[];
  label?: string[];
  assignedAgentId?: string;
  dependencyState?: string;
  q?: string;
  sort?: string;
  direction?: string;
  includeDependencyGraph?: boolean;
  limit?: number;
  cursor?: string;
}

const createBody = {
  type: 'object',
  required: ['projectId', 'title'],
  examples: [
    {
      projectId: 'prj_01J0EXAMPLE',
      title: 'Parse the import envelope',
      priority: 'high',
      labels: ['imports'],
      agent: { instructions: { objective: 'Accept the current envelope', expectedOutput: 'A merged change', verification: ['pnpm test'] } },
    },
  ],
  additionalProperties: false,
  properties: {
    workspaceId: idSchema,
    projectId: idSchema,
    title: { type: 'string', minLength: 1, maxLength: 300 },
    description: { type: 'string', maxLength: 20000 },
    status: { type: 'string', enum: STATUS_ENUM },
    priority: { type: 'string', enum: PRIORITY_ENUM },
    labels: labelsSchema,
    milestoneId: idSchema,
    initiativeId: idSchema,
    parentId: idSchema,
    dueDate: dateSchema,
    estimate: { type: 'number', minimum: 0, maximum: 10000 },
    dependencies: { type: 'array', maxItems: 50, items: idSchema },
    acceptanceChecks: checksSchema,
    agent: {
      type: 'object',
      additionalProperties: false,
      properties: { assignedAgentId: agentIdSchema, instructions: instructionsSchema },
    },
  },
} as const;

type CreateBody = RestIssueCreate;

const patchBody = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  examples: [{ status: 'in-review', priority: 'high', version: 3 }],
  properties: {
    ...issuePatchProperties,
    version: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'Apply only if the issue is still at this version.' },
    fencingToken: fencingTokenSchema,
    override: overrideSchema,
  },
} as const;

const BULK_FIELDS = ['status', 'priority', 'labels', 'milestoneId', 'dueDate', 'estimate', 'agent'] as const;

const bulkBody = {
  type: 'object',
  required: ['issueIds', 'mode', 'patch'],
  additionalProperties: false,
  properties: {
    issueIds: { type: 'array', minItems: 1, maxItems: 200, items: idSchema },
    mode: { type: 'string', enum: ['preview', 'apply'] },
    patch: {
      type: 'object',
      additionalProperties: false,
      minProperties: 1,
      properties: {
        ...Object.fromEntries(BULK_FIELDS.map((f) => [f, issuePatchProperties[f]])),
        agent: { type: 'object', additionalProperties: false, properties: { assignedAgentId: issuePatchProperties.agent.properties.assignedAgentId } },
      },
    },
    fencingToken: fencingTokenSchema,
    override: overrideSchema,
  },
} as const;

const remindersQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    workspaceId: idSchema,
    projectId: idSchema,
    assignedAgentId: agentIdSchema,
    kind: commaListOf('reminder kinds', ['missing-dates', 'stale-update', 'missing-time', 'overdue']),
    limit: limitSchema,
    cursor: cursorSchema,
  },
} as const;

export const reminderItemSchema = component('ReminderItem', {
  type: 'object',
  required: ['issueId', 'workspaceId', 'title', 'status', 'priority', 'dueDate', 'reminders', 'safeNextActions'],
  properties: {
    issueId: { type: 'string' },
    workspaceId: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'string' },
    priority: { type: 'string' },
    dueDate: { type: ['string', 'null'] },
    reminders: { type: 'array', items: reminderSchema },
    safeNextActions: { type: 'array', items: safeActionSchema },
  },
});

export const searchResponse = {
  description: 'A page of issues (with `dependencyGraph` when asked for)',
  type: 'object',
  required: ['data', 'page'],
  properties: {
    data: {
      type: 'object',
      required: ['issues'],
      properties: { issues: { type: 'array', items: issueSchema }, dependencyGraph: dependencyGraphSchema },
    },
    page: pageInfo,
  },
} as const;

const bulkResponse = ok({
  type: 'object',
  required: ['plan', 'updatedIssues', 'activity', 'applied'],
  properties: {
    plan: {
      type: 'object',
      required: ['requestedCount', 'targetCount', 'skippedCount', 'changedFieldLabels'],
      properties: {
        requestedCount: { type: 'integer' },
        targetCount: { type: 'integer' },
        skippedCount: { type: 'integer' },
        changedFieldLabels: { type: 'array', items: { type: 'string' } },
      },
    },
    updatedIssues: { type: 'array', items: issueSchema },
    activity: { type: 'array', items: activitySchema },
    applied: { type: 'boolean' },
  },
});

/** Tasks ("issues" on the wire): search, create, read, change, bulk update and reminders. */
/** `PATCH /api/issues/{id}` (and the MCP tools that change a task): the issue and the fields that changed. */
export const issueChangeResponse = {
  type: 'object',
  required: ['data', 'meta'],
  properties: { data: issueSchema, meta: { type: 'object', required: ['changedFields'], properties: { changedFields: { type: 'array', items: { type: 'string' } } } } },
} as const;

export async function issueRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const tasks = deps.rpc.tasks;

  app.get<{ Querystring: SearchQuery }>(
    '/api/issues',
    {
      schema: {
        operationId: 'searchIssues',
        summary: 'Search issues',
        description:
          'Every filter narrows; `status`, `priority` and `label` take comma-separated lists. Sorted by `sort` (default `priority`) and `direction`; pages by `limit` and `cursor`. Each issue carries `taskHealth`.',
        querystring: searchQuery,
        response: { 200: searchResponse },
      },
      config: { access: { auth: 'session-or-token', scope: 'issues:read' } },
    },
    async (request, reply) => {
      const q = request.query;
      const result: SearchTasksResponse | RenderedResponse = await tasks.searchTasks(
        {
          workspaceId: q.workspaceId,
          projectId: q.projectId,
          milestoneId: q.milestoneId,
          initiativeId: q.initiativeId,
          parentId: q.parentId,
          status: commaList(q.status),
          priority: commaList(q.priority),
          labels: commaList(q.label),
          assignedAgentId: q.assignedAgentId,
          dependencyState: q.dependencyState,
          q: q.q,
          sort: q.sort,
          direction: q.direction,
          includeDependencyGraph: q.includeDependencyGraph ?? false,
          limit: q.limit,
          cursor: q.cursor,
        },
        // A page of up to 200 issues: the services' thread renders it (see views.ts).
        { principal: request.principal, view: ISSUE_PAGE_VIEW },
      );
      // The page's buffer goes back to the services' thread once the socket has it all.
      if (result instanceof RenderedResponse) result.recycleWhenSent(reply.raw);
      return sendJsonBody(reply, renderedBody(ISSUE_PAGE_VIEW, result));
    },
  );

  app.post<{ Body: CreateBody }>(
    '/api/issues',
    {
      schema: { operationId: 'createIssue', summary: 'Create an issue', body: createBody, response: { ...errors('quota-exceeded'), 201: ok(issueSchema, 'The new issue') } },
      config: { access: { auth: 'session-or-token', scope: 'issues:write' } },
    },
    async (request, reply) => {
      const b = request.body;
      const result = await tasks.createTask(createTaskRequest(b),
        { principal: request.principal },
      );
      if (!result.task) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: issueJson(result.task) };
    },
  );

  app.get<{ Querystring: { workspaceId?: string; projectId?: string; assignedAgentId?: string; kind?: string[]; limit?: number; cursor?: string } }>(
    '/api/issues/reminders',
    {
      schema: {
        operationId: 'listReminders',
        summary: 'Open issues with reminders',
        description: 'Missing dates, stale updates, missing time and overdue dates, most urgent issues first, each with `safeNextActions`.',
        querystring: remindersQuery,
        response: { 200: page(reminderItemSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'issues:read' } },
    },
    async (request) => {
      const q = request.query;
      const result = await tasks.listReminders(
        { workspaceId: q.workspaceId, projectId: q.projectId, assignedAgentId: q.assignedAgentId, kinds: commaList(q.kind), limit: q.limit, cursor: q.cursor },
        { principal: request.principal },
      );
      return {
        data: result.items.map(reminderItemJson),
        page: { nextCursor: result.nextCursor ?? null },
      };
    },
  );

  app.post<{ Body: { issueIds: string[]; mode: string; patch: RestIssuePatch; fencingToken?: number; override?: { reason: string } } }>(
    '/api/issues/bulk-update',
    {
      schema: {
        operationId: 'bulkUpdateIssues',
        summary: 'Preview or apply one change to many issues',
        description:
          'At most 200 ids. `preview` never writes. `apply` checks every target first (exists, visible, writable, move allowed, milestone of the issue\'s project) and changes all of them or none; a failure names the failing ids in `error.failedIds`.',
        body: bulkBody,
        response: { ...errors('work-already-claimed'), 200: bulkResponse },
      },
      config: { access: { auth: 'session-or-token', scope: 'issues:write' } },
    },
    async (request) => {
      const { issueIds, mode, patch, fencingToken, override } = request.body;
      const result = await tasks.bulkUpdateTasks({ issueIds, mode, patch: taskPatch(patch), fencingToken, override }, { principal: request.principal });
      return {
        data: {
          plan: {
            requestedCount: result.plan?.requestedCount ?? 0,
            targetCount: result.plan?.targetCount ?? 0,
            skippedCount: result.plan?.skippedCount ?? 0,
            changedFieldLabels: result.plan?.changedFieldLabels ?? [],
          },
          updatedIssues: result.updatedIssues.map(issueJson),
          activity: result.activity.map(activityJson),
          applied: result.applied,
        },
      };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/issues/:id',
    {
      schema: {
        operationId: 'getIssue',
        summary: 'An issue with its next action, comments, activity, evidence, approvals and dependency graph',
        params: idParams,
        response: { 200: ok(issueDetailSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'issues:read' } },
    },
    async (request, reply) => {
      // The services' thread renders the detail (see views.ts), as it does a page.
      const detail: GetTaskResponse | RenderedResponse = await tasks.getTask({ id: request.params.id }, { principal: request.principal, view: ISSUE_DETAIL_VIEW });
      return sendJsonBody(reply, renderedBody(ISSUE_DETAIL_VIEW, detail));
    },
  );

  app.patch<{ Params: { id: string }; Body: RestIssuePatch & { version?: number; fencingToken?: number; override?: { reason: string } } }>(
    '/api/issues/:id',
    {
      schema: {
        operationId: 'updateIssue',
        summary: 'Change an issue',
        description:
          'Only the fields sent change; `null` unsets an optional field. Status moves follow the allowed transitions (409 `invalid-transition` otherwise); moves to done (and in-review, where the done policy says so) need what the policy asks (409 `evidence-missing` with `missingCheckIds`, `approval-pending`, `approval-required`) unless a member sends `override: { reason }` (audited). Agent writes are fenced by their claim (`fencingToken`; docs/claims.md). Retry-safe: the same body twice changes nothing the second time. `meta.changedFields` names what changed.',
        params: idParams,
        body: patchBody,
        response: { ...errors('work-already-claimed'), 200: issueChangeResponse },
      },
      config: { access: { auth: 'session-or-token', scope: 'issues:write' } },
    },
    async (request) => {
      const { version, fencingToken, override, ...body } = request.body;
      const result = await tasks.updateTask(
        { id: request.params.id, patch: taskPatch(body), expectedVersion: version, fencingToken, override },
        { principal: request.principal },
      );
      if (!result.task) throw new ServiceError('internal', 'Internal error');
      return { data: issueJson(result.task), meta: { changedFields: result.changedFields } };
    },
  );
}

