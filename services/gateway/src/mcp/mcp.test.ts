import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { create } from '@bufbuild/protobuf';
import { WorkspaceCustomizationSchema } from '@planning/proto/planning/issues/v1/guidance_pb';
import { firstSessionDecision, type PreflightFacts } from '../routes/guidance-agent.js';
import { customizationJson } from '../routes/guidance-json.js';
import { argumentProblemOf, createArgumentValidator } from './arguments.js';
import { CALL_ORDER, callOrder, CATALOG, listedTools, PORTABLE_NAME, requiredScopes, toolNamed, toolsNamedIn, type Toolset } from './catalog.js';
import { forMcp, mcpSafeAction, toolMentions } from './next-actions.js';
import { LEGACY_PROTOCOL_VERSIONS } from './protocol.js';
import { normalizeAccept, originAllowed } from './route.js';
import { instructionsFor } from './server.js';
import { TOOL_HANDLERS } from './tools.js';

/** The tool names of the API document (§4, endpoint 14), in its order, with the update pair after the status pair. */
const DOCUMENTED = [
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
];

describe('mcp: tool catalog', () => {
  it('mcp: the catalog is the 25 documented names and the update pair, each with a handler, title, description, schemas and annotations', () => {
    expect(CATALOG.map((t) => t.name)).toEqual(DOCUMENTED);
    for (const tool of CATALOG) {
      expect(TOOL_HANDLERS[tool.aliasOf ?? tool.name], tool.name).toBeTypeOf('function');
      expect(tool.title.length).toBeGreaterThan(3);
      expect(tool.description.length).toBeGreaterThan(30);
      expect(tool.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
      expect(tool.outputSchema).toMatchObject({ type: 'object', anyOf: [{ type: 'object', required: expect.arrayContaining(['data']) }, { required: ['error'] }] });
      expect(tool.annotations.openWorldHint).toBe(false);
      expect(toolNamed(`service.${tool.name}`)).toBe(tool);
    }
    expect(toolNamed('search_issues')).toBeUndefined();
  });

  it('mcp: portable names: every listed name matches ^[a-zA-Z0-9_-]{1,64}$ and names the same tool as its dotted twin', () => {
    for (const toolset of ['full', 'core'] as const) {
      const portable = listedTools(toolset, 'portable');
      const dotted = listedTools(toolset);
      expect(portable.map((t) => t.name)).toEqual(dotted.map((t) => t.name.replace('service.', 'service_')));
      for (const [i, tool] of portable.entries()) {
        expect(tool.name).toMatch(PORTABLE_NAME);
        expect(toolNamed(tool.name)).toBe(toolNamed(dotted[i]!.name));
        // Aliases name their canonical tool the way the list does.
        if (tool.description.includes('Alias of')) expect(tool.description).toMatch(/Alias of service_[a-z_]+\.$/);
        expect(tool.description).not.toContain('service.');
      }
    }
    for (const name of ['service-claim_work', 'service_', 'claim_work', 'SERVICE_claim_work']) expect(toolNamed(name), name).toBeUndefined();
  });

  it('mcp: task-named tools are aliases sharing the issue-named implementation and schemas', () => {
    const aliases = CATALOG.filter((t) => t.aliasOf);
    expect(aliases.map((t) => [t.name, t.aliasOf])).toEqual([
      ['list_task_reminders', 'list_issue_reminders'],
      ['search_tasks', 'search_issues'],
      ['create_task', 'create_issue'],
      ['update_task_status', 'update_issue_status'],
      ['update_task', 'update_issue'],
    ]);
    for (const alias of aliases) {
      const of = toolNamed(`service.${alias.aliasOf}`)!;
      expect(alias.inputSchema).toBe(of.inputSchema);
      expect(alias.outputSchema).toBe(of.outputSchema);
      expect(alias.annotations).toEqual(of.annotations);
      expect(TOOL_HANDLERS[alias.name]).toBeUndefined();
    }
  });

  it('mcp: the core toolset leaves out the aliases and the bootstrap, customization, preflight, market, launch, knowledgebase and reminder tools', () => {
    const core = listedTools('core').map((t) => t.name.replace('service.', ''));
    expect(core).toHaveLength(15);
    for (const left of ['get_client_bootstrap', 'get_workspace_customization', 'get_agent_preflight', 'get_market_standards', 'get_launch_readiness', 'search_knowledgebase']) {
      expect(core).not.toContain(left);
    }
    expect(core.some((n) => n.includes('reminder'))).toBe(false);
    expect(core.filter((n) => CATALOG.find((t) => t.name === n)?.aliasOf)).toEqual([]);
    expect(listedTools('full')).toHaveLength(27);
  });

  it('mcp: write tools need issues:write and agents:execute; read-only tools need neither and say so in their hints', () => {
    for (const tool of CATALOG) {
      const scopes = requiredScopes(tool);
      expect(scopes[0]).toBe('issues:read');
      if (tool.annotations.readOnlyHint) {
        expect(scopes.filter((s) => s === 'issues:write' || s === 'agents:execute'), tool.name).toEqual([]);
        expect(tool.annotations.destructiveHint).toBe(false);
      } else {
        expect(scopes, tool.name).toEqual(expect.arrayContaining(['issues:write', 'agents:execute']));
      }
    }
    expect(requiredScopes(toolNamed('service.list_ready_work')!)).toEqual(['issues:read', 'agents:read']);
  });

  it('mcp: the recommended call order names tools of the catalog', () => {
    for (const step of CALL_ORDER) expect(toolNamed(`service.${step.tool}`), step.tool).toBeDefined();
  });

  /**
   * MCP spec: `destructiveHint: false` means only additive updates. Tools that overwrite, clear or
   * end existing state (a status, brief sections, a claim) are destructive; tools that add a record
   * are not. post_status adds a status note and only extends the caller's own lease.
   */
  const WRITE_HINTS: Record<string, { destructiveHint: boolean; idempotentHint: boolean }> = {
    create_issue: { destructiveHint: false, idempotentHint: false },
    create_task: { destructiveHint: false, idempotentHint: false },
    update_issue_status: { destructiveHint: true, idempotentHint: true },
    update_task_status: { destructiveHint: true, idempotentHint: true },
    update_issue: { destructiveHint: true, idempotentHint: true },
    update_task: { destructiveHint: true, idempotentHint: true },
    update_task_contract: { destructiveHint: true, idempotentHint: true },
    claim_work: { destructiveHint: true, idempotentHint: false },
    cancel_work: { destructiveHint: true, idempotentHint: true },
    post_status: { destructiveHint: false, idempotentHint: false },
    add_comment: { destructiveHint: false, idempotentHint: false },
    log_time: { destructiveHint: false, idempotentHint: false },
    add_evidence: { destructiveHint: false, idempotentHint: false },
    request_approval: { destructiveHint: false, idempotentHint: false },
  };

  it('mcp: every write tool has the destructive and idempotent hints of the table (overwriting tools are destructive)', () => {
    const writes = CATALOG.filter((t) => !t.annotations.readOnlyHint);
    expect(writes.map((t) => t.name).sort()).toEqual(Object.keys(WRITE_HINTS).sort());
    for (const tool of writes) {
      expect({ destructiveHint: tool.annotations.destructiveHint, idempotentHint: tool.annotations.idempotentHint }, tool.name).toEqual(WRITE_HINTS[tool.name]);
    }
    const listed = listedTools('full').find((t) => t.name === 'service.update_task_contract')!;
    expect(listed.annotations.destructiveHint).toBe(true);
  });

  it('mcp: every tool has its own grammatical title; aliases say task where the canonical tool says issue', () => {
    const titles = Object.fromEntries(CATALOG.map((t) => [t.name, t.title]));
    expect(titles).toMatchObject({
      search_tasks: 'Search tasks',
      create_task: 'Create a task',
      update_task_status: 'Move a task',
      update_task: 'Update a task',
      update_issue: 'Update an issue',
      list_task_reminders: 'Task reminders',
      search_issues: 'Search issues',
      create_issue: 'Create an issue',
      update_issue_status: 'Move an issue',
      list_issue_reminders: 'Issue reminders',
    });
    for (const tool of CATALOG) {
      expect(tool.title, tool.name).toMatch(/^[A-Z]/);
      expect(tool.title, tool.name).not.toMatch(/\ban task\b|\ba issue\b/i);
    }
  });

  it('mcp: descriptions say when to call, the preflight names every decision, and a status move is not called idempotent', () => {
    const description = (name: string) => toolNamed(`service.${name}`)!.description;
    for (const name of ['claim_work', 'cancel_work', 'add_comment', 'log_time', 'get_context_pack', 'get_task_contract', 'get_market_standards', 'get_launch_readiness', 'search_knowledgebase']) {
      expect(description(name), name).toMatch(/\bcall\b/i);
    }
    for (const decision of ['resume-claim', 'claim-next', 'wait-for-approval', 'no-ready-work', 'read-only', 'blocked']) expect(description('get_agent_preflight')).toContain(decision);
    expect(description('update_issue_status')).not.toMatch(/Idempotent\./);
    expect(description('update_issue_status')).toContain('stale-claim');
  });
});

describe('mcp: toolsets name only tools they list', () => {
  const names = (toolset: Toolset) => new Set(listedTools(toolset).map((t) => t.name.replace('service.', '')));

  it.each(['full', 'core'] as const)('mcp: %s: the server instructions and the call order name only listed, canonical tools', (toolset) => {
    const listed = names(toolset);
    const instructions = instructionsFor({ toolset, names: 'dotted' });
    expect(instructions).not.toContain('..');
    const portable = instructionsFor({ toolset, names: 'portable' });
    expect(portable).toContain('service_search_issues');
    expect(portable).not.toContain('service.');
    const named = toolsNamedIn(instructions);
    expect(named.length).toBeGreaterThan(2);
    for (const tool of named) {
      expect(listed.has(tool), `${toolset} instructions name ${tool}`).toBe(true);
      expect(toolNamed(`service.${tool}`)!.aliasOf, `${tool} is an alias`).toBeUndefined();
    }
    for (const step of callOrder(toolset)) {
      for (const tool of [step.tool, ...toolsNamedIn(step.purpose)]) {
        expect(listed.has(tool), `${toolset} call order names ${tool}`).toBe(true);
        expect(toolNamed(`service.${tool}`)!.aliasOf, `${tool} is an alias`).toBeUndefined();
      }
    }
  });

  it.each(['full', 'core'] as const)('mcp: %s: every first-session decision names a listed, canonical next tool', (toolset) => {
    const listed = names(toolset);
    const base: PreflightFacts = { missingWriteScopes: [], apiRequests: { used: 1, limit: 10 }, queue: { quotaState: 'within-run-budget', claimable: 1, total: 1, nextIssueId: 'i' }, pendingApprovals: [] };
    const held = { issueId: 'h', expiresAt: 't', fencingToken: 1 };
    const { queue: _q, ...noQueue } = base;
    const cases: PreflightFacts[] = [
      base,
      { ...base, apiRequests: { used: 10, limit: 10 } },
      { ...base, held },
      { ...base, held, pendingApprovals: [{ id: 'a', issueId: 'h', reason: 'r', createdAt: 't' }] },
      { ...base, missingWriteScopes: ['issues:write'] },
      noQueue,
      { ...base, queue: { ...base.queue!, quotaState: 'run-budget-exhausted' } },
      { ...base, queue: { quotaState: 'within-run-budget', claimable: 0, total: 0 } },
    ];
    for (const facts of cases) {
      const decision = firstSessionDecision(facts, { toolset, names: 'dotted' });
      const portable = firstSessionDecision(facts, { toolset, names: 'portable' });
      expect(portable.nextTool).toBe(decision.nextTool?.replace('service.', 'service_') ?? null);
      for (const tool of [...(decision.nextTool ? [decision.nextTool.replace('service.', '')] : []), ...toolsNamedIn(decision.reason)]) {
        expect(listed.has(tool), `${decision.decision} names ${tool}`).toBe(true);
        expect(toolNamed(`service.${tool}`)!.aliasOf).toBeUndefined();
      }
    }
  });
});

describe('mcp: arguments', () => {
  const validate = createArgumentValidator();
  const tool = (name: string) => toolNamed(`service.${name}`)!;

  it('mcp: valid arguments pass; types are never coerced', () => {
    expect(validate(tool('log_time'), { issueId: 'iss_1', minutes: 5 })).toBeUndefined();
    expect(validate(tool('get_client_bootstrap'), undefined)).toBeUndefined();
    expect(validate(tool('log_time'), { issueId: 'iss_1', minutes: '5' })).toEqual({ field: 'minutes', message: "Invalid argument 'minutes': must be integer" });
  });

  it('mcp: empty ids and keys and over-long text are caught by the schema, named as the tool argument', () => {
    expect(validate(tool('update_issue_status'), { issueId: '', status: 'ready' })?.field).toBe('issueId');
    expect(validate(tool('update_task_status'), { issueId: '', status: 'ready' })?.field).toBe('issueId');
    expect(validate(tool('claim_work'), { issueId: 'iss_1', idempotencyKey: '' })?.field).toBe('idempotencyKey');
    expect(validate(tool('claim_work'), { issueId: 'iss_1', idempotencyKey: 'has space' })?.field).toBe('idempotencyKey');
    expect(validate(tool('claim_work'), { issueId: 'iss_1', idempotencyKey: 'k-1' })).toBeUndefined();
    expect(validate(tool('get_task_contract'), { issueId: '' })?.field).toBe('issueId');
    expect(validate(tool('add_comment'), { issueId: 'i', body: '' })?.field).toBe('body');
    expect(validate(tool('add_comment'), { issueId: 'i', body: 'x'.repeat(10_001) })?.field).toBe('body');
    expect(validate(tool('add_comment'), { issueId: 'i', body: 'x'.repeat(10_000) })).toBeUndefined();
    expect(validate(tool('search_issues'), { q: 'x'.repeat(201) })?.field).toBe('q');
    expect(validate(tool('search_knowledgebase'), { q: 'x'.repeat(201) })?.field).toBe('q');
    expect(validate(tool('update_task_contract'), { issueId: 'i', agent: { instructions: { objective: 'x'.repeat(2001) } } })?.field).toBe('agent.instructions.objective');
    expect(validate(tool('request_approval'), { issueId: 'i', reason: 'x'.repeat(2001) })?.field).toBe('reason');
    expect(validate(tool('post_status'), { issueId: 'i', message: '' })?.field).toBe('message');
  });

  it('mcp: search_knowledgebase takes tag, as its REST twin does', () => {
    expect(validate(tool('search_knowledgebase'), { tag: ['ops'] })).toBeUndefined();
    expect(validate(tool('search_knowledgebase'), { tags: ['ops'] })?.field).toBe('tags');
  });

  it("mcp: a service's invalid-input is named by the tool's argument, not the service's field", () => {
    expect(argumentProblemOf(tool('update_issue_status'), 'id', "'id' is not a valid id")).toEqual({ field: 'issueId', message: "Invalid argument 'issueId': is not a valid id" });
    expect(argumentProblemOf(tool('update_task_status'), 'id', "'id' is required")).toEqual({ field: 'issueId', message: "Invalid argument 'issueId': is required" });
    const key = argumentProblemOf(tool('claim_work'), 'idempotency-key', "The 'idempotency-key' header must be 1 to 255 printable ASCII characters without spaces");
    expect(key).toEqual({ field: 'idempotencyKey', message: "Invalid argument 'idempotencyKey': must be 1 to 255 printable ASCII characters without spaces" });
    expect(key.message).not.toContain('header');
    expect(argumentProblemOf(tool('search_knowledgebase'), 'tags[1]', "'tags[1]' must be 1 to 50 characters without commas")).toEqual({
      field: 'tag[1]',
      message: "Invalid argument 'tag[1]': must be 1 to 50 characters without commas",
    });
    // Fields that are the tool's arguments already pass unchanged.
    expect(argumentProblemOf(tool('create_issue'), 'dueDate', "'dueDate' is not a calendar date")).toEqual({ field: 'dueDate', message: "'dueDate' is not a calendar date" });
    expect(argumentProblemOf(tool('get_task_contract'), 'issueId', "'issueId' is required").field).toBe('issueId');
  });

  it('mcp: each problem names the field the way the services do', () => {
    expect(validate(tool('add_comment'), { issueId: 'iss_1' })?.field).toBe('body');
    expect(validate(tool('add_comment'), { issueId: 'iss_1', body: 'x', extra: true })).toEqual({ field: 'extra', message: "Invalid argument 'extra': is not an argument of this tool" });
    expect(validate(tool('search_issues'), { status: ['ready', 'open'] })).toMatchObject({ field: 'status[1]', message: expect.stringContaining('must be one of backlog') });
    expect(validate(tool('update_task_contract'), { issueId: 'i', agent: { instructions: { verification: 'one' } } })?.field).toBe('agent.instructions.verification');
    expect(validate(tool('create_issue'), { projectId: 'p', title: 't', acceptanceChecks: [{ done: true }] })?.field).toBe('acceptanceChecks[0].title');
    expect(validate(tool('log_time'), { issueId: 'i', minutes: 0 })?.field).toBe('minutes');
  });
});

describe('mcp: transport rules', () => {
  it('mcp: JSON-accepting clients are served JSON; others keep their Accept for a 406', () => {
    expect(normalizeAccept(undefined)).toBe('application/json, text/event-stream');
    expect(normalizeAccept('*/*')).toBe('application/json, text/event-stream');
    expect(normalizeAccept('application/json')).toBe('application/json, text/event-stream');
    expect(normalizeAccept('application/json;q=0.9, text/event-stream')).toBe('application/json, text/event-stream');
    expect(normalizeAccept('text/html')).toBe('text/html');
    expect(normalizeAccept('text/event-stream')).toBe('text/event-stream');
  });

  it('mcp: an Origin must be listed; no Origin (agents, CLIs) is fine', () => {
    const allowed = ['https://app.example.com'];
    expect(originAllowed(undefined, allowed)).toBe(true);
    expect(originAllowed('https://app.example.com', allowed)).toBe(true);
    expect(originAllowed('https://APP.example.com', allowed)).toBe(true);
    expect(originAllowed('https://app.example.com:8443', allowed)).toBe(false);
    expect(originAllowed('http://app.example.com', allowed)).toBe(false);
    expect(originAllowed('https://evil.example', allowed)).toBe(false);
    expect(originAllowed('null', allowed)).toBe(false);
    expect(originAllowed('not a url', allowed)).toBe(false);
    expect(originAllowed('https://evil.example', [])).toBe(false);
    expect(originAllowed('https://anything.example', ['*'])).toBe(true);
  });
});

describe('mcp: first session decision', () => {
  const base: PreflightFacts = {
    missingWriteScopes: [],
    apiRequests: { used: 10, limit: 1000 },
    queue: { quotaState: 'within-run-budget', claimable: 2, total: 3, nextIssueId: 'iss_next' },
    pendingApprovals: [],
  };
  const held = { issueId: 'iss_held', expiresAt: '2030-01-01T00:00:00.000Z', fencingToken: 3 };

  it('mcp: the rules apply in order, each with the tool to call next', () => {
    expect(firstSessionDecision(base)).toMatchObject({ decision: 'claim-next', nextTool: 'service.claim_work', issueId: 'iss_next' });
    expect(firstSessionDecision({ ...base, apiRequests: { used: 1000, limit: 1000 }, held })).toMatchObject({ decision: 'blocked', nextTool: null });
    expect(firstSessionDecision({ ...base, apiRequests: { used: 10 ** 9, limit: null } }).decision).toBe('claim-next');
    expect(firstSessionDecision({ ...base, held })).toMatchObject({ decision: 'resume-claim', issueId: 'iss_held', nextTool: 'service.get_task_contract' });
    const waiting = { ...base, held, pendingApprovals: [{ id: 'apr_1', issueId: 'iss_held', reason: 'r', createdAt: 't' }] };
    expect(firstSessionDecision(waiting)).toMatchObject({ decision: 'wait-for-approval', nextTool: 'service.post_status' });
    const elsewhere = { ...base, held, pendingApprovals: [{ id: 'apr_1', issueId: 'iss_other', reason: 'r', createdAt: 't' }] };
    expect(firstSessionDecision(elsewhere).decision).toBe('resume-claim');
    expect(firstSessionDecision({ ...base, missingWriteScopes: ['agents:execute'] })).toMatchObject({ decision: 'read-only', reason: expect.stringContaining('agents:execute') });
    const { queue: _queue, ...noQueue } = base;
    expect(firstSessionDecision(noQueue)).toMatchObject({ decision: 'claim-next', nextTool: 'service.search_issues', issueId: null });
    expect(firstSessionDecision({ ...base, queue: { ...base.queue!, quotaState: 'run-budget-exhausted' } }).decision).toBe('read-only');
    expect(firstSessionDecision({ ...base, queue: { quotaState: 'within-run-budget', claimable: 0, total: 4 } })).toMatchObject({
      decision: 'no-ready-work',
      nextTool: 'service.list_issue_reminders',
    });
    // The compact list has no reminder tool: taskHealth.firstReminder comes with search_issues.
    expect(firstSessionDecision({ ...base, queue: { quotaState: 'within-run-budget', claimable: 0, total: 4 } }, { toolset: 'core', names: 'dotted' }).nextTool).toBe('service.search_issues');
  });
});

describe('mcp: workspace customization', () => {
  it('mcp: the evidence policy reads as guidance reviewers check, never as a rule the service enforces', () => {
    const c = customizationJson(
      create(WorkspaceCustomizationSchema, {
        workspaceId: 'ws_1',
        rulesCenter: [
          { id: 'status-moves', title: 'Allowed status moves', description: 'd', enforcedBy: 'service', severity: 'must' },
          { id: 'small-prs', title: 'Small PRs', description: 'd', enforcedBy: 'workspace', severity: 'should' },
        ],
        evidencePolicy: { requiredForDone: true, minimumItems: 2, acceptedKinds: ['test-result'], requireCheckCoverage: true },
      }),
    );
    expect(c.evidencePolicy).toMatchObject({ requiredForDone: true, minimumItems: 2, acceptedKinds: ['test-result'], requireCheckCoverage: true, enforcedBy: 'reviewers' });
    expect(c.evidencePolicy.description).toMatch(/not enforced by the service/);
    expect(c.rulesCenter.map((r) => [r.id, r.enforcedBy])).toEqual([
      ['status-moves', 'service'],
      ['evidence-policy', 'reviewers'],
      ['small-prs', 'workspace'],
    ]);
    expect(c.rulesCenter[1]).toMatchObject({ severity: 'must', description: expect.stringContaining('never refused') });
  });
});

describe('mcp: guidance names tools over MCP', () => {
  const dotted = { toolset: 'full', names: 'dotted' } as const;
  const portable = { toolset: 'core', names: 'portable' } as const;

  it('mcp: safe next actions become tool calls with the arguments known, in the list\'s name style', () => {
    const issue = {
      id: 'iss_1',
      nextAction: 'Claim it (POST /api/agents/claim) and start work.',
      taskHealth: {
        safeNextActions: [
          { action: 'set-due-date', description: 'Set a due date (PATCH /api/issues/{id} dueDate)' },
          { action: 'finish-dependencies', description: 'Finish or unblock the open dependencies first' },
          { action: 'pick-other-work', description: 'pick' },
          { action: 'something-new', description: 'Log it (POST /api/issues/{id}/time-entries)' },
        ],
      },
    };
    const out = forMcp({ data: { issues: [issue] } }, dotted).data.issues[0]!;
    expect(out.nextAction).toBe('Claim it (service.claim_work) and start work.');
    expect(out.taskHealth.safeNextActions).toEqual([
      { action: 'set-due-date', description: 'Set a due date (service.update_issue with dueDate, YYYY-MM-DD)', tool: 'service.update_issue', arguments: { issueId: 'iss_1' } },
      { action: 'finish-dependencies', description: expect.stringContaining('service.search_issues'), tool: 'service.search_issues', arguments: { includeDependencyGraph: true } },
      { action: 'pick-other-work', description: 'Pick other ready work (service.list_ready_work)', tool: 'service.list_ready_work', arguments: {} },
      // An action the table does not know keeps the service's words, REST calls renamed.
      { action: 'something-new', description: 'Log it (service.log_time)', tool: null, arguments: {} },
    ]);
    // A reminder item names its task by issueId.
    const reminder = forMcp({ data: [{ issueId: 'iss_2', safeNextActions: [{ action: 'log-time', description: 'x' }] }] }, portable).data[0]!;
    expect(reminder.safeNextActions).toEqual([{ action: 'log-time', description: 'Log the time spent so far (service_log_time with minutes)', tool: 'service_log_time', arguments: { issueId: 'iss_2' } }]);
    // Refusal messages too; anything else passes unchanged.
    expect(forMcp({ error: { code: 'x', message: 'Start it by claiming (POST /api/agents/claim)' } }, portable).error.message).toBe('Start it by claiming (service_claim_work)');
    expect(toolMentions('GET /api/unknown stays', dotted)).toBe('GET /api/unknown stays');
    expect(forMcp({ data: { title: 'POST /api/agents/claim' } }, dotted).data.title).toBe('POST /api/agents/claim');
  });

  it('mcp: every tool a safe next action names is in the core list', () => {
    for (const action of ['reschedule-or-escalate', 'post-status', 'log-time', 'set-due-date', 'check-status', 'finish-dependencies', 'pick-other-work', 'claim']) {
      const rendered = mcpSafeAction({ action, description: '' }, 'iss_1', dotted);
      expect(rendered.tool, action).not.toBeNull();
      for (const named of [rendered.tool!, ...(rendered.description.match(/service\.[a-z_]+/g) ?? [])]) {
        expect(toolNamed(named)?.core, `${action} names ${named}`).toBe(true);
      }
    }
  });
});

describe('protocol revisions', () => {
  it('names the session-era revisions the SDK serves, without loading it (protocol.ts)', () => {
    expect(LEGACY_PROTOCOL_VERSIONS).toEqual([...SUPPORTED_PROTOCOL_VERSIONS]);
  });
});
