/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies and tool results are whatever the server sent; tests assert on them. */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, createKey, createUser, createWorkspace, type TestKey, type TestUser } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { agentRunsUsed, type ApiResponse, auditEvents, eventually, login, request } from '../support/http.js';

/**
 * The end of a claim through the gateway, REST and MCP, in both modes (issue #14, docs/claims.md
 * "Writes under claims", docs/planning.md "Done policy and approvals"): every kind of agent write
 * after its claim expired and was swept, after another agent's takeover, and with a stale fencing
 * token — 409 and nothing stored; the done policy for each `doneRequires` value, agent and member,
 * with and without an override; bad input named by field; approvals that gate, seen by the agent,
 * with events on decision and expiry. Leases run out through a one-second workspace lease and a
 * fast sweep (no clock in a process to move), so each phase waits about a second once, for all
 * its tasks together. Distributed: two agents-claims replicas share one store; claims go through
 * both replicas' gateways, so the replica that answers the fence is often not the one that
 * handed the claim out.
 */
const AGENT_SCOPES = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];
const SWEEP_MS = 300;
/** Short, so a request expires within the test; long enough for a request, its checks and its decision on a loaded machine. */
const APPROVAL_TTL_SECONDS = 5;

type Transport = 'rest' | 'mcp';
const KINDS = ['field', 'status', 'bulk', 'contract', 'comment', 'time', 'evidence', 'approval'] as const;
type Kind = (typeof KINDS)[number];
/** MCP has no bulk tool: every other kind has its tool. */
const CASES: { transport: Transport; kind: Kind }[] = [
  ...KINDS.map((kind) => ({ transport: 'rest' as const, kind })),
  ...KINDS.filter((k) => k !== 'bulk').map((kind) => ({ transport: 'mcp' as const, kind })),
];

/** A write's answer, the same shape for REST and MCP: `ok`, or the error's code, reason and field. */
interface Outcome {
  ok: boolean;
  code?: string;
  reason?: string;
  field?: string;
  missingCheckIds?: string[];
  data?: any;
}
const said = (o: Outcome) => (o.ok ? 'ok' : `${o.code}/${o.reason ?? o.field ?? ''}`);

