/**
 * Agents and claims (API document endpoints 15–16, DECISIONS §7): ready work, claims, heartbeats,
 * status posts, release, the claim list and each workspace's lease policy. Every rule lives in
 * the agents-claims service (the MCP tools call the same methods); these routes translate HTTP to
 * gRPC and back.
 */
import type { MessageShape } from '@bufbuild/protobuf';
import { invalidInput, ServiceError } from '@planning/errors';
import type {
  ClaimPolicySchema,
  ClaimSchema,
  ClaimWorkResponse,
  ListReadyWorkResponse,
  MeteringSchema,
  PostStatusResponse,
  ReadyWorkItemSchema,
  ReleaseClaimResponse,
  RenewClaimResponse,
} from '@planning/proto/planning/claims/v1/claims_pb';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { component, errors, ok, page, pageInfo } from '../openapi.js';
import { agentIdSchema, cursorSchema, idSchema, limitSchema } from './planning-input.js';
import { approvalGateJson, approvalGateSchema, issueStatusSchema } from './planning-json.js';

const CLAIM_STATES = ['starting', 'active', 'released', 'completed', 'expired', 'aborted'] as const;

// ---- JSON shapes ---------------------------------------------------------------------------------

const str = { type: 'string' } as const;
const nullableStr = { type: ['string', 'null'] } as const;
const int = { type: 'integer' } as const;

export const claimSchema = component('Claim', {
  type: 'object',
  required: ['id', 'workspaceId', 'issueId', 'agentId', 'state', 'fencingToken', 'expiresAt', 'leaseSeconds', 'createdAt', 'renewedAt', 'endedAt', 'endReason'],
  properties: {
    id: str,
    workspaceId: str,
    issueId: str,
    agentId: str,
    state: { type: 'string', enum: [...CLAIM_STATES] },
    fencingToken: { ...int, description: 'Grows with every claim of the task; send it with writes under the claim.' },
    expiresAt: { type: 'string', format: 'date-time', description: 'The claim is expired from this instant on.' },
    leaseSeconds: int,
    createdAt: { type: 'string', format: 'date-time' },
    renewedAt: nullableStr,
    endedAt: nullableStr,
    endReason: nullableStr,
  },
});

export function claimJson(c: MessageShape<typeof ClaimSchema> | undefined) {
  if (!c) throw new ServiceError('internal', 'Internal error');
  return {
    id: c.id,
    workspaceId: c.workspaceId,
    issueId: c.issueId,
    agentId: c.agentId,
    state: c.state,
    fencingToken: c.fencingToken,
    expiresAt: c.expiresAt,
    leaseSeconds: c.leaseSeconds,
    createdAt: c.createdAt,
    renewedAt: c.renewedAt ?? null,
    endedAt: c.endedAt ?? null,
    endReason: c.endReason ?? null,
  };
}

const meteringSchema = component('Metering', {
  type: 'object',
  required: ['allowed', 'kind', 'used', 'limit', 'period', 'resetsAt'],
  properties: {
    allowed: { type: 'boolean' },
    kind: str,
    used: int,
    limit: { type: ['integer', 'null'], description: 'null: unlimited.' },
    period: str,
    resetsAt: { type: 'string', format: 'date-time' },
  },
});

export function meteringJson(m: MessageShape<typeof MeteringSchema> | undefined) {
  if (!m) throw new ServiceError('internal', 'Internal error');
  return { allowed: m.allowed, kind: m.kind, used: m.used, limit: m.limit ?? null, period: m.period, resetsAt: m.resetsAt };
}

const issueRefSchema = issueStatusSchema;

/** A heartbeat's or status post's task: with its approval requests, so the holder sees decisions. */
const heldIssueSchema = {
  type: 'object',
  required: ['id', 'status', 'approvals'],
  properties: { id: str, status: str, approvals: { type: 'array', items: approvalGateSchema, description: 'Pending requests, and the latest decided per `for`.' } },
} as const;

