/**
 * The MCP tool catalog: the 25 `service.`-prefixed tools of the API document (§4, endpoint 14)
 * and the update pair (`update_issue`, `update_task`: the whole job over MCP), with
 * their titles, descriptions, argument and result schemas, annotations and the token scopes each
 * needs. Static data only; `tools.ts` binds each tool to the gRPC calls of its REST twin. Each
 * result schema is the REST twin's response schema made exact (`output-schemas.ts`): a tool's
 * structuredContent is that twin's body.
 *
 * Descriptions say what the tool does, when to call it and what it changes, in as few words as
 * that takes: every listed tool costs an agent context on every session (docs/benchmarks.md).
 */
import type { Scope } from '@planning/plans';
import { ok, page } from '../openapi.js';
import { claimAndIssueResponse, claimWorkResponse, readyWorkResponse, statusPostResponse } from '../routes/agents.js';
import {
  bootstrapSchema,
  contextPackSchema,
  customizationSchema,
  hitSchema,
  launchReadinessSchema,
  preflightSchema,
  standardsSchema,
} from '../routes/guidance-json.js';
import { timeLoggedResponse } from '../routes/issue-records.js';
import { issueChangeResponse, reminderItemSchema, searchResponse } from '../routes/issues.js';
import { approvalSchema, commentSchema, evidenceSchema, issueSchema } from '../routes/planning-json.js';
import { taskContractChangeResponse, taskContractResponse } from '../routes/task-contract.js';
import { NAME_STYLES, wireName, type NameStyle, type Toolset } from './naming.js';
import { toolOutputSchema } from './output-schemas.js';

export { DEFAULT_VIEW, NAME_PREFIXES, NAME_STYLES, PORTABLE_NAME, TOOL_PREFIX, wireName, type NameStyle, type Toolset, type ToolView } from './naming.js';

/** MCP lists are paged like REST's; without `limit` they return 20 items (REST: up to 500), to spare the agent's context. */
export const MCP_DEFAULT_LIMIT = 20;

type Json = Record<string, unknown>;

export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: false;
}

export interface ToolDefinition {
  /** Without the prefix, e.g. `search_issues`. */
  name: string;
  title: string;
  description: string;
  inputSchema: Json;
  outputSchema: Json;
  annotations: ToolAnnotations;
  /** Token scopes the tool needs (beyond the endpoint's `issues:read`). */
  scopes: readonly Scope[];
  /** Listed by `?toolset=core` (DECISIONS §12). */
  core: boolean;
  /** The issue-named tool a task-named alias shares its implementation with. */
  aliasOf?: string;
  /**
   * Service field names that differ from the tool's argument names (`id` → `issueId`): a service's
   * `invalid-input` names its own request's field, and a -32602 must name the tool's argument.
   */
  serviceFields?: Readonly<Record<string, string>>;
}

// ---- schema builders -------------------------------------------------------------------------

const str = (description?: string): Json => (description ? { type: 'string', description } : { type: 'string' });
/** Text the service bounds: up to `max` characters (`min` 1 when it must not be empty). */
const text = (max: number, min = 0, description?: string): Json => ({ type: 'string', ...(min > 0 ? { minLength: min } : {}), maxLength: max, ...(description ? { description } : {}) });
const int = (minimum: number, maximum: number, description?: string): Json => ({ type: 'integer', minimum, maximum, ...(description ? { description } : {}) });
/** Ids are 1 to 64 characters (the services refuse others; an empty one is a missing argument). */
const id: Json = { type: 'string', minLength: 1 };
const ids = (maxItems: number): Json => ({ type: 'array', maxItems, items: id });
const labels: Json = { type: 'array', maxItems: 20, items: { type: 'string' } };
const enumOf = (values: readonly string[]): Json => ({ type: 'string', enum: [...values] });
/** A value or `null` (clears the field): `anyOf`, not a type array, which strict hosts refuse. */
const orNull = (schema: Json): Json => {
  const { description, ...value } = schema;
  return { anyOf: [value, { type: 'null' }], ...(description ? { description } : {}) };
};
const enums = (values: readonly string[]): Json => ({ type: 'array', items: enumOf(values) });
const args = (properties: Json, required: string[] = []): Json => ({
  type: 'object',
  properties,
  ...(required.length > 0 ? { required } : {}),
  additionalProperties: false,
});

