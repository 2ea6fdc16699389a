/* eslint-disable @typescript-eslint/no-explicit-any -- tool results and response bodies are whatever the server sent; tests assert on them. */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG, listedTools, PORTABLE_NAME, toolsNamedIn } from '../../services/gateway/src/mcp/catalog.js';
import { createKey, createWorkspace, type TestKey } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { login, request, requestOversized, type ApiResponse } from '../support/http.js';

/**
 * The remote MCP endpoint end to end, in both modes, with the official SDK clients over real
 * HTTP: the v2 client on the stateless 2026-07-28 revision and on the session-era handshake, and
 * the v1 client (what deployed agents run). Tool discovery, a whole agent session checked through
 * REST afterwards, a read-only token, refusals, protocol edge cases, and parity with the REST twins.
 */

const ALLOWED_ORIGIN = 'https://agents.example.com';
const MODERN = '2026-07-28';
const WRITE_TOOLS = [
  'create_task',
  'create_issue',
  'update_task_contract',
  'claim_work',
  'post_status',
  'cancel_work',
  'update_task_status',
  'update_issue_status',
  'update_task',
  'update_issue',
  'add_comment',
  'log_time',
  'add_evidence',
  'request_approval',
];

type Era = 'modern' | 'legacy' | 'v1';

interface McpSession {
  era: Era;
  listTools(): Promise<any[]>;
  call(name: string, args?: Record<string, unknown>): Promise<any>;
  close(): Promise<void>;
}

async function connect(baseUrl: string, token: string, era: Era, toolset?: 'core', names: 'dotted' | 'portable' = 'dotted'): Promise<McpSession> {
  const query = new URLSearchParams({ ...(toolset ? { toolset } : {}), ...(names === 'portable' ? { names } : {}) }).toString();
  const url = new URL(`${baseUrl}/api/mcp${query ? `?${query}` : ''}`);
  const prefix = names === 'portable' ? 'service_' : 'service.';
  const requestInit = { headers: { authorization: `Bearer ${token}` } };
  if (era === 'v1') {
    const client = new V1Client({ name: 'e2e-v1', version: '1.0.0' });
    await client.connect(new V1Transport(url, { requestInit }));
    return {
      era,
      listTools: async () => (await client.listTools()).tools,
      call: (name, args = {}) => client.callTool({ name: `${prefix}${name}`, arguments: args }),
      close: () => client.close(),
    };
  }
  const client = new Client({ name: `e2e-${era}`, version: '1.0.0' }, { versionNegotiation: { mode: era === 'modern' ? { pin: MODERN } : 'legacy' } });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit }));
  return {
    era,
    listTools: async () => (await client.listTools()).tools,
    call: (name, args = {}) => client.callTool({ name: `service.${name}`, arguments: args }),
    close: () => client.close(),
  };
}

/** A raw JSON-RPC POST (the session-era shape unless `meta` is given), for what SDK clients never send. */
function rpcBody(method: string, params: Record<string, unknown> = {}, id: number | null = 1, modern = false) {
  const withMeta = modern ? { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } } : params;
  return { jsonrpc: '2.0', ...(id === null ? {} : { id }), method, params: withMeta };
}

