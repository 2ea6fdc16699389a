/**
 * The claim tools: the agents-claims service's ClaimService methods that the REST routes under
 * /api/agents call, with those routes' body mappers, so each result is the REST
 * response body: list_ready_work = GET /api/agents/ready-work (ListReadyWork),
 * claim_work = POST /api/agents/claim (ClaimWork), post_status = POST
 * /api/agents/claims/{issueId}/status (PostStatus), cancel_work = POST
 * /api/agents/claims/{issueId}/release (ReleaseClaim).
 */
import { claimAndIssueBody, claimWorkBody, readyWorkBody, statusPostBody } from '../routes/agents.js';
import { MCP_DEFAULT_LIMIT } from './catalog.js';
import type { ToolHandler } from './tool-context.js';

export const claimToolHandlers: Record<string, ToolHandler> = {
  list_ready_work: async (a, ctx) =>
    readyWorkBody(await ctx.deps.rpc.claims.listReadyWork({ limit: a.limit ?? MCP_DEFAULT_LIMIT, cursor: a.cursor }, { principal: ctx.principal })),
  claim_work: async (a, ctx) => {
    const res = await ctx.deps.rpc.claims.claimWork(
      { issueId: a.issueId, ...(a.idempotencyKey !== undefined ? { idempotencyKey: a.idempotencyKey } : {}) },
      { principal: ctx.principal },
    );
    return claimWorkBody(res, a.issueId);
  },
  post_status: async (a, ctx) =>
    statusPostBody(await ctx.deps.rpc.claims.postStatus({ issueId: a.issueId, message: a.message, fencingToken: a.fencingToken }, { principal: ctx.principal }), a.issueId),
  cancel_work: async (a, ctx) =>
    claimAndIssueBody(await ctx.deps.rpc.claims.releaseClaim({ issueId: a.issueId, fencingToken: a.fencingToken }, { principal: ctx.principal }), a.issueId),
};
