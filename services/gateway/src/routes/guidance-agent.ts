/**
 * What an agent's token learns about itself before it works: the client bootstrap (identity,
 * workspace, scopes, rate limit, the recommended call order) and the agent preflight
 * (`firstSessionDecision` and the checks behind it). Composed from the gateway's own records
 * (the key, its rate limit, the API request meter) and the services' gRPC methods the REST and
 * MCP twins call (ready work and claims, task search, approvals), always as the calling principal.
 */
import { ServiceError } from '@planning/errors';
import { effectiveRateLimit, PLANS, type Scope } from '@planning/plans';
import type { Principal } from '@planning/rpc';
import type { GatewayDeps } from '../deps.js';
import { isGrantId } from '../oauth/grants.js';
import { callOrder, CATALOG, DEFAULT_VIEW, requiredScopes, toolNamed, wireName, type ToolView } from '../mcp/catalog.js';
import { MCP_PATH, PROTOCOL_VERSIONS } from '../mcp/protocol.js';

export const WRITE_SCOPES: readonly Scope[] = ['issues:write', 'agents:execute'];

/** The calling token's workspace and agent; guidance about "you" is for tokens only. */
export function tokenIdentity(principal: Principal): { workspaceId: string; agentId: string; keyId: string } {
  if (principal.type !== 'api-key' || !principal.workspaceId || !principal.keyId) {
    throw new ServiceError('forbidden', 'This endpoint is for API tokens', { reason: 'token-required' });
  }
  return { workspaceId: principal.workspaceId, agentId: principal.agentId ?? '', keyId: principal.keyId };
}

const hasScopes = (principal: Principal, scopes: readonly Scope[]) => scopes.every((s) => principal.scopes.includes(s));

/**
 * What the calling credential says about itself: an API key (its actor type and label), an OAuth
 * grant (a user's integration, labelled with its client), or an external issuer's token.
 */
async function credentialOf(deps: GatewayDeps, keyId: string): Promise<{ actorType: string; label: string; rateLimit: { requestsPerMinute: number; burst: number } } | null> {
  if (isGrantId(keyId)) {
    const grant = await deps.oauth.grants.findById(keyId);
    return grant ? { actorType: 'user-integration', label: grant.clientName ?? grant.clientId, rateLimit: grant.rateLimit } : null;
  }
  if (keyId.startsWith('ext_')) return { actorType: 'user-integration', label: 'external issuer', rateLimit: { requestsPerMinute: Number.MAX_SAFE_INTEGER, burst: Number.MAX_SAFE_INTEGER } };
  return deps.apiKeys.findById(keyId);
}

/**
 * `view`: the MCP tool list the caller reads (`?toolset=core`, `?names=portable`); tools are named
 * as that list names them. REST callers get the full list with the contract's names.
 */
export async function clientBootstrap(deps: GatewayDeps, principal: Principal, view: ToolView = DEFAULT_VIEW) {
  const { workspaceId, agentId, keyId } = tokenIdentity(principal);
  const options = { principal };
  const [key, access, apiRequestsUsed] = await Promise.all([
    credentialOf(deps, keyId),
    deps.workspaceAccess.forToken(principal, workspaceId),
    deps.meter.used(workspaceId, 'api-requests', deps.clock()),
  ]);
  if (!key) throw new ServiceError('unauthorized', 'Invalid API token');
  // Name and slug are project-level facts: shown to tokens that may read projects.
  const workspace = principal.scopes.includes('projects:read') ? (await deps.rpc.workspaces.getWorkspace({ id: workspaceId }, options)).workspace : undefined;
  const plan = PLANS[access.planId];
  const byName = new Map(CATALOG.map((t) => [t.name, t]));
  return {
    identity: { keyId, agentId, actorType: key.actorType, label: key.label },
    workspace: { id: workspaceId, name: workspace?.name ?? null, slug: workspace?.slug ?? null, planId: access.planId, status: access.status },
    scopes: [...principal.scopes],
    rateLimit: effectiveRateLimit(key.rateLimit, access.planId),
    quotas: { apiRequests: { limit: plan.quotas['api-requests'], used: apiRequestsUsed } },
    mcp: {
      endpoint: MCP_PATH,
      protocolVersions: [...PROTOCOL_VERSIONS],
      toolsets: { full: CATALOG.length, core: CATALOG.filter((t) => t.core).length },
      availableTools: CATALOG.filter((t) => hasScopes(principal, requiredScopes(t))).map((t) => wireName(t.name, view.names)),
    },
    recommendedCallOrder: callOrder(view.toolset).map((step, i) => {
      const tool = byName.get(step.tool)!;
      const missing = requiredScopes(tool).filter((s) => !principal.scopes.includes(s));
      return { step: i + 1, tool: wireName(step.tool, view.names), purpose: step.purpose, available: missing.length === 0, missingScopes: missing };
    }),
  };
}