const readyItemSchema = component('ReadyWorkItem', {
  type: 'object',
  required: ['id', 'workspaceId', 'projectId', 'title', 'status', 'priority', 'labels', 'dueDate', 'createdAt', 'agent', 'openDependencyCount', 'rank', 'agentClaimQueue', 'claim', 'approvals'],
  properties: {
    id: str,
    workspaceId: str,
    projectId: str,
    title: str,
    status: str,
    priority: str,
    labels: { type: 'array', items: str },
    dueDate: nullableStr,
    createdAt: str,
    agent: { type: 'object', required: ['assignedAgentId', 'readiness'], properties: { assignedAgentId: nullableStr, readiness: str } },
    openDependencyCount: int,
    rank: { ...int, description: 'Position in the queue (1 is next); 0 for the task you hold.' },
    agentClaimQueue: {
      type: 'object',
      required: ['state', 'quotaState', 'nextAction', 'doneEvidence', 'whyNotClaimable'],
      properties: {
        state: { type: 'string', enum: ['claimable', 'blocked', 'claimed'] },
        quotaState: { type: 'string', enum: ['within-run-budget', 'run-budget-exhausted'] },
        nextAction: str,
        doneEvidence: {
          type: 'object',
          required: ['completed', 'total', 'requires', 'missingCheckIds', 'approval', 'ready'],
          description: 'Acceptance checks done over all, and what the done policy still needs (docs/planning.md).',
          properties: {
            completed: int,
            total: int,
            requires: { type: 'string', enum: ['nothing', 'evidence', 'evidence-and-approval'] },
            missingCheckIds: { type: 'array', items: str, description: 'Checks no evidence names yet.' },
            approval: { type: 'string', enum: ['not-required', 'missing', 'pending', 'approved', 'rejected'] },
            ready: { type: 'boolean', description: 'The moves the policy gates would pass now.' },
          },
        },
        whyNotClaimable: {
          type: ['object', 'null'],
          description: 'Why a claim would fail now (dependencies-open, active-claim, held-by-you, agent-busy, run-budget-exhausted); null when it would succeed.',
          required: ['reason', 'message'],
          properties: { reason: str, message: str },
        },
      },
    },
    claim: { anyOf: [claimSchema, { type: 'null' }], description: 'Your claim on this task, if you hold it.' },
    approvals: { type: 'array', items: approvalGateSchema, description: "The task's approval requests: pending ones, and the latest decided per `for`." },
  },
});

function readyItemJson(i: MessageShape<typeof ReadyWorkItemSchema>) {
  const q = i.agentClaimQueue;
  return {
    id: i.id,
    workspaceId: i.workspaceId,
    projectId: i.projectId,
    title: i.title,
    status: i.status,
    priority: i.priority,
    labels: i.labels,
    dueDate: i.dueDate ?? null,
    createdAt: i.createdAt,
    agent: { assignedAgentId: i.assignedAgentId ?? null, readiness: i.readiness },
    openDependencyCount: i.openDependencyCount,
    rank: i.rank,
    agentClaimQueue: {
      state: q?.state ?? 'claimable',
      quotaState: q?.quotaState ?? 'within-run-budget',
      nextAction: q?.nextAction ?? '',
      doneEvidence: {
        completed: q?.doneEvidence?.completed ?? 0,
        total: q?.doneEvidence?.total ?? 0,
        requires: q?.doneEvidence?.requires || 'nothing',
        missingCheckIds: q?.doneEvidence?.missingCheckIds ?? [],
        approval: q?.doneEvidence?.approval || 'not-required',
        ready: q?.doneEvidence?.ready ?? true,
      },
      whyNotClaimable: q?.whyNotClaimable ? { reason: q.whyNotClaimable.reason, message: q.whyNotClaimable.message } : null,
    },
    claim: i.claim ? claimJson(i.claim) : null,
    approvals: i.approvals.map(approvalGateJson),
  };
}

/*
 * The response bodies of the agent routes, shared with the MCP claim tools (mcp/claim-tools.ts) so
 * a tool's result is the REST body, field for field.
 */
const issueRef = (issue: { id: string; status: string } | undefined, issueId: string) => ({ id: issue?.id ?? issueId, status: issue?.status ?? '' });

export function readyWorkBody(res: ListReadyWorkResponse) {
  const s = res.queueSummary;
  return {
    data: res.items.map(readyItemJson),
    queueSummary: { total: s?.total ?? 0, claimable: s?.claimable ?? 0, blocked: s?.blocked ?? 0, heldByYou: s?.heldByYou ?? 0, quotaState: s?.quotaState ?? 'within-run-budget' },
    claimQueue: res.claimQueue.map((e) => ({ issueId: e.issueId, rank: e.rank, state: e.state })),
    page: { nextCursor: res.nextCursor ?? null },
    metering: meteringJson(res.metering),
  };
}