const STATUSES = ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] as const;
const PRIORITIES = ['urgent', 'high', 'medium', 'low', 'none'] as const;
const EVIDENCE_KINDS = ['link', 'log', 'test-result', 'artifact', 'note'] as const;
const REMINDER_KINDS = ['missing-dates', 'stale-update', 'missing-time', 'overdue'] as const;

const issueId = id;
const limit = int(1, 200, 'Default 20.');
const cursor = str('From page.nextCursor.');
/*
 * Values the service hands out (a claim's fencing token, a task's version) are listed without an
 * upper bound or a description: the model copies them (claim_work's description says where the
 * token comes from), and each costs it tokens in nine tools. The argument check still holds them to
 * their int32 field (`arguments.ts`), naming the argument.
 */
const fencingToken = { type: 'integer', minimum: 1 };
const version = { type: 'integer', minimum: 1 };
/** Members only (agents get 403): complete despite the done policy or a pending approval; audited. */
const override = {
  type: 'object',
  required: ['reason'],
  additionalProperties: false,
  description: 'Members only: skip the done policy; audited.',
  properties: { reason: { type: 'string', minLength: 1, maxLength: 2000 } },
};
const APPROVAL_FORS = ['done', 'in-review', 'merge', 'custom'] as const;
/**
 * A brief section: text or a list, `null` clears it (`anyOf`, not a type array: strict hosts refuse
 * those). A list's length (at most 30 items) is left to the issues service, which refuses more with
 * the field named: that bound, on six sections of two core tools, cost the model 30 tokens a session.
 */
const sectionText: Json = { type: 'string', maxLength: 2000 };
const sectionList: Json = { type: 'array', items: { type: 'string', maxLength: 500 } };
const brief = (section: (schema: Json) => Json) =>
  args({
    objective: section(sectionText),
    constraints: section(sectionList),
    expectedOutput: section(sectionText),
    verification: section(sectionList),
    permissions: section(sectionList),
    escalation: section(sectionText),
  });
/** A new task's brief: sections are set or left out. */
const instructions = brief((s) => s);

/*
 * Annotations (MCP spec): `destructiveHint: false` means the tool makes only additive updates;
 * a tool that overwrites, clears or ends existing state is destructive. `idempotentHint`: the
 * same call again has no further effect.
 */
const READ: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
/** Adds a record per call (comments, time, evidence, approval requests, tasks, status notes). */
const ADD: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
/** Overwrites existing state (a status, brief sections, a claim); the same call again changes nothing more. */
const OVERWRITE: ToolAnnotations = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };
/** claim_work: overwrites the task's status (ready → in-progress) and meters a run; retry-safe only with idempotencyKey. */
const CLAIM: ToolAnnotations = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false };

const WRITE_SCOPES: readonly Scope[] = ['issues:write', 'agents:execute'];

// ---- the tools -------------------------------------------------------------------------------