// ---- preflight -------------------------------------------------------------------------------

export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skipped';
export type SessionDecision = 'resume-claim' | 'wait-for-approval' | 'claim-next' | 'no-ready-work' | 'read-only' | 'blocked';

export interface PreflightFacts {
  missingWriteScopes: Scope[];
  apiRequests: { used: number; limit: number | null };
  /** Undefined when the token cannot read the queue (no `agents:read`). */
  queue?: { quotaState: string; claimable: number; total: number; nextIssueId?: string };
  held?: { issueId: string; expiresAt: string; fencingToken: number };
  pendingApprovals: { id: string; issueId: string; reason: string; createdAt: string }[];
}

/**
 * What an agent should do first, and why (the rules in order; first match wins). `nextTool` is a
 * canonical tool the caller's list has, named as that list names it: with `core`, reminders are
 * read through search_issues (each task's taskHealth.firstReminder) since list_issue_reminders is
 * not listed.
 */
export function firstSessionDecision(
  f: PreflightFacts,
  view: ToolView = DEFAULT_VIEW,
): { decision: SessionDecision; reason: string; nextTool: string | null; issueId: string | null } {
  const tool = (name: string) => wireName(name, view.names);
  const reminders = view.toolset === 'full' || toolNamed(wireName('list_issue_reminders'))?.core ? 'list_issue_reminders' : 'search_issues';
  if (f.apiRequests.limit !== null && f.apiRequests.used >= f.apiRequests.limit) {
    return { decision: 'blocked', reason: "The workspace's monthly API request quota is used up.", nextTool: null, issueId: null };
  }
  if (f.held) {
    const waiting = f.pendingApprovals.filter((a) => a.issueId === f.held?.issueId);
    if (waiting.length > 0) {
      return {
        decision: 'wait-for-approval',
        reason: `Your claimed task has ${waiting.length} pending approval request(s); keep the lease with post_status until a person decides.`,
        nextTool: tool('post_status'),
        issueId: f.held.issueId,
      };
    }
    return { decision: 'resume-claim', reason: `You hold a claim until ${f.held.expiresAt}; continue that task.`, nextTool: tool('get_task_contract'), issueId: f.held.issueId };
  }
  if (f.missingWriteScopes.length > 0) {
    return { decision: 'read-only', reason: `The token lacks ${f.missingWriteScopes.join(' and ')}: read, do not write.`, nextTool: tool('search_issues'), issueId: null };
  }
  if (!f.queue) {
    return { decision: 'claim-next', reason: 'The token lacks agents:read: find a ready task with search_issues (status ready), then claim it.', nextTool: tool('search_issues'), issueId: null };
  }
  if (f.queue.quotaState === 'run-budget-exhausted') {
    return { decision: 'read-only', reason: "The workspace's agent-run budget for this month is used up: claims are refused.", nextTool: tool(reminders), issueId: null };
  }
  if (f.queue.claimable === 0 || !f.queue.nextIssueId) {
    return { decision: 'no-ready-work', reason: `No claimable task (${f.queue.total} ready, none claimable now).`, nextTool: tool(reminders), issueId: null };
  }
  return { decision: 'claim-next', reason: `${f.queue.claimable} claimable task(s); the top-ranked one is suggested.`, nextTool: tool('claim_work'), issueId: f.queue.nextIssueId };
}