export function claimWorkBody(res: ClaimWorkResponse, issueId: string) {
  return { data: { claim: claimJson(res.claim), issue: issueRef(res.issue, issueId), metering: meteringJson(res.metering) } };
}

export function claimAndIssueBody(res: ReleaseClaimResponse, issueId: string) {
  return { data: { claim: claimJson(res.claim), issue: issueRef(res.issue, issueId) } };
}

const heldIssue = (issue: RenewClaimResponse['issue'], issueId: string) => ({ ...issueRef(issue, issueId), approvals: (issue?.approvals ?? []).map(approvalGateJson) });

/** A heartbeat (and its MCP twin): the renewed claim, and the task with its approval requests. */
export function heartbeatBody(res: RenewClaimResponse, issueId: string) {
  return { data: { claim: claimJson(res.claim), issue: heldIssue(res.issue, issueId) } };
}

export function statusPostBody(res: PostStatusResponse, issueId: string) {
  return {
    data: {
      claim: claimJson(res.claim),
      issue: heldIssue(res.issue, issueId),
      note: { id: res.note?.id ?? '', body: res.note?.body ?? '', createdAt: res.note?.createdAt ?? '' },
    },
  };
}

const policySchema = component('ClaimPolicy', {
  type: 'object',
  required: ['workspaceId', 'leaseSeconds', 'defaultLeaseSeconds', 'custom', 'updatedAt'],
  properties: { workspaceId: str, leaseSeconds: int, defaultLeaseSeconds: int, custom: { type: 'boolean' }, updatedAt: nullableStr },
});

function policyJson(p: MessageShape<typeof ClaimPolicySchema> | undefined) {
  if (!p) throw new ServiceError('internal', 'Internal error');
  return { workspaceId: p.workspaceId, leaseSeconds: p.leaseSeconds, defaultLeaseSeconds: p.defaultLeaseSeconds, custom: p.custom, updatedAt: p.updatedAt ?? null };
}

// ---- request shapes ------------------------------------------------------------------------------

const issueParams = { type: 'object', required: ['issueId'], properties: { issueId: idSchema } } as const;
const fencingToken = { type: 'integer', minimum: 1, maximum: 2147483647, description: "The claim's fencing token: when sent, it must be the current one (409 stale-claim otherwise)." } as const;
/** Heartbeat and release take an optional body. */
const tokenBody = { type: ['object', 'null'], additionalProperties: false, properties: { fencingToken }, examples: [{ fencingToken: 2 }] } as const;

/** The `idempotency-key` header, if sent once. */
function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw invalidInput('idempotency-key', "Send the 'idempotency-key' header once");
  return raw;
}

const TOKEN_WRITE = { access: { auth: 'token', scope: ['issues:write', 'agents:execute'] } } as const;

/** `GET /api/agents/ready-work` (and `list_ready_work`). */
export const readyWorkResponse = {
  type: 'object',
  required: ['data', 'queueSummary', 'claimQueue', 'page', 'metering'],
  properties: {
    data: { type: 'array', items: readyItemSchema },
    queueSummary: {
      type: 'object',
      required: ['total', 'claimable', 'blocked', 'heldByYou', 'quotaState'],
      properties: { total: int, claimable: int, blocked: int, heldByYou: int, quotaState: str },
    },
    claimQueue: {
      type: 'array',
      items: { type: 'object', required: ['issueId', 'rank', 'state'], properties: { issueId: str, rank: int, state: str } },
    },
    page: pageInfo,
    metering: meteringSchema,
  },
} as const;

/** `POST /api/agents/claim` (and `claim_work`). */
export const claimWorkResponse = ok({ type: 'object', required: ['claim', 'issue', 'metering'], properties: { claim: claimSchema, issue: issueRefSchema, metering: meteringSchema } });

/** Release (and `cancel_work`): the claim and the task's id and status. */
export const claimAndIssueResponse = ok(component('ClaimAndIssue', { type: 'object', required: ['claim', 'issue'], properties: { claim: claimSchema, issue: issueRefSchema } }));

/** Heartbeat: the claim, and the task with its approval requests. */
export const heartbeatResponse = ok({ type: 'object', required: ['claim', 'issue'], properties: { claim: claimSchema, issue: heldIssueSchema } });

/** `POST /api/agents/claims/{issueId}/status` (and `post_status`). */
export const statusPostResponse = ok({
  type: 'object',
  required: ['claim', 'issue', 'note'],
  properties: {
    claim: claimSchema,
    issue: heldIssueSchema,
    note: { type: 'object', required: ['id', 'body', 'createdAt'], properties: { id: str, body: str, createdAt: str } },
  },
});

