/**
 * What each MCP tool does: the gRPC calls of its REST twin, with the REST request mapping and the
 * REST JSON mappers, so a tool result's `structuredContent` is the twin's response body
 * (`{ data, page? , meta? }`). No rule lives here: the services decide; errors travel as
 * ServiceErrors (server.ts turns them into tool errors).
 */
import { ServiceError } from '@planning/errors';
import { agentPreflight, clientBootstrap, tokenIdentity } from '../routes/guidance-agent.js';
import { contextPackJson, customizationJson, hitJson, launchReadinessJson, standardsJson } from '../routes/guidance-json.js';
import { createTaskRequest, instructionsPatch, taskPatch, type RestInstructions, type RestIssueCreate, type RestIssuePatch } from '../routes/planning-input.js';
import { approvalJson, commentJson, doneStatusJson, evidenceJson, issueJson, reminderItemJson, taskContractJson, timeEntryJson } from '../routes/planning-json.js';
import { MCP_DEFAULT_LIMIT } from './catalog.js';
import { claimToolHandlers } from './claim-tools.js';
import type { ToolContext, ToolHandler } from './tool-context.js';

const options = (ctx: ToolContext) => ({ principal: ctx.principal });
const workspaceOf = (ctx: ToolContext) => tokenIdentity(ctx.principal).workspaceId;
const pageOf = (nextCursor: string | undefined) => ({ nextCursor: nextCursor ?? null });
const present = <T>(value: T | undefined): T => {
  if (value === undefined || value === null) throw new ServiceError('internal', 'Internal error');
  return value;
};

const searchIssues: ToolHandler = async (a, ctx) => {
  const result = await ctx.deps.rpc.tasks.searchTasks(
    {
      workspaceId: workspaceOf(ctx),
      projectId: a.projectId,
      milestoneId: a.milestoneId,
      initiativeId: a.initiativeId,
      status: a.status ?? [],
      priority: a.priority ?? [],
      labels: a.label ?? [],
      assignedAgentId: a.assignedAgentId,
      dependencyState: a.dependencyState,
      q: a.q,
      sort: a.sort,
      direction: a.direction,
      includeDependencyGraph: a.includeDependencyGraph ?? false,
      limit: a.limit ?? MCP_DEFAULT_LIMIT,
      cursor: a.cursor,
    },
    options(ctx),
  );
  return {
    data: {
      issues: result.tasks.map(issueJson),
      ...(a.includeDependencyGraph
        ? { dependencyGraph: { edges: (result.dependencyGraph?.edges ?? []).map((e) => ({ sourceIssueId: e.sourceIssueId, targetIssueId: e.targetIssueId })) } }
        : {}),
    },
    page: pageOf(result.nextCursor),
  };
};

const createIssue: ToolHandler = async (a, ctx) => {
  const result = await ctx.deps.rpc.tasks.createTask(createTaskRequest(a as RestIssueCreate), options(ctx));
  return { data: issueJson(present(result.task)) };
};

/** `PATCH /api/issues/{id}` with `body`: the same guarded path (version, fencing token) and response. */
async function patchIssue(ctx: ToolContext, a: Parameters<ToolHandler>[0], body: RestIssuePatch): Promise<Record<string, unknown>> {
  const result = await ctx.deps.rpc.tasks.updateTask(
    { id: a.issueId, patch: taskPatch(body), expectedVersion: a.version, fencingToken: a.fencingToken, override: a.override },
    options(ctx),
  );
  return { data: issueJson(present(result.task)), meta: { changedFields: result.changedFields } };
}

const updateIssueStatus: ToolHandler = (a, ctx) => patchIssue(ctx, a, { status: a.status });

/** The fields update_issue may change (its other arguments say which task and under which guard). */
const UPDATE_FIELDS = ['title', 'description', 'priority', 'labels', 'dueDate', 'estimate', 'milestoneId'] as const;

const updateIssue: ToolHandler = (a, ctx) => {
  const body: RestIssuePatch = Object.fromEntries(UPDATE_FIELDS.filter((f) => a[f] !== undefined).map((f) => [f, a[f]]));
  if (a.assignedAgentId !== undefined) body.agent = { assignedAgentId: a.assignedAgentId };
  // As the REST PATCH's body (minProperties 1): a call that names no field is a mistake, not a no-op.
  if (Object.keys(body).length === 0) throw new ServiceError('invalid-input', `Name at least one field to change: ${[...UPDATE_FIELDS, 'assignedAgentId'].join(', ')}`);
  return patchIssue(ctx, a, body);
};

