/* eslint-disable @typescript-eslint/no-explicit-any -- tool results are whatever the server sent; the test validates them. */
import type { DocumentStore } from '@planning/store';
import { createMongoStore } from '@planning/store/mongo';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG } from '../../services/gateway/src/mcp/catalog.js';
import { createKey, createWorkspace, type TestKey } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../support/cluster.js';
import { login, request } from '../support/http.js';

/**
 * Output schemas that hold (issue #13): every tool is called on a started instance, for success
 * and for each refusal it can give, and every result's `structuredContent` is validated against
 * the `outputSchema` the endpoint lists, compiled by ajv in strict mode (JSON Schema 2020-12, the
 * MCP default). A refusal must match the schema as well (some hosts validate error results too).
 * The agents-claims store is a mongo-wire server so the test can use up the agent-run quota.
 */
describe('mcp output schemas (all-in-one)', () => {
  let cluster: Cluster;
  let store: DocumentStore;
  let admin: string;
  let ws: string;
  let projectId: string;
  let agent: TestKey;
  let rival: TestKey;
  const validators = new Map<string, ValidateFunction>();
  /** What each tool answered: `ok`, or the refusal's `code/reason`. */
  const seen = new Map<string, Set<string>>();

  const api = (method: string, path: string, body?: unknown) => request(cluster.baseUrl, method, path, { cookie: admin, ...(body !== undefined ? { body } : {}) });
  let rpcId = 0;
  const mcp = (token: string, method: string, params: Record<string, unknown> = {}) =>
    request(cluster.baseUrl, 'POST', '/api/mcp', { token, headers: { accept: 'application/json, text/event-stream' }, body: { jsonrpc: '2.0', id: ++rpcId, method, params } });

  /** Calls a tool, validates its result against the listed schema, records the outcome and returns structuredContent. */
  async function tool(name: string, args: Record<string, unknown>, key: TestKey = agent): Promise<any> {
    const res = await mcp(key.token, 'tools/call', { name: `service.${name}`, arguments: args });
    expect(res.status, `${name}: ${JSON.stringify(res.body)}`).toBe(200);
    const result = res.body.result;
    expect(result, `${name}: ${JSON.stringify(res.body)}`).toBeDefined();
    const validate = validators.get(name)!;
    if (!validate(result.structuredContent)) {
      expect.fail(`${name} (${result.isError ? 'refusal' : 'success'}) does not match its outputSchema: ${JSON.stringify(validate.errors)}\n${JSON.stringify(result.structuredContent).slice(0, 2000)}`);
    }
    expect(JSON.parse(result.content[0].text)).toEqual(result.structuredContent);
    const error = result.structuredContent.error;
    expect(Boolean(result.isError), name).toBe(error !== undefined);
    const outcome = error ? `${error.code}${error.reason ? `/${error.reason}` : ''}` : 'ok';
    if (!seen.has(name)) seen.set(name, new Set());
    seen.get(name)!.add(outcome);
    return result.structuredContent;
  }
  const newIssue = async (body: Record<string, unknown> = {}): Promise<string> => {
    const res = await api('POST', '/api/issues', { projectId, title: 'Schema task', ...body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data.id;
  };

  beforeAll(async () => {
    cluster = await startCluster('all-in-one', { mongoWire: true });
    store = createMongoStore({ uri: cluster.claimsStoreUri!, database: 'planning-agents-claims' });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = (await createWorkspace(cluster.baseUrl, admin, 'Schemas', 'pro')).id;
    const scopes = ['issues:read', 'issues:write', 'projects:read', 'projects:write', 'agents:read', 'agents:execute'];
    agent = await createKey(cluster.baseUrl, admin, ws, 'pro', scopes, 'agent-schema');
    rival = await createKey(cluster.baseUrl, admin, ws, 'pro', scopes, 'agent-rival');
    const initiative = await api('POST', '/api/initiatives', {
      programId: (await api('POST', '/api/programs', { workspaceId: ws, name: 'P' })).body.data.id,
      name: 'I',
      contextPack: [{ kind: 'doc', title: 'Plan', path: 'docs/plan.md' }],
    });
    const project = await api('POST', '/api/projects', { workspaceId: ws, name: 'Schemas', initiativeId: initiative.body.data.id, contextPack: [{ kind: 'link', title: 'Site', url: 'https://example.com' }] });
    projectId = project.body.data.id;
    await api('POST', '/api/knowledgebase', { workspaceId: ws, title: 'Runbook', body: 'Deploy with care.', tags: ['ops'], projectId });
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats.default(ajv);
    const listed = (await mcp(agent.token, 'tools/list')).body.result.tools;
    for (const t of listed) validators.set(t.name.replace('service.', ''), ajv.compile(t.outputSchema));
  }, 180_000);

  afterAll(async () => {
    await store?.close();
    await cluster?.stop();
  });

  it('mcp: every tool result, success and each refusal, matches the tool\'s outputSchema under ajv strict mode', async () => {
    // Reads.
    for (const name of ['get_client_bootstrap', 'get_agent_preflight', 'get_workspace_customization', 'get_market_standards', 'get_launch_readiness']) await tool(name, {});
    await newIssue({ labels: ['launch-blocker'], priority: 'urgent' });
    expect((await tool('get_launch_readiness', {})).data.blockers.length).toBeGreaterThan(0);
    expect((await tool('search_knowledgebase', { q: 'deploy' })).data).toHaveLength(1);
    const created = await tool('create_issue', {
      projectId,
      title: 'Everything set',
      description: 'd',
      priority: 'high',
      labels: ['a'],
      dueDate: '2020-01-01',
      estimate: 3,
      acceptanceChecks: [{ title: 'Check' }],
      agent: { instructions: { objective: 'o', expectedOutput: 'e', verification: ['v'], constraints: ['c'] } },
    });
    const first = created.data.id as string;
    await tool('create_task', { projectId, title: 'Bare', dependencies: [first] });
    for (const name of ['search_issues', 'search_tasks']) await tool(name, { includeDependencyGraph: true });
    for (const name of ['list_issue_reminders', 'list_task_reminders']) expect((await tool(name, {})).data.length).toBeGreaterThan(0);
    await tool('get_task_contract', { issueId: first });
    await tool('update_task_contract', { issueId: first, agent: { instructions: { escalation: 'Ask' } } });
    await tool('get_context_pack', { issueId: first });

    // A whole claim.
    const ready = await tool('list_ready_work', {});
    expect(ready.data.map((i: any) => i.id)).toContain(first);
    const claimed = (await tool('claim_work', { issueId: first, idempotencyKey: 'schema-1' })).data;
    const fencingToken = claimed.claim.fencingToken;
    await tool('list_ready_work', {}); // with the held claim on its item
    await tool('post_status', { issueId: first, message: 'working', fencingToken });
    await tool('update_issue', { issueId: first, dueDate: '2031-01-01', estimate: 2, labels: ['b'], fencingToken });
    await tool('update_task', { issueId: first, assignedAgentId: 'agent-schema', milestoneId: null, fencingToken });
    expect((await tool('update_issue', { issueId: first, title: 'x', fencingToken: fencingToken + 1 })).error.reason).toBe('stale-claim');
    await tool('add_comment', { issueId: first, body: 'note' });
    await tool('log_time', { issueId: first, minutes: 5 });
    await tool('add_evidence', { issueId: first, kind: 'link', title: 'PR', url: 'https://example.com/1', checkId: created.data.acceptanceChecks[0].id });
    await tool('request_approval', { issueId: first, reason: 'why' });
    await tool('get_agent_preflight', {}); // a held claim with a pending approval
    await tool('update_task_status', { issueId: first, status: 'in-review', fencingToken });
    const second = await newIssue();
    await tool('claim_work', { issueId: second });
    await tool('cancel_work', { issueId: second });
    await tool('update_issue_status', { issueId: second, status: 'backlog' });

    // Refusals: not found, for every tool that names a task or project.
    const missing = 'iss_does_not_exist';
    await tool('create_issue', { projectId: 'prj_does_not_exist', title: 'x' });
    await tool('create_task', { projectId: 'prj_does_not_exist', title: 'x' });
    for (const [name, args] of [
      ['get_task_contract', {}],
      ['update_task_contract', { agent: { instructions: { objective: 'x' } } }],
      ['get_context_pack', {}],
      ['claim_work', {}],
      ['post_status', { message: 'x' }],
      ['cancel_work', {}],
      ['update_issue_status', { status: 'ready' }],
      ['update_task_status', { status: 'ready' }],
      ['update_issue', { title: 'x' }],
      ['update_task', { title: 'x' }],
      ['add_comment', { body: 'x' }],
      ['log_time', { minutes: 1 }],
      ['add_evidence', { kind: 'note', title: 'x' }],
      ['request_approval', { reason: 'x' }],
    ] as const) {
      expect((await tool(name, { issueId: missing, ...args })).error.code, name).toBe('not-found');
    }
    // Conflicts, each with its reason.
    const backlog = await newIssue({ status: 'backlog' });
    expect((await tool('claim_work', { issueId: backlog })).error.reason).toBe('not-ready');
    expect((await tool('update_issue_status', { issueId: backlog, status: 'done' })).error.reason).toBe('invalid-transition');
    expect((await tool('update_task_status', { issueId: backlog, status: 'ready', version: 99 })).error.reason).toBe('version-conflict');
    expect((await tool('update_task_contract', { issueId: backlog, agent: { instructions: { objective: 'x' } }, version: 99 })).error.reason).toBe('version-conflict');
    expect((await tool('update_task', { issueId: backlog, priority: 'low', version: 99 })).error.reason).toBe('version-conflict');
    const [third, fourth] = [await newIssue(), await newIssue()];
    await tool('claim_work', { issueId: third });
    expect((await tool('claim_work', { issueId: fourth })).error.reason).toBe('agent-busy');
    expect((await tool('cancel_work', { issueId: third }, rival)).error.reason).toBe('active-claim');
    expect((await tool('post_status', { issueId: fourth, message: 'x' })).error.reason).toBe('stale-claim');
    expect((await tool('post_status', { issueId: third, message: 'x', fencingToken: 999_999 })).error.reason).toBe('stale-claim');
    await tool('cancel_work', { issueId: third });
    // Forbidden: a task assigned to another agent.
    const assigned = await newIssue({ agent: { assignedAgentId: 'agent-rival' } });
    expect((await tool('claim_work', { issueId: assigned })).error.code).toBe('forbidden');
    // Quota: the workspace's agent runs for the month are used up.
    const period = new Date().toISOString().slice(0, 7);
    await store.collection('usage_counters').updateOne({ _id: `${ws}:agent-runs:${period}` }, { $set: { used: 10_000 } });
    const exhausted = await tool('claim_work', { issueId: fourth });
    expect(exhausted.error).toMatchObject({ code: 'quota-exceeded', quota: { kind: 'agent-runs', limit: 10_000 } });
    await tool('list_ready_work', {}); // run-budget-exhausted on every item
    await tool('get_agent_preflight', {});

    // Every tool was called and succeeded at least once; the refusal kinds above were all seen.
    for (const t of CATALOG) expect(seen.get(t.name)?.has('ok'), `${t.name} succeeded`).toBe(true);
    const refusals = new Set([...seen.values()].flatMap((s) => [...s]).filter((o) => o !== 'ok'));
    expect([...refusals].sort()).toEqual(
      ['forbidden/assigned-to-another-agent', 'not-found', 'quota-exceeded', 'work-already-claimed/active-claim', 'work-already-claimed/agent-busy', 'work-already-claimed/invalid-transition', 'work-already-claimed/not-ready', 'work-already-claimed/stale-claim', 'work-already-claimed/version-conflict'].sort(),
    );
  });
});