export async function agentRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const claims = deps.rpc.claims;

  app.get<{ Querystring: { limit?: number; cursor?: string } }>(
    '/api/agents/ready-work',
    {
      schema: {
        operationId: 'listReadyWork',
        summary: 'Ready work for the calling agent',
        description:
          "Tasks of the token's workspace with status `ready`, assigned to the token's agent or to nobody, ranked by priority, then due date, then age; the task the agent holds comes first (rank 0). Each carries `agentClaimQueue` (`state` claimable | blocked | claimed, `quotaState`, `nextAction`, `doneEvidence`, `whyNotClaimable`). Beside `data`: `queueSummary`, `claimQueue` and `metering`.",
        querystring: { type: 'object', additionalProperties: false, properties: { limit: limitSchema, cursor: cursorSchema } },
        response: { 200: readyWorkResponse },
      },
      config: { access: { auth: 'token', scope: 'agents:read' } },
    },
    async (request) => {
      const res = await claims.listReadyWork({ limit: request.query.limit, cursor: request.query.cursor }, { principal: request.principal });
      return readyWorkBody(res);
    },
  );

  app.post<{ Body: { issueId: string } }>(
    '/api/agents/claim',
    {
      schema: {
        operationId: 'claimWork',
        summary: 'Claim a ready task',
        description:
          'Checks, in order: token scopes (403), the task is visible (404), not assigned to another agent (403), `ready` (409 `not-ready`), dependencies done (409 `dependencies-open`), no active claim on it (409 `active-claim`) nor of this agent (409 `agent-busy`), the agent-run quota (403 `quota-exceeded` with `quota`). Success meters one agent run, moves the task to `in-progress` and returns the claim with its `expiresAt` and `fencingToken`. Header `idempotency-key`: the same key and body from the same token within 24 h returns the first response, success or refusal (header `idempotent-replayed: true`); another body 400; while the first is running 409 `idempotency-in-flight`.',
        headers: { type: 'object', properties: { 'idempotency-key': { type: 'string', maxLength: 255 } } },
        body: { type: 'object', required: ['issueId'], additionalProperties: false, properties: { issueId: idSchema }, examples: [{ issueId: 'iss_01J0EXAMPLE' }] },
        response: { ...errors('work-already-claimed'), 200: claimWorkResponse },
      },
      config: TOKEN_WRITE,
    },
    async (request, reply) => {
      const key = idempotencyKeyOf(request);
      let res: ClaimWorkResponse;
      try {
        res = await claims.claimWork({ issueId: request.body.issueId, ...(key !== undefined ? { idempotencyKey: key } : {}) }, { principal: request.principal });
      } catch (err) {
        // A replayed refusal (the first request's 4xx again) says so too.
        if (err instanceof ServiceError && (err.details as { replayed?: unknown }).replayed === true) void reply.header('idempotent-replayed', 'true');
        throw err;
      }
      if (res.replayed) void reply.header('idempotent-replayed', 'true');
      return claimWorkBody(res, request.body.issueId);
    },
  );

  app.post<{ Params: { issueId: string }; Body: { fencingToken?: number } | null | undefined }>(
    '/api/agents/claims/:issueId/heartbeat',
    {
      schema: {
        operationId: 'renewClaim',
        summary: 'Renew your claim (heartbeat)',
        description: 'The lease starts again from now; `issue.approvals` shows the task\'s approval requests and their decisions. 409 `stale-claim` when you hold no active claim on the task (expired, released, completed, taken over) or the fencing token is not the current one.',
        params: issueParams,
        body: tokenBody,
        response: { ...errors('work-already-claimed'), 200: heartbeatResponse },
      },
      config: TOKEN_WRITE,
    },
    async (request) => {
      const res = await claims.renewClaim({ issueId: request.params.issueId, fencingToken: request.body?.fencingToken }, { principal: request.principal });
      return heartbeatBody(res, request.params.issueId);
    },
  );

  app.post<{ Params: { issueId: string }; Body: { message: string; fencingToken?: number } }>(
    '/api/agents/claims/:issueId/status',
    {
      schema: {
        operationId: 'postClaimStatus',
        summary: 'Post a status note under your claim',
        description: 'Records the note on the task (a comment by the agent) and renews the lease. 409 `stale-claim` as for the heartbeat.',
        params: issueParams,
        body: {
          type: 'object',
          required: ['message'],
          examples: [{ message: 'Parser done; writing the tests next', fencingToken: 2 }],
          additionalProperties: false,
          properties: { message: { type: 'string', minLength: 1, maxLength: 10000 }, fencingToken },
        },
        response: { ...errors('work-already-claimed'), 201: statusPostResponse },
      },
      config: TOKEN_WRITE,
    },
    async (request, reply) => {
      const res = await claims.postStatus(
        { issueId: request.params.issueId, message: request.body.message, fencingToken: request.body.fencingToken },
        { principal: request.principal },
      );
      void reply.status(201);
      return statusPostBody(res, request.params.issueId);
    },
  );

  app.post<{ Params: { issueId: string }; Body: { fencingToken?: number } | null | undefined }>(
    '/api/agents/claims/:issueId/release',
    {
      schema: {
        operationId: 'releaseClaim',
        summary: 'Release (cancel) the claim on a task',
        description:
          'The task returns to `ready`. The holding agent (its token) or a workspace member (session) may release; another agent gets 409 `active-claim`; no active claim: 409 `stale-claim`. The agent run is not given back.',
        params: issueParams,
        body: tokenBody,
        response: { ...errors('work-already-claimed'), 200: claimAndIssueResponse },
      },
      config: { access: { auth: 'session-or-token', scope: ['issues:write', 'agents:execute'] } },
    },
    async (request) => {
      const res = await claims.releaseClaim({ issueId: request.params.issueId, fencingToken: request.body?.fencingToken }, { principal: request.principal });
      return claimAndIssueBody(res, request.params.issueId);
    },
  );

  app.get<{ Querystring: { workspaceId?: string; issueId?: string; agentId?: string; state?: string[]; limit?: number; cursor?: string } }>(
    '/api/agents/claims',
    {
      schema: {
        operationId: 'listClaims',
        summary: "A workspace's claims",
        description: 'Newest first; by default the active ones (`starting` and `active`). `state` takes a comma-separated list. A token lists its own workspace.',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            workspaceId: idSchema,
            issueId: idSchema,
            agentId: agentIdSchema,
            state: { type: 'array', maxItems: 6, items: { type: 'string', maxLength: 200 }, description: 'Comma-separated states (any of).' },
            limit: limitSchema,
            cursor: cursorSchema,
          },
        },
        response: { 200: page(claimSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'agents:read' } },
    },
    async (request) => {
      const q = request.query;
      const states = (q.state ?? []).flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean);
      const res = await claims.listClaims(
        { workspaceId: q.workspaceId, issueId: q.issueId, agentId: q.agentId, states, limit: q.limit, cursor: q.cursor },
        { principal: request.principal },
      );
      return { data: res.claims.map(claimJson), page: { nextCursor: res.nextCursor ?? null } };
    },
  );

  app.get<{ Querystring: { workspaceId: string } }>(
    '/api/agents/claim-policy',
    {
      schema: {
        operationId: 'getClaimPolicy',
        summary: "A workspace's claim lease",
        querystring: { type: 'object', required: ['workspaceId'], additionalProperties: false, properties: { workspaceId: idSchema } },
        response: { 200: ok(policySchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'agents:read' } },
    },
    async (request) => {
      const res = await claims.getClaimPolicy({ workspaceId: request.query.workspaceId }, { principal: request.principal });
      return { data: policyJson(res.policy) };
    },
  );

  app.put<{ Body: { workspaceId: string; leaseSeconds: number | null } }>(
    '/api/agents/claim-policy',
    {
      schema: {
        operationId: 'setClaimPolicy',
        summary: "Set a workspace's claim lease",
        description: '`leaseSeconds` from 1 to 86,400, or null for the service default (`CLAIM_LEASE_SECONDS`, 30 minutes unless configured). Applies to claims made or renewed afterwards. Workspace admins (token: `admin`).',
        body: {
          type: 'object',
          required: ['workspaceId', 'leaseSeconds'],
          additionalProperties: false,
          properties: { workspaceId: idSchema, leaseSeconds: { type: ['integer', 'null'], minimum: 1, maximum: 86400 } },
        },
        response: { 200: ok(policySchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const { workspaceId, leaseSeconds } = request.body;
      const res = await claims.setClaimPolicy(
        { workspaceId, ...(leaseSeconds !== null ? { leaseSeconds } : {}) },
        { principal: request.principal },
      );
      return { data: policyJson(res.policy) };
    },
  );
}
