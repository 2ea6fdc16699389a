import { describe, expect, it } from 'vitest';
import { firstSessionDecision, type PreflightFacts } from '../routes/guidance-agent.js';
import { createArgumentValidator } from './arguments.js';
import { CALL_ORDER, CATALOG, listedTools, requiredScopes, toolNamed } from './catalog.js';
import { normalizeAccept, originAllowed } from './route.js';
import { TOOL_HANDLERS } from './tools.js';

/** The tool names of the API document (§4, endpoint 14), in its order. */
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
  'add_comment',
  'log_time',
  'add_evidence',
  'request_approval',
  'list_issue_reminders',
  'search_issues',
  'create_issue',
  'update_issue_status',
];

describe('mcp: tool catalog', () => {
  it('mcp: the catalog is the 25 documented names, each with a handler, title, description, schemas and annotations', () => {
    expect(CATALOG.map((t) => t.name)).toEqual(DOCUMENTED);
    for (const tool of CATALOG) {
      expect(TOOL_HANDLERS[tool.aliasOf ?? tool.name], tool.name).toBeTypeOf('function');
      expect(tool.title.length).toBeGreaterThan(3);
      expect(tool.description.length).toBeGreaterThan(30);
      expect(tool.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
      expect(tool.outputSchema).toMatchObject({ type: 'object', properties: { data: expect.any(Object) } });
      expect(tool.annotations.openWorldHint).toBe(false);
      expect(toolNamed(`service.${tool.name}`)).toBe(tool);
    }
    expect(toolNamed('search_issues')).toBeUndefined();
  });

  it('mcp: task-named tools are aliases sharing the issue-named implementation and schemas', () => {
    const aliases = CATALOG.filter((t) => t.aliasOf);
    expect(aliases.map((t) => [t.name, t.aliasOf])).toEqual([
      ['list_task_reminders', 'list_issue_reminders'],
      ['search_tasks', 'search_issues'],
      ['create_task', 'create_issue'],
      ['update_task_status', 'update_issue_status'],
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
    expect(core).toHaveLength(14);
    for (const left of ['get_client_bootstrap', 'get_workspace_customization', 'get_agent_preflight', 'get_market_standards', 'get_launch_readiness', 'search_knowledgebase']) {
      expect(core).not.toContain(left);
    }
    expect(core.some((n) => n.includes('reminder'))).toBe(false);
    expect(core.filter((n) => CATALOG.find((t) => t.name === n)?.aliasOf)).toEqual([]);
    expect(listedTools('full')).toHaveLength(25);
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
});

describe('mcp: arguments', () => {
  const validate = createArgumentValidator();
  const tool = (name: string) => toolNamed(`service.${name}`)!;

  it('mcp: valid arguments pass; types are never coerced', () => {
    expect(validate(tool('log_time'), { issueId: 'iss_1', minutes: 5 })).toBeUndefined();
    expect(validate(tool('get_client_bootstrap'), undefined)).toBeUndefined();
    expect(validate(tool('log_time'), { issueId: 'iss_1', minutes: '5' })).toEqual({ field: 'minutes', message: "Invalid argument 'minutes': must be integer" });
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
    expect(firstSessionDecision(noQueue)).toMatchObject({ decision: 'claim-next', nextTool: 'service.search_tasks', issueId: null });
    expect(firstSessionDecision({ ...base, queue: { ...base.queue!, quotaState: 'run-budget-exhausted' } }).decision).toBe('read-only');
    expect(firstSessionDecision({ ...base, queue: { quotaState: 'within-run-budget', claimable: 0, total: 4 } })).toMatchObject({
      decision: 'no-ready-work',
      nextTool: 'service.list_task_reminders',
    });
  });
});