describe.each<Mode>(['all-in-one', 'distributed'])('mcp (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;
  let ws: string;
  let projectId: string;
  let initiativeId: string;
  let agent: TestKey;
  let reader: TestKey;
  let peer: TestKey;

  const call = (method: string, path: string, options: { body?: unknown; cookie?: string; token?: string; rawBody?: string; headers?: Record<string, string> } = {}): Promise<ApiResponse> =>
    request(cluster.baseUrl, method, path, options);
  const api = {
    get: (path: string) => call('GET', path, { cookie: admin }),
    post: (path: string, body: unknown) => call('POST', path, { cookie: admin, body }),
    patch: (path: string, body: unknown) => call('PATCH', path, { cookie: admin, body }),
  };
  const rest = (token: TestKey) => ({
    get: (path: string) => call('GET', path, { token: token.token }),
    post: (path: string, body: unknown) => call('POST', path, { token: token.token, body }),
    patch: (path: string, body: unknown) => call('PATCH', path, { token: token.token, body }),
  });
  const mcpPost = (body: unknown, options: { token?: string | null; headers?: Record<string, string>; rawBody?: string; query?: string } = {}) =>
    call('POST', `/api/mcp${options.query ?? ''}`, {
      ...(options.token === null ? {} : { token: options.token ?? agent.token }),
      headers: { accept: 'application/json, text/event-stream', ...options.headers },
      ...(options.rawBody !== undefined ? { rawBody: options.rawBody } : { body }),
    });
  const newIssue = async (body: Record<string, unknown> = {}): Promise<any> => {
    const res = await api.post('/api/issues', { projectId, title: 'An issue', ...body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data;
  };

  beforeAll(async () => {
    cluster = await startCluster(mode, { env: { MCP_ALLOWED_ORIGINS: ALLOWED_ORIGIN } });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = (await createWorkspace(cluster.baseUrl, admin, `MCP ${mode}`, 'pro')).id;
    const all = ['issues:read', 'issues:write', 'projects:read', 'projects:write', 'agents:read', 'agents:execute'];
    agent = await createKey(cluster.baseUrl, admin, ws, 'pro', all, 'agent-mcp');
    peer = await createKey(cluster.baseUrl, admin, ws, 'pro', all, 'agent-rest');
    reader = await createKey(cluster.baseUrl, admin, ws, 'pro', ['issues:read', 'projects:read', 'agents:read'], 'agent-reader');
    const program = await api.post('/api/programs', { workspaceId: ws, name: 'Platform' });
    const initiative = await api.post('/api/initiatives', {
      programId: program.body.data.id,
      name: 'Launch',
      goal: 'Ship with proof',
      contextPack: [{ kind: 'doc', title: 'Launch plan', path: 'docs/launch.md' }],
    });
    initiativeId = initiative.body.data.id;
    const project = await api.post('/api/projects', {
      workspaceId: ws,
      name: 'API',
      goal: 'Serve agents',
      initiativeId,
      contextPack: [{ kind: 'file', title: 'Entry point', path: 'src/main.ts' }],
    });
    expect(project.status).toBe(201);
    projectId = project.body.data.id;
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('mcp: every era lists the 27 service. tools with titles, schemas and annotations; ?toolset=core lists the compact 15', async () => {
    for (const era of ['modern', 'legacy', 'v1'] as const) {
      const session = await connect(cluster.baseUrl, reader.token, era);
      const tools = await session.listTools();
      await session.close();
      expect(tools.map((t) => t.name).sort(), era).toEqual(listedTools('full').map((t) => t.name).sort());
      expect(tools).toHaveLength(27);
      for (const tool of tools) {
        expect(tool.name).toMatch(/^service\.[a-z_]+$/);
        expect(tool.title, tool.name).toEqual(expect.any(String));
        expect(tool.description.length, tool.name).toBeGreaterThan(20);
        expect(tool.inputSchema.type).toBe('object');
        expect(tool.outputSchema.type).toBe('object');
        expect(tool.annotations).toMatchObject({ readOnlyHint: expect.any(Boolean), destructiveHint: expect.any(Boolean), idempotentHint: expect.any(Boolean), openWorldHint: false });
      }
      // The wire carries exactly the catalog the token benchmark measures.
      expect(tools.find((t) => t.name === 'service.search_issues')).toEqual(listedTools('full').find((t) => t.name === 'service.search_issues'));
    }
    const core = await connect(cluster.baseUrl, reader.token, 'modern', 'core');
    const coreNames = (await core.listTools()).map((t) => t.name);
    await core.close();
    // The instructions of each list name only tools that list has (canonical names, no aliases).
    const init = (query: string) =>
      mcpPost(rpcBody('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }), { token: reader.token, query });
    for (const [query, names] of [['', listedTools('full')], ['?toolset=core', listedTools('core')]] as const) {
      const instructions: string = (await init(query)).body.result.instructions;
      const listed = new Set(names.map((t) => t.name.replace('service.', '')));
      const named = toolsNamedIn(instructions);
      expect(named.length, query).toBeGreaterThan(2);
      expect(named.filter((n) => !listed.has(n)), `${query || 'full'}: instructions name unlisted tools`).toEqual([]);
      expect(instructions).not.toContain('..');
    }
    expect(coreNames.sort()).toEqual(
      [
        'add_comment',
        'add_evidence',
        'cancel_work',
        'claim_work',
        'create_issue',
        'get_context_pack',
        'get_task_contract',
        'list_ready_work',
        'log_time',
        'post_status',
        'request_approval',
        'search_issues',
        'update_issue',
        'update_issue_status',
        'update_task_contract',
      ].map((n) => `service.${n}`),
    );
  });

  it('mcp: ?names=portable lists service_ names (with toolset=core too); both names call the same tool with the same result', async () => {
    for (const toolset of ['full', 'core'] as const) {
      const query = `?names=portable${toolset === 'core' ? '&toolset=core' : ''}`;
      const listed = (await mcpPost(rpcBody('tools/list'), { token: reader.token, query })).body.result.tools;
      expect(listed.map((t: any) => t.name)).toEqual(listedTools(toolset, 'portable').map((t) => t.name));
      for (const tool of listed) expect(tool.name).toMatch(PORTABLE_NAME);
      const init = await mcpPost(rpcBody('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }), { token: reader.token, query });
      expect(init.body.result.instructions).toContain('service_');
      expect(init.body.result.instructions).not.toContain('service.');
      expect(init.body.result.serverInfo).toEqual({ name: 'planning-service', title: 'Planning service', version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    }
    const issue = await newIssue({ title: 'Portable twin', dueDate: '2031-05-01' });
    // The SDK client on the portable URL, calling by the portable names.
    const s = await connect(cluster.baseUrl, agent.token, 'modern', 'core', 'portable');
    expect((await s.listTools()).every((t) => PORTABLE_NAME.test(t.name))).toBe(true);
    const viaPortable = await s.call('get_task_contract', { issueId: issue.id });
    await s.close();
    // Both names, on either URL, call the same tool with the same result.
    for (const query of ['', '?names=portable']) {
      for (const name of ['service.get_task_contract', 'service_get_task_contract']) {
        const res = await mcpPost(rpcBody('tools/call', { name, arguments: { issueId: issue.id } }), { query });
        expect(res.body.result.structuredContent, `${name} ${query}`).toEqual(viaPortable.structuredContent);
      }
    }
    // Every read-only tool and alias, by both names, answers alike (bootstrap and preflight are left
    // out: they report the API quota, which each call uses).
    for (const tool of CATALOG.filter((t) => t.annotations.readOnlyHint && !['get_client_bootstrap', 'get_agent_preflight'].includes(t.name))) {
      const args = ((tool.inputSchema.required as string[] | undefined) ?? []).includes('issueId') ? { issueId: issue.id } : {};
      const [dotted, portable] = await Promise.all(['.', '_'].map((sep) => mcpPost(rpcBody('tools/call', { name: `service${sep}${tool.name}`, arguments: args }))));
      expect(dotted!.body.result?.isError, `${tool.name}: ${JSON.stringify(dotted!.body)}`).toBeFalsy();
      expect(portable!.body.result.structuredContent, tool.name).toEqual(dotted!.body.result.structuredContent);
    }
    const preflight = (await mcpPost(rpcBody('tools/call', { name: 'service.get_agent_preflight', arguments: {} }), { query: '?names=portable' })).body.result.structuredContent.data;
    expect(preflight.firstSessionDecision.nextTool).toMatch(/^service_/);
    const bootstrap = (await mcpPost(rpcBody('tools/call', { name: 'service_get_client_bootstrap', arguments: {} }), { query: '?names=portable' })).body.result.structuredContent.data;
    expect(bootstrap.mcp.availableTools.every((n: string) => n.startsWith('service_'))).toBe(true);
    expect(bootstrap.recommendedCallOrder.every((st: any) => st.tool.startsWith('service_'))).toBe(true);
    // A refusal names the tool as the caller's list does.
    const refused = await mcpPost(rpcBody('tools/call', { name: 'service.add_comment', arguments: { issueId: issue.id, body: 'x' } }), { token: reader.token, query: '?names=portable' });
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toContain('service_add_comment');
  });

  it('mcp: the whole job: update_issue changes a task\'s fields through the guarded path; safeNextActions name tools over MCP, paths over REST', async () => {
    const milestone = await api.post('/api/milestones', { projectId, name: 'M1' });
    expect(milestone.status, JSON.stringify(milestone.body)).toBe(201);
    const issue = await newIssue({ title: 'Needs dates' });
    // Over MCP the advice is a tool call with the task id filled in; over REST it names the path.
    const s = await connect(cluster.baseUrl, agent.token, 'modern', 'core', 'portable');
    const viaMcp = (await s.call('search_issues', { q: 'Needs dates' })).structuredContent.data.issues[0];
    const advice = viaMcp.taskHealth.safeNextActions.find((a: any) => a.action === 'set-due-date');
    expect(advice).toEqual({ action: 'set-due-date', description: expect.stringContaining('service_update_issue'), tool: 'service_update_issue', arguments: { issueId: issue.id } });
    expect(viaMcp.taskHealth.safeNextActions.every((a: any) => a.tool !== null && !a.description.includes('/api/'))).toBe(true);
    expect(viaMcp.nextAction).not.toContain('/api/');
    const viaRest = (await rest(agent).get(`/api/issues?workspaceId=${ws}&q=Needs%20dates`)).body.data.issues[0];
    expect(viaRest.taskHealth.safeNextActions.find((a: any) => a.action === 'set-due-date')).toEqual({ action: 'set-due-date', description: expect.stringContaining('PATCH /api/issues/{id}') });
    const reminders = (await call('POST', '/api/mcp?names=portable', { token: agent.token, headers: { accept: 'application/json' }, body: rpcBody('tools/call', { name: 'service.list_issue_reminders', arguments: {} }) })).body.result.structuredContent.data;
    expect(reminders.find((r: any) => r.issueId === issue.id).safeNextActions.map((a: any) => a.tool)).toContain('service_update_issue');

    // Following the advice: the tool it names, its arguments, plus the field it says to add.
    const dated = (await s.call(advice.tool.replace('service_', ''), { ...advice.arguments, dueDate: '2031-07-01' })).structuredContent;
    expect(dated.data.dueDate).toBe('2031-07-01');
    expect(dated.meta.changedFields).toEqual(['dueDate']);
    // Every field the pair changes, under the claim's fencing token (as PATCH /api/issues/{id} takes it).
    const claimed = (await s.call('claim_work', { issueId: issue.id })).structuredContent.data;
    const fencingToken = claimed.claim.fencingToken;
    const changes = { title: 'Dated', description: 'Now with dates', priority: 'urgent', labels: ['mcp', 'dates'], estimate: 3.5, assignedAgentId: 'agent-mcp', milestoneId: milestone.body.data.id };
    const updated = await s.call('update_issue', { issueId: issue.id, ...changes, fencingToken });
    expect(updated.isError, JSON.stringify(updated.structuredContent)).toBeFalsy();
    expect(updated.structuredContent.meta.changedFields.sort()).toEqual(['agent.assignedAgentId', 'description', 'estimate', 'labels', 'milestoneId', 'priority', 'title'].sort());
    const stale = await s.call('update_task', { issueId: issue.id, title: 'Late', fencingToken: fencingToken + 1 });
    expect(stale.structuredContent.error).toMatchObject({ code: 'work-already-claimed', reason: 'stale-claim' });
    const conflict = await s.call('update_task', { issueId: issue.id, title: 'Late', version: 1 });
    expect(conflict.structuredContent.error).toMatchObject({ reason: 'version-conflict' });
    // null clears; the alias does the same through the same path; the same call again changes nothing.
    const cleared = (await s.call('update_task', { issueId: issue.id, dueDate: null, estimate: null, assignedAgentId: null, milestoneId: null, fencingToken })).structuredContent;
    expect(cleared.meta.changedFields.sort()).toEqual(['agent.assignedAgentId', 'dueDate', 'estimate', 'milestoneId'].sort());
    expect((await s.call('update_task', { issueId: issue.id, dueDate: null, fencingToken })).structuredContent.meta.changedFields).toEqual([]);
    await expect(s.call('update_issue', { issueId: issue.id })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('at least one field') });
    await expect(s.call('update_issue', { issueId: issue.id, status: 'done' })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("'status'") });
    await expect(s.call('update_issue', { issueId: issue.id, assignedAgentId: 'Not An Agent' })).rejects.toMatchObject({ code: -32602, data: { field: 'assignedAgentId' } });
    await expect(s.call('update_issue', { issueId: issue.id, dueDate: '2031-02-30' })).rejects.toMatchObject({ code: -32602, data: { field: 'dueDate' } });
    await s.call('cancel_work', { issueId: issue.id });
    await s.close();
    const detail = (await api.get(`/api/issues/${issue.id}`)).body.data;
    expect(detail).toMatchObject({ title: 'Dated', description: 'Now with dates', priority: 'urgent', labels: ['mcp', 'dates'], dueDate: null, estimate: null, milestoneId: null, agent: { assignedAgentId: null } });
    expect(detail.activity.map((a: any) => a.actor)).toContainEqual({ type: 'api-key', id: agent.id });
  });

  it('mcp: a whole agent session over the SDK client (modern and session-era), then the state through REST', async () => {
    await api.patch(`/api/workspaces/${ws}/customization`, {
      workspaceRules: [{ id: 'small-prs', title: 'Small pull requests', description: 'Under 400 lines', severity: 'should' }],
    });
    await api.post('/api/knowledgebase', { workspaceId: ws, title: 'Release runbook', body: 'Deploy with the canary first.', tags: ['ops'], projectId });
    for (const era of ['modern', 'v1'] as const) {
      const issue = await newIssue({
        title: `Session task ${era}`,
        priority: 'urgent',
        dueDate: '2031-01-31',
        acceptanceChecks: [{ title: 'Tests pass' }],
        agent: { instructions: { objective: 'Make it work' } },
      });
      const checkId = issue.acceptanceChecks[0].id;
      const s = await connect(cluster.baseUrl, agent.token, era);

      const preflight = (await s.call('get_agent_preflight')).structuredContent.data;
      expect(preflight.firstSessionDecision).toMatchObject({ decision: 'claim-next', nextTool: 'service.claim_work' });
      expect(preflight.checks.map((c: any) => c.id)).toEqual(['scopes', 'api-quota', 'agent-run-quota', 'held-claim', 'pending-approvals', 'ready-work']);
      const customization = (await s.call('get_workspace_customization')).structuredContent.data;
      expect(customization.viewModes.map((m: any) => m.label)).toEqual(['Cards', 'List', 'Tags', 'Swimlanes']);
      expect(customization.rulesCenter.map((r: any) => r.id)).toContain('small-prs');
      expect(Object.keys(customization)).toEqual(expect.arrayContaining(['viewPresets', 'adminSetupPath', 'evidencePolicy', 'handoffPacket']));
      const kb = (await s.call('search_knowledgebase', { q: 'canary' })).structuredContent.data;
      expect(kb.map((h: any) => h.document.title)).toEqual(['Release runbook']);
      const found = (await s.call('search_tasks', { q: `Session task ${era}` })).structuredContent.data.issues;
      expect(found).toHaveLength(1);
      expect(found[0].taskHealth).toMatchObject({ blocksAgentClaim: false });

      const ready = (await s.call('list_ready_work')).structuredContent;
      expect(ready.data.map((i: any) => i.id)).toContain(issue.id);
      const claimed = (await s.call('claim_work', { issueId: issue.id, idempotencyKey: `session-${era}-${mode}` })).structuredContent.data;
      expect(claimed.issue).toEqual({ id: issue.id, status: 'in-progress' });
      const fencingToken = claimed.claim.fencingToken;
      expect(fencingToken).toEqual(expect.any(Number));

      const contract = (await s.call('get_task_contract', { issueId: issue.id })).structuredContent.data;
      expect(contract.taskContract).toMatchObject({ goal: 'Make it work', completeness: { ready: false } });
      const updated = (
        await s.call('update_task_contract', { issueId: issue.id, agent: { instructions: { expectedOutput: 'A merged PR', verification: ['pnpm test'] } } })
      ).structuredContent.data;
      expect(updated.taskContract.completeness.ready).toBe(true);
      const pack = (await s.call('get_context_pack', { issueId: issue.id })).structuredContent.data;
      expect(pack.project.items.map((i: any) => i.path)).toEqual(['src/main.ts']);
      expect(pack.initiative.items.map((i: any) => i.path)).toEqual(['docs/launch.md']);
      expect(pack.documents.map((d: any) => d.title)).toEqual(['Release runbook']);

      await s.call('post_status', { issueId: issue.id, message: 'Tests written, implementing', fencingToken });
      await s.call('add_comment', { issueId: issue.id, body: 'Found the cause' });
      await s.call('log_time', { issueId: issue.id, minutes: 25, note: 'implementation' });
      await s.call('add_evidence', { issueId: issue.id, kind: 'test-result', title: 'pnpm test: 120 passed', checkId });
      const approval = (await s.call('request_approval', { issueId: issue.id, reason: 'Touches the billing path' })).structuredContent.data;
      expect(approval.status).toBe('pending');
      const done = (await s.call('update_task_status', { issueId: issue.id, status: 'in-review', fencingToken })).structuredContent;
      expect(done.data.status).toBe('in-review');
      expect(done.meta.changedFields).toContain('status');
      await s.close();

      const detail = (await api.get(`/api/issues/${issue.id}`)).body.data;
      expect(detail.status).toBe('in-review');
      expect(detail.timeLoggedMinutes).toBe(25);
      expect(detail.acceptanceChecks[0].done).toBe(true);
      expect(detail.evidence.map((e: any) => e.title)).toEqual(['pnpm test: 120 passed']);
      expect(detail.approvals.map((a: any) => [a.reason, a.status])).toEqual([['Touches the billing path', 'pending']]);
      expect(detail.comments.map((c: any) => c.body)).toEqual(expect.arrayContaining(['Found the cause']));
      expect(detail.comments.some((c: any) => c.body.includes('Tests written, implementing'))).toBe(true);
      expect(detail.agent.instructions).toMatchObject({ objective: 'Make it work', expectedOutput: 'A merged PR', verification: ['pnpm test'] });
      // Completion ended the claim: the agent is free to claim again.
      const after = await rest(agent).get('/api/agents/ready-work');
      expect(after.status).toBe(200);
      expect(after.body.queueSummary.heldByYou).toBe(0);
    }
  });

  it('mcp: a token with read scopes only: every write tool is refused with 403 and nothing changes', async () => {
    const issue = await newIssue({ title: 'Read-only target' });
    const before = (await api.get(`/api/issues/${issue.id}`)).body.data;
    const args: Record<string, Record<string, unknown>> = {
      create_task: { projectId, title: 'Nope' },
      create_issue: { projectId, title: 'Nope' },
      update_task_contract: { issueId: issue.id, agent: { instructions: { objective: 'Nope' } } },
      claim_work: { issueId: issue.id },
      post_status: { issueId: issue.id, message: 'Nope' },
      cancel_work: { issueId: issue.id },
      update_task_status: { issueId: issue.id, status: 'blocked' },
      update_issue_status: { issueId: issue.id, status: 'blocked' },
      update_task: { issueId: issue.id, title: 'Nope' },
      update_issue: { issueId: issue.id, dueDate: null },
      add_comment: { issueId: issue.id, body: 'Nope' },
      log_time: { issueId: issue.id, minutes: 5 },
      add_evidence: { issueId: issue.id, kind: 'note', title: 'Nope' },
      request_approval: { issueId: issue.id, reason: 'Nope' },
    };
    expect(Object.keys(args).sort()).toEqual([...WRITE_TOOLS].sort());
    for (const [name, a] of Object.entries(args)) {
      for (const modern of [false, true]) {
        const res = await mcpPost(rpcBody('tools/call', { name: `service.${name}`, arguments: a }, 7, modern), {
          token: reader.token,
          headers: modern ? { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': `service.${name}` } : {},
        });
        expect(res.status, `${name} ${modern ? 'modern' : 'legacy'}`).toBe(403);
        expect(res.body.error).toMatchObject({ code: 'forbidden', reason: 'missing-scope' });
        expect(res.body.error.message).toContain('issues:write');
      }
    }
    // The SDK client reads the 403's insufficient_scope challenge: the scopes to ask for (those held and those needed).
    const s = await connect(cluster.baseUrl, reader.token, 'modern');
    await expect(s.call('add_comment', { issueId: issue.id, body: 'Nope' })).rejects.toThrow(
      'Insufficient scope: required "issues:read issues:write projects:read agents:read agents:execute"',
    );
    // Reads still work for it.
    expect((await s.call('get_task_contract', { issueId: issue.id })).isError).toBeFalsy();
    await s.close();
    const after = (await api.get(`/api/issues/${issue.id}`)).body.data;
    expect(after).toMatchObject({ version: before.version, status: 'ready', commentCount: 0, timeLoggedMinutes: 0, evidenceCount: 0 });
    expect(after.approvals).toEqual([]);
    const nope = await api.get(`/api/issues?workspaceId=${ws}&q=Nope`);
    expect(nope.body.data.issues).toEqual([]);
  });

  it('mcp: refusals are tool errors with the REST codes; bad arguments are -32602 naming the field', async () => {
    const s = await connect(cluster.baseUrl, peer.token, 'modern');
    const blocked = await newIssue({ title: 'Backlog item', status: 'backlog' });
    const notReady = await s.call('claim_work', { issueId: blocked.id });
    expect(notReady.isError).toBe(true);
    expect(notReady.structuredContent.error).toMatchObject({ code: 'work-already-claimed', reason: 'not-ready' });
    const restNotReady = await rest(peer).post('/api/agents/claim', { issueId: blocked.id });
    expect(restNotReady.status).toBe(409);
    expect(restNotReady.body.error).toMatchObject({ code: notReady.structuredContent.error.code, reason: notReady.structuredContent.error.reason });

    const missing = await s.call('get_task_contract', { issueId: 'iss_does_not_exist' });
    expect(missing).toMatchObject({ isError: true, structuredContent: { error: { code: 'not-found' } } });
    const move = await s.call('update_issue_status', { issueId: blocked.id, status: 'done' });
    expect(move.structuredContent.error).toMatchObject({ code: 'work-already-claimed', reason: 'invalid-transition' });

    await expect(s.call('log_time', { issueId: blocked.id, minutes: '5' })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("'minutes'") });
    await expect(s.call('add_comment', { issueId: blocked.id })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("'body'") });
    await expect(s.call('search_issues', { status: ['open'] })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("'status[0]'") });
    await expect(s.call('add_comment', { issueId: blocked.id, body: 'x', extra: 1 })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("'extra'") });
    // A service-side field check is -32602 too, naming the field as the tool's argument.
    await expect(s.call('create_issue', { projectId, title: 'Bad date', dueDate: '2031-02-30' })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('dueDate') });
    const argError = async (name: string, args: Record<string, unknown>) => (await mcpPost(rpcBody('tools/call', { name: `service.${name}`, arguments: args }), { token: peer.token })).body.error;
    // Empty ids and keys: caught by the schema (minLength), named as the argument.
    expect(await argError('update_issue_status', { issueId: '', status: 'ready' })).toMatchObject({ code: -32602, data: { field: 'issueId' } });
    expect(await argError('claim_work', { issueId: blocked.id, idempotencyKey: '' })).toMatchObject({ code: -32602, data: { field: 'idempotencyKey' } });
    // The service names the task id `id` (TaskService.UpdateTask); the tool's argument is issueId.
    const badId = await argError('update_issue_status', { issueId: 'not an id!', status: 'ready' });
    expect(badId).toMatchObject({ code: -32602, data: { code: 'invalid-input', field: 'issueId' }, message: expect.stringContaining("'issueId'") });
    expect(badId.message).not.toMatch(/'id'/);
    expect(await argError('add_comment', { issueId: blocked.id, body: 'x'.repeat(10_001) })).toMatchObject({ code: -32602, data: { field: 'body' } });
    // Bounds the list leaves out to spare the model's context (issued values' int32 range, a brief
    // list's length) still hold, refused naming the argument.
    expect(await argError('post_status', { issueId: blocked.id, message: 'x', fencingToken: 2 ** 31 })).toMatchObject({ code: -32602, data: { field: 'fencingToken' } });
    expect(await argError('update_issue_status', { issueId: blocked.id, status: 'ready', version: 2 ** 31 })).toMatchObject({ code: -32602, data: { field: 'version' } });
    const tooMany = Array.from({ length: 31 }, (_, i) => `constraint ${i}`);
    expect(await argError('update_task_contract', { issueId: blocked.id, agent: { instructions: { constraints: tooMany } } })).toMatchObject({ code: -32602, data: { field: 'agent.instructions.constraints' } });
    await s.close();
    expect((await api.get(`/api/issues?workspaceId=${ws}&q=Bad%20date`)).body.data.issues).toEqual([]);
  });

  it('mcp: protocol edge cases: malformed and batch bodies, unknown method and tool, Accept, Origin, GET, missing token', async () => {
    const list = rpcBody('tools/list');
    const malformed = await mcpPost(undefined, { rawBody: '{"jsonrpc": "2.0", "id": 1, "method": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe(-32700);
    const batch = await mcpPost([list, rpcBody('tools/list', {}, 2)]);
    expect(batch.status).toBe(400);
    expect(batch.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    const notJsonRpc = await mcpPost({ hello: 'world' });
    expect(notJsonRpc.status).toBe(400);
    expect(notJsonRpc.body.error.code).toEqual(expect.any(Number));

    const unknownMethod = await mcpPost(rpcBody('resources/teleport'));
    expect(unknownMethod.status).toBe(200);
    expect(unknownMethod.body.error.code).toBe(-32601);
    const modernHeaders = (method: string) => ({ 'mcp-protocol-version': MODERN, 'mcp-method': method });
    const modernUnknown = await mcpPost(rpcBody('resources/teleport', {}, 1, true), { headers: modernHeaders('resources/teleport') });
    expect(modernUnknown.body.error.code).toBe(-32601);
    const listen = await mcpPost(rpcBody('subscriptions/listen', { notifications: { toolsListChanged: true } }, 1, true), { headers: modernHeaders('subscriptions/listen') });
    expect(listen.headers.get('content-type')).toContain('application/json');
    expect(listen.body.error.code).toBe(-32601);
    const unknownTool = await mcpPost(rpcBody('tools/call', { name: 'service.launch_rockets', arguments: {} }));
    expect(unknownTool.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('launch_rockets') });
    const wrongType = await mcpPost(rpcBody('tools/call', { name: 'service.get_task_contract', arguments: { issueId: 42 } }));
    expect(wrongType.body.error).toMatchObject({ code: -32602, data: { field: 'issueId' } });

    // A bad toolset is a JSON-RPC -32602 naming `toolset`, not a REST body.
    const badToolset = await mcpPost(list, { query: '?toolset=bogus' });
    expect(badToolset.status).toBe(400);
    expect(badToolset.body).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: expect.stringContaining('toolset'), data: { code: 'invalid-input', field: 'toolset' } } });
    const badNames = await mcpPost(list, { query: '?names=camel' });
    expect(badNames.body).toMatchObject({ id: 1, error: { code: -32602, data: { code: 'invalid-input', field: 'names' } } });
    // An oversized body: HTTP 413 with a JSON-RPC -32600 body.
    // (Refused by its length before it is read: the client may still be writing when the connection closes.)
    const huge = await requestOversized(cluster.baseUrl, 'POST', '/api/mcp', {
      token: agent.token,
      headers: { accept: 'application/json, text/event-stream' },
      rawBody: JSON.stringify(rpcBody('tools/call', { name: 'service.add_comment', arguments: { issueId: 'x', body: 'x'.repeat(1024 * 1024) } })),
    });
    expect(huge.status).toBe(413);
    expect(huge.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringContaining('bytes') } });
    const html = await mcpPost(list, { headers: { accept: 'text/html' } });
    expect(html.status).toBe(406);
    const noAccept = await call('POST', '/api/mcp', { token: agent.token, body: list });
    expect(noAccept.status).toBe(200);
    expect(noAccept.body.result.tools).toHaveLength(27);
    const textBody = await mcpPost(undefined, { rawBody: JSON.stringify(list), headers: { 'content-type': 'text/plain' } });
    expect(textBody.status).toBe(415);

    // Origin is checked before authentication: a disallowed page gets 403 with or without a token,
    // and its requests never reach the rate limiter (no RateLimit headers: no token spent).
    const evil = await mcpPost(list, { headers: { origin: 'https://evil.example' } });
    expect(evil.status).toBe(403);
    expect(evil.body.error).toMatchObject({ code: 'forbidden', reason: 'origin-not-allowed' });
    expect(evil.headers.get('ratelimit')).toBeNull();
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();
    const evilAnonymous = await mcpPost(list, { token: null, headers: { origin: 'https://evil.example' } });
    expect(evilAnonymous.status).toBe(403);
    expect(evilAnonymous.body.error).toMatchObject({ code: 'forbidden', reason: 'origin-not-allowed' });
    const good = await mcpPost(list, { headers: { origin: ALLOWED_ORIGIN } });
    expect(good.status).toBe(200);
    expect(good.headers.get('ratelimit')).not.toBeNull();

    // CORS for a listed browser origin: the preflight an Authorization header needs, then readable responses (errors too).
    const preflightCors = await call('OPTIONS', '/api/mcp', {
      headers: { origin: ALLOWED_ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, mcp-protocol-version' },
    });
    expect(preflightCors.status).toBe(204);
    expect(preflightCors.headers.get('access-control-allow-origin')).toBe(ALLOWED_ORIGIN);
    expect(preflightCors.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflightCors.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
    expect(preflightCors.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('mcp-protocol-version');
    expect((await call('OPTIONS', '/api/mcp', { headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } })).status).toBe(403);
    expect(good.headers.get('access-control-allow-origin')).toBe(ALLOWED_ORIGIN);
    expect(good.headers.get('access-control-expose-headers')?.toLowerCase()).toContain('www-authenticate');
    const goodAnonymous = await mcpPost(list, { token: null, headers: { origin: ALLOWED_ORIGIN } });
    expect(goodAnonymous.status).toBe(401);
    expect(goodAnonymous.headers.get('access-control-allow-origin')).toBe(ALLOWED_ORIGIN);
    // Agents and CLIs (no Origin) get no CORS headers.
    expect(noAccept.headers.get('access-control-allow-origin')).toBeNull();

    const get = await call('GET', '/api/mcp', { token: agent.token });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect((await call('DELETE', '/api/mcp', { token: agent.token })).status).toBe(405);

    const anonymous = await mcpPost(list, { token: null });
    expect(anonymous.status).toBe(401);
    // RFC 9728: the challenge names the resource metadata (where to find the authorization server) and the scopes to ask for.
    expect(anonymous.headers.get('www-authenticate')).toBe(
      `Bearer realm="planning-service", resource_metadata="${cluster.baseUrl}/.well-known/oauth-protected-resource/api/mcp", scope="issues:read issues:write agents:read agents:execute"`,
    );
    expect(anonymous.body.error.code).toBe('unauthorized');
    const forged = await mcpPost(list, { token: 'svc_not_a_real_token' });
    expect(forged.status).toBe(401);
    expect(forged.headers.get('www-authenticate')).toContain('error="invalid_token"');
    const apiKeyHeader = await call('POST', '/api/mcp', { body: list, headers: { 'x-api-key': agent.token, accept: 'application/json' } });
    expect(apiKeyHeader.status).toBe(200);
    expect(apiKeyHeader.headers.get('ratelimit-policy')).toMatch(/^"burst";q=\d+;w=60$/);

    const notification = await mcpPost({ jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(notification.status).toBe(202);
    const init = await mcpPost(rpcBody('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }));
    expect(init.body.result).toMatchObject({ protocolVersion: '2025-06-18', serverInfo: { name: 'planning-service' } });
    expect(init.headers.get('mcp-session-id')).toBeNull();
    const badVersion = await mcpPost(list, { headers: { 'mcp-protocol-version': '1999-01-01' } });
    expect(badVersion.status).toBe(400);
    const discover = await mcpPost(rpcBody('server/discover', {}, 3, true), { headers: { 'mcp-protocol-version': MODERN, 'mcp-method': 'server/discover' } });
    expect(discover.status).toBe(200);
    expect(discover.body.result.supportedVersions).toContain(MODERN);
  });

  it('mcp: parity: each REST endpoint with an MCP twin reaches the same state from the same input', async () => {
    const s = await connect(cluster.baseUrl, agent.token, 'legacy');
    const tool = async (name: string, args: Record<string, unknown>) => {
      const result = await s.call(name, args);
      expect(result.isError, `${name}: ${JSON.stringify(result.structuredContent)}`).toBeFalsy();
      return result.structuredContent;
    };
    const agentRest = rest(agent);
    const volatile = new Set(['id', 'createdAt', 'updatedAt', 'lastActivityAt', 'loggedAt', 'at', 'issueId', 'expiresAt', 'renewedAt', 'generatedAt', 'used', 'endedAt']);
    // Guidance is worded for the caller's transport (MCP: tools and arguments; REST: paths): compare what is advised, not how.
    const stable = (value: any): any => {
      if (Array.isArray(value)) return value.map(stable);
      if (value && typeof value === 'object') {
        return Object.fromEntries(
          Object.entries(value)
            .filter(([k]) => !volatile.has(k))
            .map(([k, v]) => [k, k === 'safeNextActions' ? (v as any[]).map((a) => a.action) : k === 'nextAction' ? String(v).replace(/\(.*\)/, '()') : stable(v)]),
        );
      }
      return value;
    };
    const state = async (id: string) => {
      const d = (await api.get(`/api/issues/${id}`)).body.data;
      return stable({ ...d, title: undefined, comments: d.comments.map((c: any) => c.body), evidence: d.evidence, approvals: d.approvals, activity: d.activity.map((a: any) => a.kind) });
    };

    // Creation: the same body through both.
    const body = { projectId, title: 'Parity', priority: 'high', labels: ['feature:parity'], dueDate: '2031-03-01', acceptanceChecks: [{ title: 'Check' }], agent: { instructions: { objective: 'Same' } } };
    const viaTool = (await tool('create_issue', body)).data;
    const viaRest = (await agentRest.post('/api/issues', body)).body.data;
    expect(stable(viaTool)).toEqual(stable(viaRest));

    // Each write, once through MCP on one task and once through REST on its twin.
    const pairs: [string, Record<string, unknown>, (id: string) => Promise<ApiResponse>][] = [
      ['update_task_contract', { agent: { instructions: { expectedOutput: 'Out', verification: ['v'] } } }, (id) => agentRest.patch(`/api/issues/${id}/task-contract`, { agent: { instructions: { expectedOutput: 'Out', verification: ['v'] } } })],
      ['add_comment', { body: 'Same comment' }, (id) => agentRest.post(`/api/issues/${id}/comments`, { body: 'Same comment' })],
      ['log_time', { minutes: 15, note: 'n' }, (id) => agentRest.post(`/api/issues/${id}/time-entries`, { minutes: 15, note: 'n' })],
      ['add_evidence', { kind: 'link', title: 'PR', url: 'https://example.com/pr/1' }, (id) => agentRest.post(`/api/issues/${id}/evidence`, { kind: 'link', title: 'PR', url: 'https://example.com/pr/1' })],
      ['request_approval', { reason: 'Why not' }, (id) => agentRest.post(`/api/issues/${id}/approvals`, { reason: 'Why not' })],
      ['update_issue_status', { status: 'backlog' }, (id) => agentRest.patch(`/api/issues/${id}`, { status: 'backlog' })],
      [
        'update_issue',
        { title: 'twin renamed', priority: 'low', labels: ['x'], dueDate: '2032-02-02', estimate: 5, assignedAgentId: 'agent-mcp' },
        (id) => agentRest.patch(`/api/issues/${id}`, { title: 'twin renamed', priority: 'low', labels: ['x'], dueDate: '2032-02-02', estimate: 5, agent: { assignedAgentId: 'agent-mcp' } }),
      ],
    ];
    for (const [name, args, viaRestCall] of pairs) {
      const [a, b] = [await newIssue({ title: 'twin', acceptanceChecks: [{ title: 'c' }] }), await newIssue({ title: 'twin', acceptanceChecks: [{ title: 'c' }] })];
      const toolBody = await tool(name, { issueId: a.id, ...args });
      const restRes = await viaRestCall(b.id);
      expect(restRes.status, `${name} REST: ${JSON.stringify(restRes.body)}`).toBeLessThan(300);
      expect(stable(toolBody), name).toEqual(stable(restRes.body));
      const [sa, sb] = [await state(a.id), await state(b.id)];
      expect({ ...sa, acceptanceChecks: undefined }, name).toEqual({ ...sb, acceptanceChecks: undefined });
    }

    // Claims: claim, status post and release through each (the agent holds one claim at a time).
    const [c1, c2] = [await newIssue({ title: 'claim twin' }), await newIssue({ title: 'claim twin' })];
    const claimTool = await tool('claim_work', { issueId: c1.id });
    const statusTool = await tool('post_status', { issueId: c1.id, message: 'halfway', fencingToken: claimTool.data.claim.fencingToken });
    const releaseTool = await tool('cancel_work', { issueId: c1.id });
    const claimRest = await agentRest.post('/api/agents/claim', { issueId: c2.id });
    expect(claimRest.status).toBe(200);
    const statusRest = await agentRest.post(`/api/agents/claims/${c2.id}/status`, { message: 'halfway', fencingToken: claimRest.body.data.claim.fencingToken });
    const releaseRest = await agentRest.post(`/api/agents/claims/${c2.id}/release`, {});
    const claimShape = (x: any) => stable({ ...x, data: { ...x.data, claim: { ...x.data.claim, fencingToken: undefined } } });
    expect(claimShape(claimTool)).toEqual(claimShape(claimRest.body));
    expect(claimShape(statusTool)).toEqual(claimShape(statusRest.body));
    expect(claimShape(releaseTool)).toEqual(claimShape(releaseRest.body));
    expect(await state(c1.id)).toEqual(await state(c2.id));

    // Reads: the same answer as the REST twin.
    const reads: [string, Record<string, unknown>, string][] = [
      ['search_issues', { label: ['feature:parity'], limit: 5 }, `/api/issues?workspaceId=${ws}&label=feature:parity&limit=5`],
      ['get_task_contract', { issueId: c1.id }, `/api/issues/${c1.id}/task-contract`],
      ['get_context_pack', { issueId: c1.id }, `/api/issues/${c1.id}/context-pack`],
      ['get_workspace_customization', {}, `/api/workspaces/${ws}/customization`],
      ['get_market_standards', {}, `/api/workspaces/${ws}/standards`],
      ['get_launch_readiness', {}, `/api/workspaces/${ws}/launch-readiness`],
      ['search_knowledgebase', { q: 'canary', limit: 5 }, '/api/knowledgebase?q=canary&limit=5'],
      ['search_knowledgebase', { tag: ['ops'], limit: 5 }, '/api/knowledgebase?tag=ops&limit=5'],
      ['list_issue_reminders', { limit: 5 }, `/api/issues/reminders?workspaceId=${ws}&limit=5`],
      ['list_ready_work', { limit: 5 }, '/api/agents/ready-work?limit=5'],
      ['get_client_bootstrap', {}, '/api/agents/bootstrap'],
      ['get_agent_preflight', {}, '/api/agents/preflight'],
    ];
    const counters = (x: any): any => JSON.parse(JSON.stringify(x), (k, v) => (k === 'used' || k === 'detail' ? undefined : v));
    for (const [name, args, path] of reads) {
      const toolBody = await tool(name, args);
      const restRes = await agentRest.get(path);
      expect(restRes.status, `${path}: ${JSON.stringify(restRes.body)}`).toBe(200);
      expect(counters(stable(toolBody)), name).toEqual(counters(stable(restRes.body)));
    }
    await s.close();
  });

  it('mcp: guidance answers from stored data: an admin edits customization, standards and documents through REST; agents see it', async () => {
    const s = await connect(cluster.baseUrl, reader.token, 'modern');
    const before = (await s.call('get_market_standards')).structuredContent.data;
    expect(before.source).toBe('default');
    const published = await api.patch(`/api/workspaces/${ws}/standards`, { definitionOfDone: ['Tests pass', 'Docs updated'], reviewExpectations: ['One reviewer'] });
    expect(published.status).toBe(200);
    expect(published.body.meta.changedFields).toEqual(['definitionOfDone', 'reviewExpectations']);
    const after = (await s.call('get_market_standards')).structuredContent.data;
    expect(after).toMatchObject({ source: 'published', version: 1, definitionOfDone: ['Tests pass', 'Docs updated'], reviewExpectations: ['One reviewer'] });

    const custom = await api.patch(`/api/workspaces/${ws}/customization`, {
      enabledViewModes: ['list', 'swimlanes'],
      viewPresets: [{ id: 'mine', name: 'Mine', viewMode: 'list', filters: { assignedAgentId: 'agent-reader' } }],
      evidencePolicy: { requiredForDone: true, minimumItems: 2, acceptedKinds: ['test-result'], requireCheckCoverage: true },
    });
    expect(custom.status, JSON.stringify(custom.body)).toBe(200);
    const seen = (await s.call('get_workspace_customization')).structuredContent.data;
    expect(seen.viewModes.filter((m: any) => m.enabled).map((m: any) => m.label)).toEqual(['List', 'Swimlanes']);
    expect(seen.defaultViewMode).toBe('list');
    expect(seen.evidencePolicy).toMatchObject({ requiredForDone: true, minimumItems: 2, acceptedKinds: ['test-result'], requireCheckCoverage: true, enforcedBy: 'reviewers' });
    expect(seen.evidencePolicy.description).toContain('not enforced by the service');
    expect(seen.rulesCenter.find((r: any) => r.id === 'evidence-policy')).toMatchObject({ enforcedBy: 'reviewers', severity: 'must' });
    // REST shows the same (its response schema keeps the added fields).
    const restCustom = (await api.get(`/api/workspaces/${ws}/customization`)).body.data;
    expect(restCustom.evidencePolicy).toEqual(seen.evidencePolicy);
    expect(seen.adminSetupPath.find((st: any) => st.id === 'publish-standards').done).toBe(true);
    const bad = await api.patch(`/api/workspaces/${ws}/customization`, { defaultViewMode: 'cards' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.field).toBe('defaultViewMode');
    expect((await call('PATCH', `/api/workspaces/${ws}/customization`, { token: agent.token, body: { defaultViewMode: 'swimlanes' } })).status).toBe(403);

    const doc = await api.post('/api/knowledgebase', { workspaceId: ws, title: 'Incident guide', body: 'Page the on-call, then open an incident task.', tags: ['ops'] });
    expect(doc.status).toBe(201);
    expect((await s.call('search_knowledgebase', { q: 'on-call incident' })).structuredContent.data.map((h: any) => h.document.id)).toEqual([doc.body.data.id]);
    expect((await call('DELETE', `/api/knowledgebase/${doc.body.data.id}`, { cookie: admin })).status).toBe(200);
    expect((await s.call('search_knowledgebase', { q: 'on-call incident' })).structuredContent.data).toEqual([]);

    const blocker = await newIssue({ title: 'Ship blocker', labels: ['launch-blocker'], priority: 'urgent' });
    const launch = (await s.call('get_launch_readiness')).structuredContent.data;
    expect(launch.launchProof.readyForPublicLaunch).toBe(false);
    expect(launch.blockers.map((b: any) => b.id)).toContain(blocker.id);
    await s.close();
  });
});
