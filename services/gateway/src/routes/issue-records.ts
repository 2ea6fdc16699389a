import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { ok, page, errors } from '../openapi.js';
import {
  activityJson,
  activitySchema,
  APPROVAL_FOR,
  APPROVAL_STATUS,
  approvalJson,
  approvalSchema,
  commentJson,
  commentSchema,
  evidenceJson,
  evidenceSchema,
  timeEntryJson,
  timeEntrySchema,
} from './planning-json.js';
import { cursorSchema, fencingTokenSchema, idParams, idSchema, limitSchema } from './planning-input.js';

const pageQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { limit: limitSchema, cursor: cursorSchema },
} as const;

type PageQuery = { limit?: number; cursor?: string };

const READ = { access: { auth: 'session-or-token', scope: 'issues:read' } } as const;
const WRITE = { access: { auth: 'session-or-token', scope: 'issues:write' } } as const;

/** `POST /api/issues/{id}/time-entries`: the entry and the task's new total. */
export const timeLoggedResponse = {
  type: 'object',
  required: ['data'],
  properties: { data: { type: 'object', required: ['timeEntry', 'totalMinutes'], properties: { timeEntry: timeEntrySchema, totalMinutes: { type: 'integer' } } } },
} as const;

/**
 * What accumulates on an issue: comments, time entries, evidence, approval requests (and their
 * decisions) and the activity trail. Lists are oldest first.
 */