const ISSUE_TOOLS: ToolDefinition[] = [
  {
    name: 'search_issues',
    title: 'Search issues',
    description: 'Search your tasks by filters and literal text. Call before any write: each has taskHealth (blocksAgentClaim, firstReminder, safeNextActions). Read-only.',
    inputSchema: args({
      q: text(200, 0, 'Literal text.'),
      status: enums(STATUSES),
      priority: enums(PRIORITIES),
      label: labels,
      projectId: id,
      milestoneId: id,
      initiativeId: id,
      assignedAgentId: id,
      dependencyState: enumOf(['blocked', 'unblocked']),
      sort: enumOf(['priority', 'updatedAt', 'createdAt', 'dueDate', 'title']),
      direction: enumOf(['asc', 'desc']),
      includeDependencyGraph: { type: 'boolean' },
      limit,
      cursor,
    }),
    outputSchema: toolOutputSchema(searchResponse),
    annotations: READ,
    scopes: [],
    core: true,
  },
  {
    name: 'create_issue',
    title: 'Create an issue',
    description: 'Create a task (ready unless status given) for work missing from the plan. A retry creates another.',
    inputSchema: args(
      {
        projectId: id,
        title: text(300, 1),
        description: text(20000),
        status: enumOf(STATUSES),
        priority: enumOf(PRIORITIES),
        labels,
        milestoneId: id,
        initiativeId: id,
        parentId: id,
        dueDate: { type: 'string', format: 'date' },
        estimate: { type: 'number', minimum: 0, maximum: 10000 },
        dependencies: ids(50),
        acceptanceChecks: { type: 'array', maxItems: 50, items: args({ title: text(300, 1), done: { type: 'boolean' } }, ['title']) },
        agent: args({ assignedAgentId: id, instructions }),
      },
      ['projectId', 'title'],
    ),
    outputSchema: toolOutputSchema(ok(issueSchema)),
    annotations: ADD,
    scopes: WRITE_SCOPES,
    core: true,
  },
  {
    name: 'update_issue_status',
    title: 'Move an issue',
    description:
      "Move a task along the allowed moves; in-review, done or cancelled completes your claim (a repeat is then stale-claim), ready releases it. Done needs what get_task_contract's done asks.",
    inputSchema: args({ issueId, status: enumOf(STATUSES), version, fencingToken, override }, ['issueId', 'status']),
    outputSchema: toolOutputSchema(issueChangeResponse),
    annotations: OVERWRITE,
    scopes: WRITE_SCOPES,
    core: true,
    serviceFields: { id: 'issueId' },
  },
  {
    name: 'update_issue',
    title: 'Update an issue',
    description:
      "Change a task's fields; those left out stay, null clears one, labels replaces all. A repeat changes nothing.",
    inputSchema: args(
      {
        issueId,
        title: text(300, 1),
        description: text(20000),
        priority: enumOf(PRIORITIES),
        labels,
        dueDate: orNull({ type: 'string', format: 'date' }),
        estimate: orNull({ type: 'number', minimum: 0, maximum: 10000 }),
        assignedAgentId: orNull({ type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' }),
        milestoneId: orNull(id),
        version,
        fencingToken,
      },
      ['issueId'],
    ),
    outputSchema: toolOutputSchema(issueChangeResponse),
    annotations: OVERWRITE,
    scopes: WRITE_SCOPES,
    core: true,
    serviceFields: { id: 'issueId', 'agent.assignedAgentId': 'assignedAgentId' },
  },
  {
    name: 'list_issue_reminders',
    title: 'Issue reminders',
    description:
      'Open tasks with missing dates, stale updates, missing time or overdue dates, most urgent first, each with safeNextActions. Follow them before claiming such work. Read-only.',
    inputSchema: args({ projectId: id, assignedAgentId: id, kind: enums(REMINDER_KINDS), limit, cursor }),
    outputSchema: toolOutputSchema(page(reminderItemSchema)),
    annotations: READ,
    scopes: [],
    core: false,
  },
];

const TOOLS: ToolDefinition[] = [
  {
    name: 'get_client_bootstrap',
    title: 'Client bootstrap',
    description: 'Who you are: agent, workspace, plan, scopes, rate limit and the recommended call order marked by what your token may call. Read-only.',
    inputSchema: args({}),
    outputSchema: toolOutputSchema(ok(bootstrapSchema)),
    annotations: READ,
    scopes: [],
    core: false,
  },
  {
    name: 'get_agent_preflight',
    title: 'Agent preflight',
    description:
      'Call first. firstSessionDecision says what to do now (resume-claim, claim-next, wait-for-approval, no-ready-work, read-only, or blocked when the API quota is used up) from checks of scopes, quotas, your held claim and pending approvals. Read-only.',
    inputSchema: args({}),
    outputSchema: toolOutputSchema(ok(preflightSchema)),
    annotations: READ,
    scopes: [],
    core: false,
  },
  {
    name: 'get_workspace_customization',
    title: 'Workspace customization',
    description:
      "The workspace's viewModes (Cards, List, Tags, Swimlanes), viewPresets, adminSetupPath, rulesCenter, evidencePolicy and handoffPacket. Call after preflight; keep them for the task run. Read-only.",
    inputSchema: args({}),
    outputSchema: toolOutputSchema(ok(customizationSchema)),
    annotations: READ,
    scopes: [],
    core: false,
  },
  {
    name: 'get_market_standards',
    title: 'Working standards',
    description: "The workspace's published working standards: definition of done, review and evidence expectations. Call before work to know when a task counts as done. Read-only.",
    inputSchema: args({}),
    outputSchema: toolOutputSchema(ok(standardsSchema)),
    annotations: READ,
    scopes: [],
    core: false,
  },
  {
    name: 'get_launch_readiness',
    title: 'Launch readiness',
    description: "Launch readiness from the workspace's launch-blocker tasks and evidence, with the open blockers and their next actions. Call when choosing launch work. Read-only.",
    inputSchema: args({}),
    outputSchema: toolOutputSchema(ok(launchReadinessSchema)),
    annotations: READ,
    scopes: [],
    core: false,
  },
  {
    name: 'search_knowledgebase',
    title: 'Search the knowledgebase',
    description: "Search the workspace's documents (every word must match title, tags or body), best first, with bodies. Call when the brief or context pack leaves a question. Read-only.",
    inputSchema: args({ q: text(200), tag: { ...labels, description: 'Any of these tags.' }, projectId: id, initiativeId: id, limit: int(1, 200, 'Default 5.'), cursor }),
    outputSchema: toolOutputSchema(page(hitSchema)),
    annotations: READ,
    scopes: [],
    core: false,
    serviceFields: { tags: 'tag' },
  },
  {
    name: 'list_ready_work',
    title: 'Ready work',
    description: 'Ready tasks you may claim, ranked, with agentClaimQueue (state, nextAction, doneEvidence); your held task first. Read-only.',
    inputSchema: args({ limit, cursor }),
    outputSchema: toolOutputSchema(readyWorkResponse),
    annotations: READ,
    scopes: ['agents:read'],
    core: true,
  },
  {
    name: 'get_task_contract',
    title: 'Task contract',
    description: "A task's brief (the sections update_task_contract sets), how complete it is and what done needs. Call after claiming. Read-only.",
    inputSchema: args({ issueId }, ['issueId']),
    outputSchema: toolOutputSchema(taskContractResponse),
    annotations: READ,
    scopes: [],
    core: true,
  },
  {
    name: 'update_task_contract',
    title: 'Update task contract',
    description: "Overwrite sections of a task's brief; null clears one. A repeat changes nothing.",
    inputSchema: args({ issueId, agent: args({ instructions: brief(orNull) }, ['instructions']), version, fencingToken }, ['issueId', 'agent']),
    outputSchema: toolOutputSchema(taskContractChangeResponse),
    annotations: OVERWRITE,
    scopes: WRITE_SCOPES,
    core: true,
  },
  {
    name: 'get_context_pack',
    title: 'Context pack',
    description: "Files, docs and links of a task's project and initiative, and their knowledge documents. Call after reading the brief. Read-only.",
    inputSchema: args({ issueId }, ['issueId']),
    outputSchema: toolOutputSchema(ok(contextPackSchema)),
    annotations: READ,
    scopes: [],
    core: true,
  },
  {
    name: 'claim_work',
    title: 'Claim work',
    description:
      'Call when you hold no claim, for a ready task: it moves to in-progress, one agent run is metered, you get a lease (expiresAt) and the fencingToken every write to the task then passes. idempotencyKey makes retries safe.',
    inputSchema: args({ issueId, idempotencyKey: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' } }, ['issueId']),
    outputSchema: toolOutputSchema(claimWorkResponse),
    annotations: CLAIM,
    scopes: WRITE_SCOPES,
    core: true,
    serviceFields: { 'idempotency-key': 'idempotencyKey' },
  },
  {
    name: 'post_status',
    title: 'Post status',
    description: 'Record a status note on the task you hold and renew its lease. Call before the lease expires.',
    inputSchema: args({ issueId, message: text(10000, 1), fencingToken }, ['issueId', 'message']),
    outputSchema: toolOutputSchema(statusPostResponse),
    annotations: ADD,
    scopes: WRITE_SCOPES,
    core: true,
  },
  {
    name: 'cancel_work',
    title: 'Cancel work',
    description: 'Call when you cannot finish a claimed task: ends your claim; the task returns to ready.',
    inputSchema: args({ issueId, fencingToken }, ['issueId']),
    outputSchema: toolOutputSchema(claimAndIssueResponse),
    annotations: OVERWRITE,
    scopes: WRITE_SCOPES,
    core: true,
  },
  {
    name: 'add_comment',
    title: 'Add comment',
    description: 'Comment on a task; call to leave notes or the handoff packet. A retry adds another.',
    inputSchema: args({ issueId, body: text(10000, 1), fencingToken }, ['issueId', 'body']),
    outputSchema: toolOutputSchema(ok(commentSchema)),
    annotations: ADD,
    scopes: WRITE_SCOPES,
    core: true,
  },
  {
    name: 'log_time',
    title: 'Log time',
    description: 'Log minutes worked on a task; call after each stretch of work. A retry logs again.',
    inputSchema: args({ issueId, minutes: int(1, 1440), note: text(1000), loggedAt: { type: 'string', format: 'date-time' }, fencingToken }, ['issueId', 'minutes']),
    outputSchema: toolOutputSchema(timeLoggedResponse),
    annotations: ADD,
    scopes: WRITE_SCOPES,
    core: true,
  },
  {
    name: 'add_evidence',
    title: 'Add evidence',
    description: 'Attach proof to a task; a checkId marks that acceptance check done. A retry adds another.',
    inputSchema: args({ issueId, kind: enumOf(EVIDENCE_KINDS), title: text(300, 1), url: text(2000), body: text(20000), checkId: id, fencingToken }, ['issueId', 'kind', 'title']),
    outputSchema: toolOutputSchema(ok(evidenceSchema)),
    annotations: ADD,
    scopes: WRITE_SCOPES,
    core: true,
  },
  {
    name: 'request_approval',
    title: 'Request approval',
    description: 'Ask a person to approve something on a task (pending until decided). A retry asks again.',
    inputSchema: args({ issueId, reason: text(2000, 1), for: { ...enumOf(APPROVAL_FORS), description: 'done/in-review: that move waits for the decision. Default custom.' }, fencingToken }, ['issueId', 'reason']),
    outputSchema: toolOutputSchema(ok(approvalSchema)),
    annotations: ADD,
    scopes: WRITE_SCOPES,
    core: true,
  },
  ...ISSUE_TOOLS,
];

/** Task-named aliases (API document §9): same arguments, results and implementation; each with its own title. */
const ALIASES: Record<string, { of: string; title: string }> = {
  search_tasks: { of: 'search_issues', title: 'Search tasks' },
  create_task: { of: 'create_issue', title: 'Create a task' },
  update_task_status: { of: 'update_issue_status', title: 'Move a task' },
  update_task: { of: 'update_issue', title: 'Update a task' },
  list_task_reminders: { of: 'list_issue_reminders', title: 'Task reminders' },
};

function aliasTool(name: string, title: string, of: ToolDefinition): ToolDefinition {
  return { ...of, name, title, core: false, aliasOf: of.name };
}

/** A tool's description as a list shows it: an alias names its canonical tool in the list's name style. */
export function descriptionOf(tool: ToolDefinition, names: NameStyle = 'dotted'): string {
  return tool.aliasOf ? `${tool.description} Alias of ${wireName(tool.aliasOf, names)}.` : tool.description;
}

const byName = new Map(TOOLS.map((t) => [t.name, t]));

/**
 * Every tool, in the order of the API document's list; the pair that updates a task's fields
 * (`update_task`, `update_issue`) follows the status pair it extends.
 */
export const TOOL_ORDER = [
  'get_client_bootstrap',
  'get_workspace_customization',
  'get_agent_preflight',
  'get_market_standards',
  'get_launch_readiness',
  'search_knowledgebase',
  'list_task_reminders',
  'list_ready_work',
  'search_tasks',
  'create_task',
  'get_task_contract',
  'update_task_contract',
  'get_context_pack',
  'claim_work',
  'post_status',
  'cancel_work',
  'update_task_status',
  'update_task',
  'add_comment',
  'log_time',
  'add_evidence',
  'request_approval',
  'list_issue_reminders',
  'search_issues',
  'create_issue',
  'update_issue_status',
  'update_issue',
] as const;

export const CATALOG: readonly ToolDefinition[] = TOOL_ORDER.map((name) => {
  const alias = ALIASES[name];
  if (alias) return aliasTool(name, alias.title, byName.get(alias.of)!);
  const tool = byName.get(name);
  if (!tool) throw new Error(`tool ${name} has no definition`);
  return tool;
});

const catalogByName = new Map(CATALOG.flatMap((t) => NAME_STYLES.map((style) => [wireName(t.name, style), t] as const)));

/** The tool a wire name names, in either style (`service.search_issues`, `service_search_issues`), if any. */
export function toolNamed(name: string): ToolDefinition | undefined {
  return catalogByName.get(name);
}

/** The `tools/list` entries of a toolset, as the wire shows them. */
export function listedTools(toolset: Toolset, names: NameStyle = 'dotted') {
  return CATALOG.filter((t) => toolset === 'full' || t.core).map((t) => ({
    name: wireName(t.name, names),
    title: t.title,
    description: descriptionOf(t, names),
    inputSchema: t.inputSchema,
    outputSchema: t.outputSchema,
    annotations: t.annotations,
  }));
}

/** The scopes a token needs for a tool: the endpoint's `issues:read` plus the tool's own. */
export function requiredScopes(tool: ToolDefinition): Scope[] {
  return ['issues:read', ...tool.scopes];
}

/**
 * The order an agent's session calls tools in (API document §4, rules for clients), by canonical
 * (issue-named) tool name, used by `get_client_bootstrap` to tell each agent which steps its token
 * can take. Every tool a step's purpose names is listed wherever the step is.
 */
export const CALL_ORDER: readonly { tool: string; purpose: string }[] = [
  { tool: 'get_agent_preflight', purpose: 'Read firstSessionDecision before any write.' },
  { tool: 'get_workspace_customization', purpose: 'Keep view modes, presets, rules, evidence policy and handoff packet for the run.' },
  { tool: 'get_market_standards', purpose: 'Know the definition of done and review expectations.' },
  { tool: 'search_issues', purpose: 'Inspect taskHealth (blocksAgentClaim, firstReminder, safeNextActions) before claiming or changing a task.' },
  { tool: 'list_issue_reminders', purpose: 'Follow safeNextActions for missing dates, stale updates, missing time or overdue dates.' },
  { tool: 'list_ready_work', purpose: 'Pick the top claimable task; your held task comes first.' },
  { tool: 'claim_work', purpose: 'Claim it; keep the fencingToken.' },
  { tool: 'get_task_contract', purpose: 'Read the brief; fill missing sections with update_task_contract.' },
  { tool: 'get_context_pack', purpose: 'Read the attached files and documents.' },
  { tool: 'post_status', purpose: 'Report progress and renew the lease.' },
  { tool: 'add_evidence', purpose: 'Prove each acceptance check; log_time and add_comment as you go.' },
  { tool: 'request_approval', purpose: 'Ask a person when the brief says to escalate.' },
  { tool: 'update_issue_status', purpose: 'Move to in-review when verified (completes the claim), or cancel_work to give it back.' },
];

/** The call order of a toolset: only steps whose tool the toolset lists (`core` starts at search_issues). */
export function callOrder(toolset: Toolset): readonly { tool: string; purpose: string }[] {
  return toolset === 'full' ? CALL_ORDER : CALL_ORDER.filter((step) => toolNamed(wireName(step.tool))?.core);
}

/** Catalog tool names (without prefix) that a text names, e.g. in instructions or a reason. */
export function toolsNamedIn(text: string): string[] {
  return CATALOG.map((t) => t.name).filter((name) => new RegExp(`(^|[^a-z_])${name}([^a-z_]|$)`).test(text));
}