const listIssueReminders: ToolHandler = async (a, ctx) => {
  const result = await ctx.deps.rpc.tasks.listReminders(
    { workspaceId: workspaceOf(ctx), projectId: a.projectId, assignedAgentId: a.assignedAgentId, kinds: a.kind ?? [], limit: a.limit ?? MCP_DEFAULT_LIMIT, cursor: a.cursor },
    options(ctx),
  );
  return { data: result.items.map(reminderItemJson), page: pageOf(result.nextCursor) };
};

/** Handlers by canonical (issue-named) tool name; aliases resolve to these. */
export const TOOL_HANDLERS: Readonly<Record<string, ToolHandler>> = {
  get_client_bootstrap: async (_a, ctx) => ({ data: await clientBootstrap(ctx.deps, ctx.principal, ctx.view) }),
  get_agent_preflight: async (_a, ctx) => ({ data: await agentPreflight(ctx.deps, ctx.principal, ctx.view) }),
  get_workspace_customization: async (_a, ctx) => {
    const { customization } = await ctx.deps.rpc.guidance.getWorkspaceCustomization({ workspaceId: workspaceOf(ctx) }, options(ctx));
    return { data: customizationJson(customization) };
  },
  get_market_standards: async (_a, ctx) => {
    const { standards } = await ctx.deps.rpc.guidance.getWorkingStandards({ workspaceId: workspaceOf(ctx) }, options(ctx));
    return { data: standardsJson(standards) };
  },
  get_launch_readiness: async (_a, ctx) => ({
    data: launchReadinessJson(await ctx.deps.rpc.guidance.getLaunchReadiness({ workspaceId: workspaceOf(ctx) }, options(ctx))),
  }),
  search_knowledgebase: async (a, ctx) => {
    const result = await ctx.deps.rpc.guidance.searchKnowledgeDocuments(
      { workspaceId: workspaceOf(ctx), q: a.q, tags: a.tag ?? [], projectId: a.projectId, initiativeId: a.initiativeId, limit: a.limit ?? 5, cursor: a.cursor },
      options(ctx),
    );
    return { data: result.hits.map(hitJson), page: pageOf(result.nextCursor) };
  },
  get_task_contract: async (a, ctx) => {
    const result = await ctx.deps.rpc.tasks.getTaskContract({ issueId: a.issueId }, options(ctx));
    return { data: { issue: { id: result.issueId, status: result.status }, taskContract: taskContractJson(result.contract), done: doneStatusJson(result.done) } };
  },
  update_task_contract: async (a, ctx) => {
    const result = await ctx.deps.rpc.tasks.updateTaskContract(
      { issueId: a.issueId, instructions: instructionsPatch(a.agent.instructions as RestInstructions), expectedVersion: a.version, fencingToken: a.fencingToken },
      options(ctx),
    );
    return { data: { issue: { id: result.issueId, status: result.status }, taskContract: taskContractJson(result.contract), changedSections: result.changedSections } };
  },
  get_context_pack: async (a, ctx) => ({ data: contextPackJson(await ctx.deps.rpc.guidance.getContextPack({ issueId: a.issueId }, options(ctx))) }),
  add_comment: async (a, ctx) => {
    const { comment } = await ctx.deps.rpc.taskRecords.addComment({ issueId: a.issueId, body: a.body, fencingToken: a.fencingToken }, options(ctx));
    return { data: commentJson(present(comment)) };
  },
  log_time: async (a, ctx) => {
    const result = await ctx.deps.rpc.taskRecords.logTime(
      { issueId: a.issueId, minutes: a.minutes, note: a.note, loggedAt: a.loggedAt, fencingToken: a.fencingToken },
      options(ctx),
    );
    return { data: { timeEntry: timeEntryJson(present(result.timeEntry)), totalMinutes: result.totalMinutes } };
  },
  add_evidence: async (a, ctx) => {
    const { evidence } = await ctx.deps.rpc.taskRecords.addEvidence(
      { issueId: a.issueId, kind: a.kind, title: a.title, url: a.url, body: a.body, checkId: a.checkId, fencingToken: a.fencingToken },
      options(ctx),
    );
    return { data: evidenceJson(present(evidence)) };
  },
  request_approval: async (a, ctx) => {
    const { approval } = await ctx.deps.rpc.taskRecords.requestApproval(
      { issueId: a.issueId, reason: a.reason, approvalFor: a.for, fencingToken: a.fencingToken },
      options(ctx),
    );
    return { data: approvalJson(present(approval)) };
  },
  search_issues: searchIssues,
  create_issue: createIssue,
  update_issue_status: updateIssueStatus,
  update_issue: updateIssue,
  list_issue_reminders: listIssueReminders,
  ...claimToolHandlers,
};