export async function agentPreflight(deps: GatewayDeps, principal: Principal, view: ToolView = DEFAULT_VIEW) {
  const { workspaceId, agentId, keyId } = tokenIdentity(principal);
  const options = { principal };
  const now = deps.clock();
  const access = await deps.workspaceAccess.forToken(principal, workspaceId);
  const limit = PLANS[access.planId].quotas['api-requests'];
  const canReadQueue = principal.scopes.includes('agents:read');
  const [used, ready, assigned] = await Promise.all([
    deps.meter.used(workspaceId, 'api-requests', now),
    canReadQueue ? deps.rpc.claims.listReadyWork({ limit: 5 }, options) : Promise.resolve(undefined),
    agentId
      ? deps.rpc.tasks.searchTasks({ workspaceId, assignedAgentId: agentId, status: ['in-progress', 'in-review', 'blocked'], limit: 10 }, options)
      : Promise.resolve(undefined),
  ]);
  const heldItem = ready?.items.find((i) => i.claim && i.claim.state === 'active');
  const held = heldItem?.claim ? { issueId: heldItem.id, expiresAt: heldItem.claim.expiresAt, fencingToken: heldItem.claim.fencingToken } : undefined;
  const working = [...new Set([held?.issueId, ...(assigned?.tasks ?? []).map((t) => t.task?.id)].filter((id): id is string => !!id))];
  const approvals = (
    await Promise.all(working.map((issueId) => deps.rpc.taskRecords.listApprovals({ issueId, status: 'pending', limit: 20 }, options)))
  ).flatMap((r) => r.approvals.map((a) => ({ id: a.id, issueId: a.issueId, reason: a.reason, createdAt: a.createdAt })));
  // Decisions on this agent's requests on its held task (the requesting agent sees them here).
  const decided = (heldItem?.approvals ?? [])
    .filter((g) => g.status !== 'pending' && g.requestedBy === keyId)
    .map((g) => ({ id: g.id, issueId: heldItem?.id ?? '', for: g.approvalFor, status: g.status, decidedAt: g.decidedAt ?? null }));
  const summary = ready?.queueSummary;
  const next = ready?.claimQueue.find((e) => e.state === 'claimable');
  const facts: PreflightFacts = {
    missingWriteScopes: WRITE_SCOPES.filter((s) => !principal.scopes.includes(s)),
    apiRequests: { used, limit },
    ...(ready
      ? { queue: { quotaState: summary?.quotaState ?? 'within-run-budget', claimable: summary?.claimable ?? 0, total: summary?.total ?? 0, ...(next ? { nextIssueId: next.issueId } : {}) } }
      : {}),
    ...(held ? { held } : {}),
    pendingApprovals: approvals,
  };
  const near = limit !== null && used >= limit * 0.9;
  const checks = [
    {
      id: 'scopes',
      status: (facts.missingWriteScopes.length === 0 ? 'pass' : 'warn') as CheckStatus,
      detail: facts.missingWriteScopes.length === 0 ? 'Read and write tools are available.' : `Missing ${facts.missingWriteScopes.join(', ')}: write tools are refused (403).`,
      scopes: [...principal.scopes],
      missing: facts.missingWriteScopes,
    },
    {
      id: 'api-quota',
      status: (limit !== null && used >= limit ? 'fail' : near ? 'warn' : 'pass') as CheckStatus,
      detail: limit === null ? `${used} API requests this month (unlimited).` : `${used} of ${limit} API requests used this month.`,
      used,
      limit,
    },
    {
      id: 'agent-run-quota',
      status: (!facts.queue ? 'skipped' : facts.queue.quotaState === 'run-budget-exhausted' ? 'fail' : 'pass') as CheckStatus,
      detail: !facts.queue ? 'Needs agents:read.' : facts.queue.quotaState === 'run-budget-exhausted' ? 'The agent-run budget is used up: claims are refused.' : 'Within the agent-run budget.',
      quotaState: facts.queue?.quotaState ?? null,
    },
    {
      id: 'held-claim',
      status: (!canReadQueue ? 'skipped' : held ? 'warn' : 'pass') as CheckStatus,
      detail: !canReadQueue ? 'Needs agents:read.' : held ? `You hold the claim on ${held.issueId} until ${held.expiresAt}.` : 'You hold no claim.',
      claim: held ?? null,
    },
    {
      id: 'pending-approvals',
      status: (approvals.length > 0 ? 'warn' : 'pass') as CheckStatus,
      detail:
        (approvals.length > 0 ? `${approvals.length} approval request(s) on your tasks wait for a person.` : 'No approval request waits on your tasks.') +
        (decided.length > 0 ? ` Decided: ${decided.map((d) => `${d.id} ${d.status}`).join(', ')}.` : ''),
      approvals,
      decided,
    },
    {
      id: 'ready-work',
      status: (!facts.queue ? 'skipped' : facts.queue.claimable > 0 ? 'pass' : 'warn') as CheckStatus,
      detail: !facts.queue ? 'Needs agents:read.' : `${facts.queue.claimable} claimable of ${facts.queue.total} ready.`,
      claimable: facts.queue?.claimable ?? null,
      total: facts.queue?.total ?? null,
    },
  ];
  return {
    generatedAt: now.toISOString(),
    agent: { agentId, keyId },
    workspace: { id: workspaceId, planId: access.planId, status: access.status },
    firstSessionDecision: firstSessionDecision(facts, view),
    checks,
  };
}