describe.each<Mode>(['all-in-one', 'distributed'])('claims fence (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;
  let member: TestUser;
  let n = 0;

  const call = (method: string, path: string, options: { body?: unknown; cookie?: string; token?: string; headers?: Record<string, string>; base?: string } = {}): Promise<ApiResponse> =>
    request(options.base ?? cluster.baseUrl, method, path, options);
  /** A gateway per call in turn: distributed, the claims replicas take turns too. */
  const base = () => cluster.gatewayUrls[n++ % cluster.gatewayUrls.length]!;

  const restOutcome = (res: ApiResponse): Outcome => {
    if (res.status >= 200 && res.status < 300) return { ok: true, data: res.body.data };
    expect(res.body?.error, `${res.status} ${JSON.stringify(res.body)}`).toBeDefined();
    const e = res.body.error;
    return { ok: false, code: e.code, reason: e.reason, field: e.field, missingCheckIds: e.missingCheckIds };
  };

  /** A tool call over plain JSON-RPC (what every MCP client sends in the end). */
  const tool = async (token: string, name: string, args: Record<string, unknown>): Promise<Outcome> => {
    const res = await call('POST', '/api/mcp', {
      token,
      base: base(),
      headers: { accept: 'application/json' },
      body: { jsonrpc: '2.0', id: ++n, method: 'tools/call', params: { name: `service.${name}`, arguments: args } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // Arguments that do not fit the tool's schema are refused before any call: a JSON-RPC error naming the field.
    if (res.body.error) return { ok: false, code: res.body.error.data?.code, field: res.body.error.data?.field };
    const result = res.body.result;
    expect(result, JSON.stringify(res.body)).toBeDefined();
    if (!result.isError) return { ok: true, data: result.structuredContent?.data };
    const e = result.structuredContent.error;
    return { ok: false, code: e.code, reason: e.reason, field: e.field, missingCheckIds: e.missingCheckIds };
  };

  /** One agent write of a kind, as its REST route or MCP tool makes it; `extra` is merged into the body or arguments. */
  const write = async (transport: Transport, kind: Kind, key: TestKey, issueId: string, extra: Record<string, unknown> = {}): Promise<Outcome> => {
    const tag = `w${++n}`;
    if (transport === 'rest') {
      const t = { token: key.token, base: base() };
      switch (kind) {
        case 'field':
          return restOutcome(await call('PATCH', `/api/issues/${issueId}`, { ...t, body: { title: `Title ${tag}`, ...extra } }));
        case 'status':
          return restOutcome(await call('PATCH', `/api/issues/${issueId}`, { ...t, body: { status: 'in-review', ...extra } }));
        case 'bulk':
          return restOutcome(await call('POST', '/api/issues/bulk-update', { ...t, body: { issueIds: [issueId], mode: 'apply', patch: { labels: { add: [tag] } }, ...extra } }));
        case 'contract':
          return restOutcome(await call('PATCH', `/api/issues/${issueId}/task-contract`, { ...t, body: { agent: { instructions: { objective: `Goal ${tag}` } }, ...extra } }));
        case 'comment':
          return restOutcome(await call('POST', `/api/issues/${issueId}/comments`, { ...t, body: { body: `Comment ${tag}`, ...extra } }));
        case 'time':
          return restOutcome(await call('POST', `/api/issues/${issueId}/time-entries`, { ...t, body: { minutes: 5, ...extra } }));
        case 'evidence':
          return restOutcome(await call('POST', `/api/issues/${issueId}/evidence`, { ...t, body: { kind: 'note', title: `Evidence ${tag}`, body: 'b', ...extra } }));
        case 'approval':
          return restOutcome(await call('POST', `/api/issues/${issueId}/approvals`, { ...t, body: { reason: `Approval ${tag}`, for: 'custom', ...extra } }));
      }
    }
    switch (kind) {
      case 'field':
        return tool(key.token, 'update_issue', { issueId, title: `Title ${tag}`, ...extra });
      case 'status':
        return tool(key.token, 'update_issue_status', { issueId, status: 'in-review', ...extra });
      case 'contract':
        return tool(key.token, 'update_task_contract', { issueId, agent: { instructions: { objective: `Goal ${tag}` } }, ...extra });
      case 'comment':
        return tool(key.token, 'add_comment', { issueId, body: `Comment ${tag}`, ...extra });
      case 'time':
        return tool(key.token, 'log_time', { issueId, minutes: 5, ...extra });
      case 'evidence':
        return tool(key.token, 'add_evidence', { issueId, kind: 'note', title: `Evidence ${tag}`, body: 'b', ...extra });
      case 'approval':
        return tool(key.token, 'request_approval', { issueId, reason: `Approval ${tag}`, for: 'custom', ...extra });
      case 'bulk':
        throw new Error('MCP has no bulk tool');
    }
  };

  const issue = async (id: string) => {
    const res = await call('GET', `/api/issues/${id}`, { cookie: admin });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  };
  /** Everything a write could leave on a task. */
  const footprint = async (id: string) => {
    const t = await issue(id);
    return {
      version: t.version,
      status: t.status,
      title: t.title,
      labels: t.labels,
      objective: t.agent.instructions.objective ?? null,
      comments: t.commentCount,
      activity: t.activityCount,
      time: t.timeLoggedMinutes,
      evidence: t.evidenceCount,
      approvals: t.approvals.length,
    };
  };
  const claimsOf = async (ws: string, issueId: string, states = 'starting,active,released,completed,expired,aborted') => {
    const res = await call('GET', `/api/agents/claims?workspaceId=${ws}&issueId=${issueId}&state=${states}`, { cookie: admin });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data as any[];
  };
  const runsUsed = (ws: string) => agentRunsUsed(cluster.baseUrl, admin, ws);
  const audit = (ws: string, type: string) => auditEvents(cluster.baseUrl, admin, ws, type);
  const claim = async (key: TestKey, issueId: string) => {
    const res = await call('POST', '/api/agents/claim', { token: key.token, body: { issueId }, base: base() });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data.claim as { id: string; fencingToken: number; expiresAt: string };
  };
  const leasePolicy = async (ws: string, leaseSeconds: number | null) => {
    const res = await call('PUT', '/api/agents/claim-policy', { cookie: admin, body: { workspaceId: ws, leaseSeconds } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  interface Space {
    id: string;
    projectId: string;
    agent(name: string): Promise<TestKey>;
    task(fields?: Record<string, unknown>): Promise<any>;
  }
  const space = async (label: string): Promise<Space> => {
    const ws = (await createWorkspace(cluster.baseUrl, admin, `Fence ${label} ${randomBytes(3).toString('hex')}`, 'pro')).id as string;
    await addMember(cluster.baseUrl, admin, ws, member.id, 'member');
    const project = await call('POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Fenced work' } });
    expect(project.status).toBe(201);
    return {
      id: ws,
      projectId: project.body.data.id,
      agent: (name) => createKey(cluster.baseUrl, admin, ws, 'pro', AGENT_SCOPES, `${name}-${randomBytes(3).toString('hex')}`),
      async task(fields = {}) {
        const res = await call('POST', '/api/issues', { cookie: admin, body: { projectId: project.body.data.id, title: 'Fenced task', ...fields } });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        return res.body.data;
      },
    };
  };

  beforeAll(async () => {
    cluster = await startCluster(mode, {
      ...(mode === 'distributed' ? { agentsClaimsReplicas: 2 } : {}),
      env: {
        CLAIM_SWEEP_INTERVAL_MS: String(SWEEP_MS),
        CLAIM_START_TIMEOUT_MS: '3000',
        APPROVAL_TTL_SECONDS: String(APPROVAL_TTL_SECONDS),
        APPROVAL_SWEEP_INTERVAL_MS: String(SWEEP_MS),
      },
    });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    member = await createUser(cluster.baseUrl, admin, 'fence-member');
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('fence: every kind of agent write, REST and MCP — after expiry and sweep, after a takeover, with a stale token — is 409 and stores nothing; comments stay open', async () => {
    const s = await space('kinds');
    const rows = await Promise.all(
      CASES.map(async (c) => ({ ...c, id: (await s.task()).id as string, a: await s.agent('holder'), b: await s.agent('taker') })),
    );
    const label = (r: (typeof rows)[number]) => `${r.transport} ${r.kind}`;
    const refusedAndUnchanged = async (r: (typeof rows)[number], extra: Record<string, unknown>, expected: string, what: string) => {
      const before = await footprint(r.id);
      expect(said(await write(r.transport, r.kind, r.a, r.id, extra)), `${label(r)}: ${what}`).toBe(expected);
      expect(await footprint(r.id), `${label(r)}: ${what} stored nothing`).toEqual(before);
    };

    // 1. Every holder claims under a one-second lease, and the sweep returns every task to ready.
    await leasePolicy(s.id, 1);
    const first = new Map<string, number>();
    for (const r of rows) first.set(r.id, (await claim(r.a, r.id)).fencingToken);
    await leasePolicy(s.id, null);
    await eventually(async () => (await Promise.all(rows.map(async (r) => (await issue(r.id)).status === 'ready'))).every(Boolean), 15_000, 'every lease to expire and be swept');
    for (const r of rows) expect((await claimsOf(s.id, r.id))[0], label(r)).toMatchObject({ state: 'expired', endReason: 'lease-expired' });
    for (const r of rows) {
      const stale = first.get(r.id)!;
      await refusedAndUnchanged(r, { fencingToken: stale }, 'work-already-claimed/stale-claim', 'expired, with its token');
      if (r.kind === 'comment') {
        // Comments stay open without a token: the agent may say what happened.
        expect(said(await write(r.transport, r.kind, r.a, r.id)), `${label(r)}: a comment after expiry`).toBe('ok');
      } else {
        await refusedAndUnchanged(r, {}, 'work-already-claimed/stale-claim', 'expired, without a token');
      }
    }

    // 2. Another agent takes the task over: the former holder is kept out, with or without a token,
    // while the taker holds it and after the taker has let it go.
    const second = new Map<string, number>();
    for (const r of rows) second.set(r.id, (await claim(r.b, r.id)).fencingToken);
    for (const r of rows) {
      expect(second.get(r.id), label(r)).toBe(first.get(r.id)! + 1);
      await refusedAndUnchanged(r, { fencingToken: first.get(r.id) }, 'work-already-claimed/stale-claim', 'taken over, with its token');
      await refusedAndUnchanged(r, { fencingToken: second.get(r.id) }, 'work-already-claimed/active-claim', "taken over, with the taker's token");
      await refusedAndUnchanged(r, {}, 'work-already-claimed/active-claim', 'taken over, without a token');
    }
    for (const r of rows) {
      const released = await call('POST', `/api/agents/claims/${r.id}/release`, { token: r.b.token, body: { fencingToken: second.get(r.id) }, base: base() });
      expect(released.status, JSON.stringify(released.body)).toBe(200);
      await refusedAndUnchanged(r, { fencingToken: second.get(r.id) }, 'work-already-claimed/stale-claim', "after the takeover ended, with the taker's token");
      if (r.kind !== 'comment') await refusedAndUnchanged(r, {}, 'work-already-claimed/stale-claim', 'after the takeover ended, without a token');
    }

    // 3. The former holder claims again: its old token is stale, its new one writes.
    for (const r of rows) {
      const again = await claim(r.a, r.id);
      expect(again.fencingToken, label(r)).toBe(second.get(r.id)! + 1);
      await refusedAndUnchanged(r, { fencingToken: first.get(r.id) }, 'work-already-claimed/stale-claim', 'holding a new claim, with the old token');
      const landed = await write(r.transport, r.kind, r.a, r.id, { fencingToken: again.fencingToken });
      expect(said(landed), `${label(r)}: the new claim's token`).toBe('ok');
      if (r.kind !== 'status') {
        const released = await call('POST', `/api/agents/claims/${r.id}/release`, { token: r.a.token, base: base() });
        expect(released.status, JSON.stringify(released.body)).toBe(200);
      }
    }
  }, 120_000);

  it('fence: a fencing token that is not a positive integer is 400 naming fencingToken for every kind, REST and MCP, and changes nothing', async () => {
    const s = await space('bad-token');
    const a = await s.agent('holder');
    const id = (await s.task()).id as string;
    const held = await claim(a, id);
    const before = await footprint(id);
    for (const c of CASES) {
      for (const bad of [0, -1, 1.5, '1']) {
        const o = await write(c.transport, c.kind, a, id, { fencingToken: bad });
        expect([o.code, o.field], `${c.transport} ${c.kind} fencingToken ${JSON.stringify(bad)}`).toEqual(['invalid-input', 'fencingToken']);
      }
    }
    expect(await footprint(id)).toEqual(before);
    expect((await claimsOf(s.id, id, 'active'))[0]).toMatchObject({ id: held.id });
  });

  it('done policy: each doneRequires value × agent (REST, MCP) and member (REST) × override; refusals leave status, claim and metering as they were', async () => {
    const s = await space('done');
    const setPolicy = async (doneRequires: string, doneGate = 'done') => {
      const res = await call('PATCH', `/api/workspaces/${s.id}`, { cookie: admin, body: { doneRequires, doneGate } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toMatchObject({ doneRequires, doneGate });
    };
    type Who = 'agent-rest' | 'agent-mcp' | 'member';
    /** A task in review with one acceptance check; an agent's claim of it is completed. */
    const inReview = async (who: Who, key: TestKey) => {
      const t = await s.task({ acceptanceChecks: [{ title: 'Tests pass' }] });
      if (who === 'member') {
        for (const status of ['in-progress', 'in-review']) expect((await call('PATCH', `/api/issues/${t.id}`, { cookie: member.cookie, body: { status } })).status).toBe(200);
      } else {
        const held = await claim(key, t.id);
        expect(said(await write(who === 'agent-rest' ? 'rest' : 'mcp', 'status', key, t.id, { fencingToken: held.fencingToken }))).toBe('ok');
        // The claim ends when the status change reaches agents-claims (an event); until then it still holds the task.
        await eventually(async () => (await claimsOf(s.id, t.id))[0].state === 'completed', 15_000, 'the claim to complete');
      }
      return { id: t.id as string, checkId: t.acceptanceChecks[0].id as string };
    };
    const moveToDone = async (who: Who, key: TestKey, id: string, override?: Record<string, unknown>): Promise<Outcome> => {
      const extra = override ? { override } : {};
      if (who === 'member') return restOutcome(await call('PATCH', `/api/issues/${id}`, { cookie: member.cookie, body: { status: 'done', ...extra } }));
      return write(who === 'agent-rest' ? 'rest' : 'mcp', 'status', key, id, { status: 'done', ...extra });
    };
    const evidence = async (key: TestKey, id: string, checkId: string) =>
      expect(said(restOutcome(await call('POST', `/api/issues/${id}/evidence`, { token: key.token, body: { kind: 'test-result', title: 'Green', checkId } })))).toBe('ok');
    const approve = async (key: TestKey, id: string) => {
      const asked = restOutcome(await call('POST', `/api/issues/${id}/approvals`, { token: key.token, body: { reason: 'Ready to ship', for: 'done' } }));
      expect(said(asked)).toBe('ok');
      const decided = await call('POST', `/api/issues/${id}/approvals/${asked.data.id}/decision`, { cookie: member.cookie, body: { decision: 'approved' } });
      expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    };

    const agents = { rest: await s.agent('rest'), mcp: await s.agent('mcp') };
    const cells: string[] = [];
    for (const requires of ['nothing', 'evidence', 'evidence-and-approval'] as const) {
      await setPolicy(requires);
      for (const who of ['agent-rest', 'agent-mcp', 'member'] as const) {
        const key = who === 'agent-mcp' ? agents.mcp : agents.rest;
        for (const withOverride of [false, true]) {
          const cell = `${requires} × ${who} × ${withOverride ? 'override' : 'no override'}`;
          cells.push(cell);
          const { id, checkId } = await inReview(who, key);
          // Under evidence-and-approval the check has its evidence, so what is missing is the approval.
          if (requires === 'evidence-and-approval') await evidence(agents.rest, id, checkId);
          const before = await footprint(id);
          const runs = await runsUsed(s.id);
          const o = await moveToDone(who, key, id, withOverride ? { reason: 'Hotfix shipped; proof follows' } : undefined);
          const expected =
            withOverride && who !== 'member'
              ? 'forbidden/override-not-allowed'
              : requires === 'nothing' || withOverride
                ? 'ok'
                : requires === 'evidence'
                  ? 'work-already-claimed/evidence-missing'
                  : 'work-already-claimed/approval-required';
          expect(said(o), cell).toBe(expected);
          expect(await runsUsed(s.id), cell).toBe(runs);
          const overridden = (await issue(id)).activity.filter((x: any) => x.kind === 'done-policy-overridden');
          if (!o.ok) {
            if (o.reason === 'evidence-missing') expect(o.missingCheckIds, cell).toEqual([checkId]);
            expect(await footprint(id), `${cell}: refused, nothing changed`).toEqual(before);
            // What is missing, once provided, lets the same mover complete.
            if (requires === 'evidence') await evidence(agents.rest, id, checkId);
            if (requires === 'evidence-and-approval') await approve(agents.rest, id);
            expect(said(await moveToDone(who, key, id)), `${cell}: once proven`).toBe('ok');
          } else {
            expect((await issue(id)).status, cell).toBe('done');
            // An override is audited only when it set something aside.
            expect(overridden.length, cell).toBe(withOverride && requires !== 'nothing' ? 1 : 0);
          }
        }
      }
    }
    expect(cells).toHaveLength(18);
    await eventually(async () => (await audit(s.id, 'task.done-policy-overridden')).length === 2, 15_000, 'the two overrides in the audit log');
  }, 120_000);

  it("done policy: gating in-review, an agent's refused completion keeps its claim active and its metering as it was (REST and MCP)", async () => {
    const s = await space('gate');
    const res = await call('PATCH', `/api/workspaces/${s.id}`, { cookie: admin, body: { doneRequires: 'evidence', doneGate: 'in-review' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    for (const transport of ['rest', 'mcp'] as const) {
      const a = await s.agent(transport);
      const t = await s.task({ acceptanceChecks: [{ title: 'Works' }] });
      const held = await claim(a, t.id);
      const runs = await runsUsed(s.id);
      const before = await footprint(t.id);
      const refused = await write(transport, 'status', a, t.id, { fencingToken: held.fencingToken });
      expect([said(refused), refused.missingCheckIds], transport).toEqual(['work-already-claimed/evidence-missing', [t.acceptanceChecks[0].id]]);
      expect(await footprint(t.id)).toEqual(before);
      expect(await runsUsed(s.id)).toBe(runs);
      expect((await claimsOf(s.id, t.id))[0]).toMatchObject({ id: held.id, state: 'active' });
      // The agent sees what is missing where it reads its work.
      const contract = await call('GET', `/api/issues/${t.id}/task-contract`, { token: a.token });
      expect(contract.body.data.done).toMatchObject({ requires: 'evidence', missingCheckIds: [t.acceptanceChecks[0].id], ready: false });
      const item = (await call('GET', '/api/agents/ready-work', { token: a.token })).body.data.find((i: any) => i.id === t.id);
      expect(item.agentClaimQueue.doneEvidence).toMatchObject({ requires: 'evidence', missingCheckIds: [t.acceptanceChecks[0].id], ready: false });
      expect(item.agentClaimQueue.nextAction).toContain(t.acceptanceChecks[0].id);
      expect(said(await write(transport, 'evidence', a, t.id, { checkId: t.acceptanceChecks[0].id, fencingToken: held.fencingToken }))).toBe('ok');
      expect(said(await write(transport, 'status', a, t.id, { fencingToken: held.fencingToken }))).toBe('ok');
      // The claim ends when the status change reaches agents-claims (an event).
      await eventually(async () => (await claimsOf(s.id, t.id))[0].state === 'completed', 15_000, 'the claim to complete');
      expect(await runsUsed(s.id)).toBe(runs);
    }
  });

  it('bad input: unknown doneRequires, an override without a reason, an approval `for` not listed: 400 naming the field, REST and MCP; nothing half applied', async () => {
    const s = await space('bad-input');
    const expect400 = (o: Outcome, field: string, what: string) => expect([o.code, o.field], what).toEqual(['invalid-input', field]);
    const workspace = async () => (await call('GET', `/api/workspaces/${s.id}`, { cookie: admin })).body.data;
    const ws = await workspace();
    expect400(restOutcome(await call('PATCH', `/api/workspaces/${s.id}`, { cookie: admin, body: { doneRequires: 'proof' } })), 'doneRequires', 'workspace doneRequires');
    expect400(restOutcome(await call('PATCH', `/api/workspaces/${s.id}`, { cookie: admin, body: { name: 'Renamed', doneRequires: 'always' } })), 'doneRequires', 'workspace name and doneRequires');
    expect(await workspace()).toEqual(ws);
    const project = async () => (await call('GET', `/api/projects/${s.projectId}`, { cookie: admin })).body.data;
    const p = await project();
    expect400(restOutcome(await call('PATCH', '/api/projects', { cookie: admin, body: { projectId: s.projectId, goal: 'New goal', doneRequires: 'sometimes' } })), 'doneRequires', 'project doneRequires');
    expect(await project()).toEqual(p);

    const a = await s.agent('holder');
    const t = await s.task();
    const held = await claim(a, t.id);
    const before = await footprint(t.id);
    for (const transport of ['rest', 'mcp'] as const) {
      for (const override of [{}, { reason: '' }]) {
        const o = await write(transport, 'status', a, t.id, { fencingToken: held.fencingToken, override });
        expect(o.code, `${transport} override ${JSON.stringify(override)}`).toBe('invalid-input');
        expect(o.field, `${transport} override ${JSON.stringify(override)}`).toMatch(/^override(\.reason)?$/);
      }
      expect400(await write(transport, 'approval', a, t.id, { for: 'ship-it', fencingToken: held.fencingToken }), 'for', `${transport} approval for`);
    }
    const memberOverride = restOutcome(await call('PATCH', `/api/issues/${t.id}`, { cookie: member.cookie, body: { status: 'in-review', override: { reason: '   ' } } }));
    expect400(memberOverride, 'override.reason', 'member override with a blank reason');
    expect(await footprint(t.id)).toEqual(before);
    expect((await claimsOf(s.id, t.id))[0]).toMatchObject({ id: held.id, state: 'active' });
  });

  it('approvals: a pending approval for done blocks it; the requesting agent sees the decision in ready work, preflight and its claim; events on decision and on expiry', async () => {
    const s = await space('approvals');
    // A request nobody decides (another agent's, on another task) runs out while the rest goes on.
    const w = await s.agent('waiter');
    const u = await s.task();
    const waiting = await claim(w, u.id);
    const pending = await write('rest', 'approval', w, u.id, { for: 'in-review', fencingToken: waiting.fencingToken });
    expect(said(pending)).toBe('ok');
    expect(Date.parse(pending.data.expiresAt) - Date.parse(pending.data.createdAt)).toBe(APPROVAL_TTL_SECONDS * 1000);
    expect(said(await write('rest', 'status', w, u.id, { fencingToken: waiting.fencingToken }))).toBe('work-already-claimed/approval-pending');

    const a = await s.agent('asker');
    const t = await s.task();
    const held = await claim(a, t.id);
    const asked = await write('mcp', 'approval', a, t.id, { for: 'in-review', fencingToken: held.fencingToken });
    expect(said(asked)).toBe('ok');
    expect(asked.data).toMatchObject({ status: 'pending', for: 'in-review' });
    // The pending request blocks the move it was asked for, and the claim stays as it was.
    const blocked = await write('rest', 'status', a, t.id, { fencingToken: held.fencingToken });
    expect(said(blocked)).toBe('work-already-claimed/approval-pending');
    expect((await claimsOf(s.id, t.id))[0]).toMatchObject({ state: 'active' });
    const preflight = await tool(a.token, 'get_agent_preflight', {});
    expect(preflight.data.firstSessionDecision).toMatchObject({ decision: 'wait-for-approval', issueId: t.id });

    const decided = await call('POST', `/api/issues/${t.id}/approvals/${asked.data.id}/decision`, { cookie: member.cookie, body: { decision: 'approved' } });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    const beat = await call('POST', `/api/agents/claims/${t.id}/heartbeat`, { token: a.token, body: { fencingToken: held.fencingToken } });
    expect(beat.body.data.issue.approvals, JSON.stringify(beat.body)).toEqual([expect.objectContaining({ id: asked.data.id, for: 'in-review', status: 'approved' })]);
    const ready = await call('GET', '/api/agents/ready-work', { token: a.token });
    expect(ready.body.data.find((i: any) => i.id === t.id)?.approvals).toEqual([expect.objectContaining({ id: asked.data.id, status: 'approved' })]);
    const after = (await tool(a.token, 'get_agent_preflight', {})).data;
    expect(after.firstSessionDecision.decision).toBe('resume-claim');
    expect(after.checks.find((c: any) => c.id === 'pending-approvals').decided).toEqual([expect.objectContaining({ id: asked.data.id, for: 'in-review', status: 'approved' })]);
    await eventually(async () => (await audit(s.id, 'approval.decided')).length === 1, 15_000, 'approval.decided');
    expect(said(await write('mcp', 'status', a, t.id, { fencingToken: held.fencingToken }))).toBe('ok');

    // The undecided request expires (APPROVAL_TTL_SECONDS): it stops blocking, and the sweep records it with an event.
    await eventually(async () => (await audit(s.id, 'approval.expired')).length === 1, APPROVAL_TTL_SECONDS * 1000 + 15_000, 'approval.expired');
    const expired = (await call('GET', `/api/issues/${u.id}/approvals`, { cookie: admin })).body.data;
    expect(expired).toEqual([expect.objectContaining({ id: pending.data.id, status: 'expired' })]);
    expect(said(await write('rest', 'status', w, u.id, { fencingToken: waiting.fencingToken }))).toBe('ok');
  });
});
