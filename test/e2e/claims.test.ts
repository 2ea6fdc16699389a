/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
import { randomBytes } from 'node:crypto';
import type { DocumentStore } from '@planning/store';
import { createMongoStore } from '@planning/store/mongo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, createKey, createUser, createWorkspace, type TestKey, type TestUser } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { agentRunsUsed, type ApiResponse, auditEvents, eventually, login, request } from '../support/http.js';

/**
 * Agents and claims through the gateway, in both modes (API document §4 endpoints 15–16,
 * DECISIONS §7): ready work, claims, heartbeats, status posts, completion, release, every refusal
 * with its status and reason, idempotency, a stale holder, the sweeper's bound, events and audit,
 * and a process killed mid-claim. The agents-claims store is a mongo-wire server (distributed:
 * shared by two agents-claims replicas, each behind its own gateway), so the test can check the
 * store itself and set a quota counter.
 */
const AGENT_SCOPES = ['issues:read', 'issues:write', 'agents:read', 'agents:execute', 'billing:read'];
const SWEEP_MS = 500;
/** DECISIONS §7: expired claims are swept within 10 seconds. */
const SWEEP_BOUND_MS = 10_000;

describe.each<Mode>(['all-in-one', 'distributed'])('claims (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;
  let claimsStore: DocumentStore;
  let member: TestUser;
  let viewer: TestUser;

  const call = (
    method: string,
    path: string,
    options: { body?: unknown; rawBody?: string; cookie?: string; token?: string; headers?: Record<string, string>; base?: string } = {},
  ): Promise<ApiResponse> =>
    request(options.base ?? cluster.baseUrl, method, path, options);

  interface Space {
    id: string;
    projectId: string;
    agent(name: string, scopes?: string[]): Promise<TestKey & { agentId: string }>;
    issue(fields?: Record<string, unknown>): Promise<string>;
  }

  const space = async (label: string): Promise<Space> => {
    const ws = (await createWorkspace(cluster.baseUrl, admin, `Claims ${label} ${randomBytes(3).toString('hex')}`, 'pro')).id as string;
    await addMember(cluster.baseUrl, admin, ws, member.id, 'member');
    await addMember(cluster.baseUrl, admin, ws, viewer.id, 'viewer');
    const project = await call('POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Agents at work' } });
    expect(project.status).toBe(201);
    return {
      id: ws,
      projectId: project.body.data.id,
      async agent(name, scopes = AGENT_SCOPES) {
        const agentId = `${name}-${randomBytes(3).toString('hex')}`;
        return { ...(await createKey(cluster.baseUrl, admin, ws, 'pro', scopes, agentId)), agentId };
      },
      async issue(fields = {}) {
        const res = await call('POST', '/api/issues', { cookie: admin, body: { projectId: project.body.data.id, title: 'Secret task title', ...fields } });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        return res.body.data.id;
      },
    };
  };

  const claim = (key: TestKey, issueId: string, headers: Record<string, string> = {}, base?: string) =>
    call('POST', '/api/agents/claim', { token: key.token, body: { issueId }, headers, ...(base ? { base } : {}) });
  const issue = async (id: string) => (await call('GET', `/api/issues/${id}`, { cookie: admin })).body.data;
  const claimsOf = async (ws: string, query = '') => {
    const res = await call('GET', `/api/agents/claims?workspaceId=${ws}${query}`, { cookie: admin });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data as any[];
  };
  const runsUsed = (ws: string) => agentRunsUsed(cluster.baseUrl, admin, ws);
  const audit = (ws: string, type: string) => auditEvents(cluster.baseUrl, admin, ws, type);
  const expectError = (res: ApiResponse, status: number, code: string, reason?: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.body.error.code).toBe(code);
    if (reason !== undefined) expect(res.body.error.reason).toBe(reason);
  };

  /** The invariant: every task in progress holds exactly one active claim, and every active claim's task is in progress. */
  const expectNoStrandedTasks = async (ws: string) => {
    const inProgress = await call('GET', `/api/issues?workspaceId=${ws}&status=in-progress`, { cookie: admin });
    const active = await claimsOf(ws, '&state=active,starting');
    const activeByIssue = new Map<string, number>();
    for (const c of active) activeByIssue.set(c.issueId, (activeByIssue.get(c.issueId) ?? 0) + 1);
    for (const t of inProgress.body.data.issues) expect(activeByIssue.get(t.id), `task ${t.id} in progress`).toBe(1);
    for (const [issueId, n] of activeByIssue) {
      expect(n).toBe(1);
      expect((await issue(issueId)).status).toBe('in-progress');
    }
  };

  beforeAll(async () => {
    cluster = await startCluster(mode, {
      mongoWire: true,
      ...(mode === 'distributed' ? { agentsClaimsReplicas: 2 } : {}),
      env: { CLAIM_SWEEP_INTERVAL_MS: String(SWEEP_MS), CLAIM_START_TIMEOUT_MS: '3000' },
    });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    member = await createUser(cluster.baseUrl, admin, 'claims-member');
    viewer = await createUser(cluster.baseUrl, admin, 'claims-viewer');
    claimsStore = createMongoStore({ uri: cluster.claimsStoreUri!, database: 'planning-agents-claims' });
  }, 180_000);

  afterAll(async () => {
    await claimsStore?.close();
    await cluster?.stop();
  });

  it('claims: an agent finds ranked ready work, claims the top task, keeps it alive, posts status and completes it', async () => {
    const s = await space('flow');
    const agent = await s.agent('worker');
    const other = await s.agent('other');
    const dep = await s.issue({ priority: 'low' });
    const top = await s.issue({ priority: 'urgent', dueDate: '2030-01-02', acceptanceChecks: [{ title: 'Tests pass' }] });
    const later = await s.issue({ priority: 'urgent', dueDate: '2030-02-01' });
    const blocked = await s.issue({ priority: 'high', dependencies: [dep] });
    await s.issue({ priority: 'urgent', agent: { assignedAgentId: other.agentId } });
    await s.issue({ priority: 'urgent', status: 'backlog' });

    const ready = await call('GET', '/api/agents/ready-work', { token: agent.token });
    expect(ready.status).toBe(200);
    expect(ready.body.data.map((i: any) => [i.id, i.rank, i.agentClaimQueue.state])).toEqual([
      [top, 1, 'claimable'],
      [later, 2, 'claimable'],
      [blocked, 3, 'blocked'],
      [dep, 4, 'claimable'],
    ]);
    expect(ready.body.data[0]).toMatchObject({
      title: 'Secret task title',
      status: 'ready',
      agent: { assignedAgentId: null, readiness: expect.any(String) },
      agentClaimQueue: { quotaState: 'within-run-budget', doneEvidence: { completed: 0, total: 1 }, whyNotClaimable: null, nextAction: expect.stringContaining('Claim') },
    });
    expect(ready.body.data[2].agentClaimQueue.whyNotClaimable).toEqual({ reason: 'dependencies-open', message: '1 dependency is not done yet' });
    expect(ready.body.queueSummary).toEqual({ total: 4, claimable: 3, blocked: 1, heldByYou: 0, quotaState: 'within-run-budget' });
    expect(ready.body.claimQueue).toEqual(ready.body.data.map((i: any) => ({ issueId: i.id, rank: i.rank, state: i.agentClaimQueue.state })));
    expect(ready.body.metering).toMatchObject({ allowed: true, kind: 'agent-runs', used: 0, limit: 10000 });

    const before = Date.now();
    const claimed = await claim(agent, top);
    expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
    expect(claimed.body.data).toMatchObject({
      claim: { issueId: top, agentId: agent.agentId, workspaceId: s.id, state: 'active', fencingToken: 1, leaseSeconds: 1800 },
      issue: { id: top, status: 'in-progress' },
      metering: { allowed: true, kind: 'agent-runs', used: 1, limit: 10000 },
    });
    const expiresAt = Date.parse(claimed.body.data.claim.expiresAt);
    expect(expiresAt - before).toBeGreaterThan(1_790_000);
    expect((await issue(top)).status).toBe('in-progress');

    const held = await call('GET', '/api/agents/ready-work', { token: agent.token });
    expect(held.body.data[0]).toMatchObject({ id: top, rank: 0, agentClaimQueue: { state: 'claimed', whyNotClaimable: { reason: 'held-by-you' } }, claim: { fencingToken: 1 } });
    expect(held.body.data[1].agentClaimQueue.whyNotClaimable.reason).toBe('agent-busy');
    expect(held.body.queueSummary).toMatchObject({ total: 3, heldByYou: 1 });

    const beat = await call('POST', `/api/agents/claims/${top}/heartbeat`, { token: agent.token, body: { fencingToken: 1 } });
    expect(beat.status, JSON.stringify(beat.body)).toBe(200);
    expect(Date.parse(beat.body.data.claim.expiresAt)).toBeGreaterThanOrEqual(expiresAt);
    const status = await call('POST', `/api/agents/claims/${top}/status`, { token: agent.token, body: { message: 'Tests written, fixing the edge case' } });
    expect(status.status, JSON.stringify(status.body)).toBe(201);
    const comments = await call('GET', `/api/issues/${top}/comments`, { cookie: admin });
    expect(comments.body.data.map((c: any) => c.body)).toEqual(['Tests written, fixing the edge case']);

    const done = await call('PATCH', `/api/issues/${top}`, { token: agent.token, body: { status: 'in-review', fencingToken: 1 } });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body.data.status).toBe('in-review');
    // The agent is free at once (the claim's end follows the status event).
    const next = await claim(agent, later);
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    await eventually(async () => (await claimsOf(s.id, '&state=completed')).some((c) => c.issueId === top), 15_000, 'the completed claim');
    expect(await runsUsed(s.id)).toBe(2);

    // Events: ids only, in the audit trail.
    const created = await eventually(async () => {
      const found = await audit(s.id, 'claim.created');
      return found.length === 2 ? found : undefined;
    }, 15_000, 'claim.created audit events');
    expect(created.map((e) => e.subject.type)).toEqual(['claim', 'claim']);
    expect(created[0].actor).toEqual({ type: 'api-key', id: agent.id });
    await eventually(async () => (await audit(s.id, 'claim.renewed')).length === 2, 15_000, 'claim.renewed audit events');
    await eventually(async () => (await audit(s.id, 'claim.completed')).length === 1, 15_000, 'claim.completed audit event');
    expect(JSON.stringify(await audit(s.id, 'claim.completed'))).not.toContain('Secret task title');
    await expectNoStrandedTasks(s.id);
  });

  it('claims: every refusal of DECISIONS §7 answers its status and reason, in order, and changes nothing', async () => {
    const s = await space('refusals');
    const other = await space('elsewhere');
    const agent = await s.agent('agent');
    const rival = await s.agent('rival');
    const ready = await s.issue();
    const foreign = await other.issue();
    const assigned = await s.issue({ agent: { assignedAgentId: rival.agentId } });
    const backlog = await s.issue({ status: 'backlog' });
    const dep = await s.issue();
    const blocked = await s.issue({ dependencies: [dep] });
    const lacking = await s.agent('lacking', ['issues:read', 'issues:write', 'agents:read']);

    expectError(await call('POST', '/api/agents/claim', { body: { issueId: ready } }), 401, 'unauthorized');
    expectError(await call('POST', '/api/agents/claim', { token: 'svc_not-a-real-token', body: { issueId: ready } }), 401, 'unauthorized');
    expectError(await call('POST', '/api/agents/claim', { cookie: member.cookie, body: { issueId: ready } }), 403, 'forbidden', 'token-required');
    expectError(await claim(lacking, ready), 403, 'forbidden', 'missing-scope');
    // Scope comes first: even for a task of another workspace.
    expectError(await claim(lacking, foreign), 403, 'forbidden', 'missing-scope');
    expectError(await claim(agent, foreign), 404, 'not-found');
    expectError(await claim(agent, 'iss_does_not_exist'), 404, 'not-found');
    expectError(await claim(agent, assigned), 403, 'forbidden', 'assigned-to-another-agent');
    expectError(await claim(agent, backlog), 409, 'work-already-claimed', 'not-ready');
    expectError(await claim(agent, blocked), 409, 'work-already-claimed', 'dependencies-open');
    const bad = await call('POST', '/api/agents/claim', { token: agent.token, body: {} });
    expectError(bad, 400, 'invalid-input');
    expect(bad.body.error.field).toBe('issueId');
    expectError(await call('POST', '/api/agents/claim', { token: agent.token, rawBody: '{"issueId":' }), 400, 'invalid-input');
    const badKey = await claim(agent, ready, { 'idempotency-key': 'not a key' });
    expectError(badKey, 400, 'invalid-input');
    expect(badKey.body.error.field).toBe('idempotency-key');
    // Nothing happened so far.
    expect(await claimsOf(s.id, '&state=starting,active,released,completed,expired,aborted')).toEqual([]);
    expect(await runsUsed(s.id)).toBe(0);
    for (const id of [ready, assigned, backlog, blocked]) expect((await issue(id)).version).toBe(1);

    expect((await claim(rival, ready)).status).toBe(200);
    // In progress under a claim: not ready (DECISIONS §7 order), for the holder too.
    expectError(await claim(agent, ready), 409, 'work-already-claimed', 'not-ready');
    expectError(await claim(rival, ready), 409, 'work-already-claimed', 'not-ready');
    expectError(await claim(rival, dep), 409, 'work-already-claimed', 'agent-busy');
    expect(await runsUsed(s.id)).toBe(1);
    expect((await issue(dep)).status).toBe('ready');

    // Quota: the workspace's agent runs for the month are used up (set on the counter itself).
    const now = new Date();
    const period = now.toISOString().slice(0, 7);
    await claimsStore.collection('usage_counters').updateOne({ _id: `${s.id}:agent-runs:${period}` }, { $set: { used: 10_000 } });
    const exhausted = await claim(agent, dep);
    expectError(exhausted, 403, 'quota-exceeded');
    expect(exhausted.body.error.quota).toEqual({ kind: 'agent-runs', limit: 10000, used: 10000, resetsAt: expect.stringMatching(/^\d{4}-\d{2}-01T00:00:00\.000Z$/) });
    const queue = await call('GET', '/api/agents/ready-work', { token: agent.token });
    expect(queue.body.queueSummary.quotaState).toBe('run-budget-exhausted');
    expect(queue.body.data.find((i: any) => i.id === dep).agentClaimQueue).toMatchObject({ quotaState: 'run-budget-exhausted', whyNotClaimable: { reason: 'run-budget-exhausted' } });
    expect((await issue(dep)).status).toBe('ready');
    expect((await claimsOf(s.id, `&issueId=${dep}&state=starting,active,aborted`))).toEqual([]);
    await expectNoStrandedTasks(s.id);

    // Under a claim: heartbeat, status and release refusals.
    expectError(await call('POST', `/api/agents/claims/${ready}/heartbeat`, { token: agent.token }), 409, 'work-already-claimed', 'stale-claim');
    expectError(await call('POST', `/api/agents/claims/${ready}/heartbeat`, { token: rival.token, body: { fencingToken: 2 } }), 409, 'work-already-claimed', 'stale-claim');
    expectError(await call('POST', `/api/agents/claims/${ready}/status`, { token: agent.token, body: { message: 'not mine' } }), 409, 'work-already-claimed', 'stale-claim');
    expectError(await call('POST', `/api/agents/claims/${foreign}/heartbeat`, { token: agent.token }), 404, 'not-found');
    expectError(await call('POST', `/api/agents/claims/${ready}/release`, { token: agent.token }), 409, 'work-already-claimed', 'active-claim');
    expectError(await call('POST', `/api/agents/claims/${ready}/release`, { cookie: viewer.cookie }), 403, 'forbidden');
    expectError(await call('POST', `/api/agents/claims/${dep}/release`, { cookie: member.cookie }), 409, 'work-already-claimed', 'stale-claim');
    expectError(await call('PATCH', `/api/issues/${ready}`, { token: agent.token, body: { status: 'in-review' } }), 409, 'work-already-claimed', 'active-claim');
    expectError(await call('PATCH', `/api/issues/${ready}`, { token: rival.token, body: { status: 'in-review', fencingToken: 9 } }), 409, 'work-already-claimed', 'stale-claim');
    const released = await call('POST', `/api/agents/claims/${ready}/release`, { cookie: member.cookie });
    expect(released.status, JSON.stringify(released.body)).toBe(200);
    expect(released.body.data).toMatchObject({ claim: { state: 'released', endReason: 'released-by-member' }, issue: { id: ready, status: 'ready' } });
  });

  it('claims: an idempotent retry returns the first claim; another body is 400; concurrent retries make one claim', async () => {
    const s = await space('idempotency');
    const agent = await s.agent('careful');
    const first = await s.issue();
    const second = await s.issue();
    const key = { 'idempotency-key': `claim-${randomBytes(4).toString('hex')}` };
    const a = await claim(agent, first, key);
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    const b = await claim(agent, first, key);
    expect(b.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(await runsUsed(s.id)).toBe(1);
    const mismatch = await claim(agent, second, key);
    expectError(mismatch, 400, 'invalid-input');
    expect(mismatch.body.error.field).toBe('idempotency-key');
    expect((await issue(second)).status).toBe('ready');

    // Another agent's token may use the same key: keys are per token.
    const rival = await s.agent('rival');
    expect((await claim(rival, second, key)).status).toBe(200);

    // A refusal is an answer too: replayed with the header.
    const late = await s.agent('late');
    const refusalKey = { 'idempotency-key': `refused-${randomBytes(4).toString('hex')}` };
    const refused = await claim(late, first, refusalKey);
    expectError(refused, 409, 'work-already-claimed', 'not-ready');
    expect(refused.headers.get('idempotent-replayed')).toBeNull();
    const again = await claim(late, first, refusalKey);
    expectError(again, 409, 'work-already-claimed', 'not-ready');
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    const racer = await s.agent('racer');
    const third = await s.issue();
    const raceKey = { 'idempotency-key': 'same-key-for-all' };
    const bases = cluster.gatewayUrls;
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => claim(racer, third, raceKey, bases[i % bases.length])));
    const ok = answers.filter((r) => r.status === 200);
    const inFlight = answers.filter((r) => r.status === 409);
    expect(answers.filter((r) => r.status !== 200 && r.status !== 409).map((r) => JSON.stringify(r.body))).toEqual([]);
    expect(ok.length + inFlight.length).toBe(12);
    expect(ok.length).toBeGreaterThan(0);
    for (const r of inFlight) expect(r.body.error.reason).toBe('idempotency-in-flight');
    expect(new Set(ok.map((r) => r.body.data.claim.id)).size).toBe(1);
    expect((await claimsOf(s.id, `&issueId=${third}&state=starting,active,released,completed,expired,aborted`)).length).toBe(1);
    expect(await runsUsed(s.id)).toBe(3);
  });

  it('claims: a stale holder is refused after its lease: another agent claims, and the task shows only the second agent’s work', async () => {
    const s = await space('stale');
    const first = await s.agent('first');
    const second = await s.agent('second');
    const id = await s.issue();
    const policy = await call('PUT', '/api/agents/claim-policy', { cookie: admin, body: { workspaceId: s.id, leaseSeconds: 1 } });
    expect(policy.status, JSON.stringify(policy.body)).toBe(200);
    const a = await claim(first, id);
    expect(a.status).toBe(200);
    expect(a.body.data.claim.leaseSeconds).toBe(1);
    await call('PUT', '/api/agents/claim-policy', { cookie: admin, body: { workspaceId: s.id, leaseSeconds: null } });
    // The lease ends (swept or not, expiry is decided by expiresAt), and the second agent claims.
    const b = await eventually(async () => {
      const res = await claim(second, id);
      return res.status === 200 ? res : undefined;
    }, SWEEP_BOUND_MS + 2_000, 'the second claim');
    expect(b.body.data.claim.fencingToken).toBe(2);

    expectError(await call('POST', `/api/agents/claims/${id}/status`, { token: first.token, body: { message: 'stale progress' } }), 409, 'work-already-claimed', 'stale-claim');
    expectError(await call('PATCH', `/api/issues/${id}`, { token: first.token, body: { status: 'in-review', fencingToken: 1 } }), 409, 'work-already-claimed', 'stale-claim');
    expectError(await call('PATCH', `/api/issues/${id}`, { token: first.token, body: { status: 'in-review' } }), 409, 'work-already-claimed', 'active-claim');
    expectError(await call('POST', `/api/issues/${id}/comments`, { token: first.token, body: { body: 'stale comment' } }), 409, 'work-already-claimed', 'active-claim');
    expectError(await call('POST', `/api/agents/claims/${id}/heartbeat`, { token: first.token, body: { fencingToken: 1 } }), 409, 'work-already-claimed', 'stale-claim');

    expect((await call('POST', `/api/agents/claims/${id}/status`, { token: second.token, body: { message: 'second agent at work', fencingToken: 2 } })).status).toBe(201);
    const done = await call('PATCH', `/api/issues/${id}`, { token: second.token, body: { status: 'in-review', fencingToken: 2 } });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    const detail = await issue(id);
    expect(detail.status).toBe('in-review');
    expect(detail.comments.map((c: any) => [c.authorId, c.body])).toEqual([[second.id, 'second agent at work']]);
    const firstWrites = detail.activity.filter((x: any) => x.actor.id === first.id).map((x: any) => x.kind);
    expect(firstWrites).toEqual(['claimed']);
    await expectNoStrandedTasks(s.id);
  });

  it('claims: the sweeper returns an expired claim’s task to ready within the stated bound, with activity and a claim.expired event', async () => {
    const s = await space('sweeper');
    const agent = await s.agent('sleepy');
    const id = await s.issue();
    await call('PUT', '/api/agents/claim-policy', { cookie: admin, body: { workspaceId: s.id, leaseSeconds: 2 } });
    const claimed = await claim(agent, id);
    expect(claimed.status).toBe(200);
    const expiresAt = Date.parse(claimed.body.data.claim.expiresAt);
    // Nobody touches the task: only the sweeper can return it, and must within the bound.
    await eventually(async () => (await issue(id)).status === 'ready', expiresAt - Date.now() + SWEEP_BOUND_MS, 'the sweeper to return the task');
    const detail = await issue(id);
    expect(detail.activity.map((x: any) => x.kind)).toEqual(['created', 'claimed', 'claim-expired']);
    const [expired] = await claimsOf(s.id, '&state=expired');
    expect(expired).toMatchObject({ issueId: id, agentId: agent.agentId, state: 'expired', endReason: 'lease-expired' });
    await eventually(async () => (await audit(s.id, 'claim.expired')).length === 1, 15_000, 'the claim.expired audit event');
    // Reclaimable, by anyone.
    const next = await s.agent('next');
    expect((await claim(next, id)).status).toBe(200);
    await expectNoStrandedTasks(s.id);
  });

  it('claims: the holder or a member releases a claim and the task returns to ready; the run is not given back', async () => {
    const s = await space('release');
    const agent = await s.agent('quitter');
    const id = await s.issue();
    expect((await claim(agent, id)).status).toBe(200);
    const released = await call('POST', `/api/agents/claims/${id}/release`, { token: agent.token, body: { fencingToken: 1 } });
    expect(released.status, JSON.stringify(released.body)).toBe(200);
    expect(released.body.data).toMatchObject({ claim: { state: 'released', endReason: 'released-by-agent', fencingToken: 1 }, issue: { id, status: 'ready' } });
    expect((await issue(id)).status).toBe('ready');
    expect((await claim(agent, id)).body.data.claim.fencingToken).toBe(2);
    expect((await call('POST', `/api/agents/claims/${id}/release`, { cookie: member.cookie })).status).toBe(200);
    expect(await runsUsed(s.id)).toBe(2);
    await eventually(async () => (await audit(s.id, 'claim.released')).length === 2, 15_000, 'claim.released audit events');
  });

  it('claims: an agents-claims process killed mid-claim leaves no task stuck in progress without an active claim after the next sweep', async () => {
    const s = await space('crash');
    const ids = [await s.issue(), await s.issue()];
    const agents = [await s.agent('doomed'), await s.agent('doomed')];
    for (const [n, failpoint] of ['claims.after-start', 'claims.after-insert'].entries()) {
      const id = ids[n]!;
      // The process that serves this claim dies at the failpoint (distributed: the second replica,
      // whose own gateway sends it the claim; all-in-one: the one process).
      const victimName = mode === 'distributed' ? 'agents-claims-2' : 'all';
      const victim = cluster.process(victimName);
      await victim.stop();
      victim.env.SERVICE_FAILPOINTS = `${failpoint}=crash`;
      await victim.start();
      const base = mode === 'distributed' ? cluster.gatewayUrls[1] : cluster.baseUrl;
      // Reach the (re)started process first, so the claim is served by it.
      await eventually(async () => (await call('GET', '/api/agents/ready-work', { token: agents[n]!.token, base })).status === 200, 15_000, 'the restarted process');
      const attempt = await claim(agents[n]!, id, {}, base).catch((err: unknown) => err);
      if (!(attempt instanceof Error)) expect([500, 502, 503]).toContain((attempt as ApiResponse).status);
      const exited = await Promise.race([victim.waitForExit().then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 15_000))]);
      expect(exited, `the process dies at ${failpoint}`).toBe(true);
      delete victim.env.SERVICE_FAILPOINTS;
      if (mode === 'all-in-one') await victim.start();
      // The survivor (distributed) or the restarted process (all-in-one) sweeps it up.
      // The claim shows aborted as soon as it ends in the claims store; the task follows when the end reaches it.
      await eventually(
        async () => (await claimsOf(s.id, `&issueId=${id}&state=aborted`)).length === 1 && (await issue(id)).status === 'ready',
        20_000,
        `the repair after ${failpoint}`,
      );
      const task = await issue(id);
      expect(task.status).toBe('ready');
      expect(task.activity.map((x: any) => x.kind)).toEqual(failpoint === 'claims.after-start' ? ['created', 'claimed', 'claim-aborted'] : ['created']);
      await expectNoStrandedTasks(s.id);
      // The run it took is given back, and the task is claimable again.
      expect(await runsUsed(s.id)).toBe(n);
      expect((await claim(agents[n]!, id)).status).toBe(200);
      if (mode === 'distributed') await victim.start();
    }
    await expectNoStrandedTasks(s.id);
  }, 120_000);
});