export async function issueRecordRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const records = deps.rpc.taskRecords;

  app.post<{ Params: { id: string }; Body: { body: string; fencingToken?: number } }>(
    '/api/issues/:id/comments',
    {
      schema: {
        operationId: 'addComment',
        summary: 'Comment on an issue',
        description:
          'An agent that lost its claim (expired, or taken over) may still comment, so it can say what happened; under another agent\'s active claim it gets 409 `active-claim`, and a stale `fencingToken` 409 `stale-claim`.',
        params: idParams,
        body: {
          type: 'object',
          required: ['body'],
          examples: [{ body: 'The envelope parser now rejects unknown schema versions.', fencingToken: 2 }],
          additionalProperties: false,
          properties: { body: { type: 'string', minLength: 1, maxLength: 10000 }, fencingToken: fencingTokenSchema },
        },
        response: { 201: ok(commentSchema) },
      },
      config: WRITE,
    },
    async (request, reply) => {
      const { comment } = await records.addComment(
        { issueId: request.params.id, body: request.body.body, fencingToken: request.body.fencingToken },
        { principal: request.principal },
      );
      if (!comment) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: commentJson(comment) };
    },
  );

  app.get<{ Params: { id: string }; Querystring: PageQuery }>(
    '/api/issues/:id/comments',
    { schema: { operationId: 'listComments', summary: "An issue's comments", params: idParams, querystring: pageQuery, response: { 200: page(commentSchema) } }, config: READ },
    async (request) => {
      const result = await records.listComments({ issueId: request.params.id, ...request.query }, { principal: request.principal });
      return { data: result.comments.map(commentJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Params: { id: string }; Body: { minutes: number; note?: string; loggedAt?: string; fencingToken?: number } }>(
    '/api/issues/:id/time-entries',
    {
      schema: {
        operationId: 'logTime',
        summary: 'Log time on an issue',
        params: idParams,
        body: {
          type: 'object',
          required: ['minutes'],
          examples: [{ minutes: 45, note: 'Paired on the parser', fencingToken: 2 }],
          additionalProperties: false,
          properties: {
            minutes: { type: 'integer', minimum: 1, maximum: 1440 },
            note: { type: 'string', maxLength: 1000 },
            loggedAt: { type: 'string', format: 'date-time', maxLength: 40, description: 'When the work was done (default: now).' },
            fencingToken: fencingTokenSchema,
          },
        },
        response: { 201: timeLoggedResponse },
      },
      config: WRITE,
    },
    async (request, reply) => {
      const result = await records.logTime({ issueId: request.params.id, ...request.body }, { principal: request.principal });
      if (!result.timeEntry) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: { timeEntry: timeEntryJson(result.timeEntry), totalMinutes: result.totalMinutes } };
    },
  );

  app.get<{ Params: { id: string }; Querystring: PageQuery }>(
    '/api/issues/:id/time-entries',
    {
      schema: {
        operationId: 'listTimeEntries',
        summary: "An issue's time entries",
        params: idParams,
        querystring: pageQuery,
        response: {
          200: {
            type: 'object',
            required: ['data', 'page', 'meta'],
            properties: {
              data: { type: 'array', items: timeEntrySchema },
              page: { type: 'object', required: ['nextCursor'], properties: { nextCursor: { type: ['string', 'null'] } } },
              meta: { type: 'object', required: ['totalMinutes'], properties: { totalMinutes: { type: 'integer' } } },
            },
          },
        },
      },
      config: READ,
    },
    async (request) => {
      const result = await records.listTimeEntries({ issueId: request.params.id, ...request.query }, { principal: request.principal });
      return { data: result.timeEntries.map(timeEntryJson), page: { nextCursor: result.nextCursor ?? null }, meta: { totalMinutes: result.totalMinutes } };
    },
  );

  app.post<{ Params: { id: string }; Body: { kind: string; title: string; url?: string; body?: string; checkId?: string; fencingToken?: number } }>(
    '/api/issues/:id/evidence',
    {
      schema: {
        operationId: 'addEvidence',
        summary: 'Attach evidence (proof) to an issue',
        description:
          'Evidence naming an acceptance check (`checkId`) marks that check done; under a done policy of `evidence` or `evidence-and-approval`, every check needs evidence naming it before done.',
        params: idParams,
        body: {
          type: 'object',
          required: ['kind', 'title'],
          examples: [{ kind: 'test-result', title: 'pnpm test: 412 passed', url: 'https://ci.example.com/runs/1234', checkId: 'chk_01J0EXAMPLE', fencingToken: 2 }],
          additionalProperties: false,
          properties: {
            kind: { type: 'string', enum: ['link', 'log', 'test-result', 'artifact', 'note'] },
            title: { type: 'string', minLength: 1, maxLength: 300 },
            url: { type: 'string', maxLength: 2000 },
            body: { type: 'string', maxLength: 20000 },
            checkId: idSchema,
            fencingToken: fencingTokenSchema,
          },
        },
        response: { 201: ok(evidenceSchema) },
      },
      config: WRITE,
    },
    async (request, reply) => {
      const { evidence } = await records.addEvidence({ issueId: request.params.id, ...request.body }, { principal: request.principal });
      if (!evidence) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: evidenceJson(evidence) };
    },
  );

  app.get<{ Params: { id: string }; Querystring: PageQuery }>(
    '/api/issues/:id/evidence',
    { schema: { operationId: 'listEvidence', summary: "An issue's evidence", params: idParams, querystring: pageQuery, response: { 200: page(evidenceSchema) } }, config: READ },
    async (request) => {
      const result = await records.listEvidence({ issueId: request.params.id, ...request.query }, { principal: request.principal });
      return { data: result.evidence.map(evidenceJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Params: { id: string }; Body: { reason: string; for?: string; fencingToken?: number } }>(
    '/api/issues/:id/approvals',
    {
      schema: {
        operationId: 'requestApproval',
        summary: 'Request an approval on an issue',
        description:
          '`for` names what it gates: `done` or `in-review` (that move is refused with 409 `approval-pending` until a member decides the request or it expires, after `APPROVAL_TTL_SECONDS`, 7 days by default), or `merge` / `custom` (default) for steps outside the service.',
        params: idParams,
        body: {
          type: 'object',
          required: ['reason'],
          additionalProperties: false,
          properties: {
            reason: { type: 'string', minLength: 1, maxLength: 2000 },
            for: { type: 'string', enum: APPROVAL_FOR },
            fencingToken: fencingTokenSchema,
          },
        },
        response: { 201: ok(approvalSchema) },
      },
      config: WRITE,
    },
    async (request, reply) => {
      const { approval } = await records.requestApproval(
        { issueId: request.params.id, reason: request.body.reason, approvalFor: request.body.for, fencingToken: request.body.fencingToken },
        { principal: request.principal },
      );
      if (!approval) throw new ServiceError('internal', 'Internal error');
      void reply.status(201);
      return { data: approvalJson(approval) };
    },
  );

  app.get<{ Params: { id: string }; Querystring: PageQuery & { status?: string } }>(
    '/api/issues/:id/approvals',
    {
      schema: {
        operationId: 'listApprovals',
        summary: "An issue's approval requests",
        params: idParams,
        querystring: { ...pageQuery, properties: { ...pageQuery.properties, status: { type: 'string', enum: APPROVAL_STATUS } } },
        response: { 200: page(approvalSchema) },
      },
      config: READ,
    },
    async (request) => {
      const result = await records.listApprovals({ issueId: request.params.id, ...request.query }, { principal: request.principal });
      return { data: result.approvals.map(approvalJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );

  app.post<{ Params: { id: string; approvalId: string }; Body: { decision: string; note?: string } }>(
    '/api/issues/:id/approvals/:approvalId/decision',
    {
      schema: {
        operationId: 'decideApproval',
        summary: 'Approve or reject a pending approval request',
        description:
          'For signed-in members (and up) of the workspace, never a token; a request is decided once, and not after it expired (409 `invalid-transition`). Deciding releases the move it gated; the requesting agent sees the decision on the task (ready work, preflight, heartbeats).',
        params: { type: 'object', required: ['id', 'approvalId'], properties: { id: idSchema, approvalId: idSchema } },
        body: {
          type: 'object',
          required: ['decision'],
          additionalProperties: false,
          properties: { decision: { type: 'string', enum: ['approved', 'rejected'] }, note: { type: 'string', maxLength: 1000 } },
        },
        response: { ...errors('work-already-claimed'), 200: ok(approvalSchema) },
      },
      config: { access: { auth: 'session' } },
    },
    async (request) => {
      const { approval } = await records.decideApproval(
        { issueId: request.params.id, approvalId: request.params.approvalId, ...request.body },
        { principal: request.principal },
      );
      if (!approval) throw new ServiceError('internal', 'Internal error');
      return { data: approvalJson(approval) };
    },
  );

  app.get<{ Params: { id: string }; Querystring: PageQuery }>(
    '/api/issues/:id/activity',
    { schema: { operationId: 'listActivity', summary: "An issue's activity trail", params: idParams, querystring: pageQuery, response: { 200: page(activitySchema) } }, config: READ },
    async (request) => {
      const result = await records.listActivity({ issueId: request.params.id, ...request.query }, { principal: request.principal });
      return { data: result.activity.map(activityJson), page: { nextCursor: result.nextCursor ?? null } };
    },
  );
}
