/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
import { randomBytes } from 'node:crypto';
import { createMongoStore } from '@planning/store/mongo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createWorkspace, type TestKey } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { login, request } from '../support/http.js';

/**
 * The claim race (issue 5): 50 agents race for one task, 200 times, in both modes. In distributed
 * mode two agents-claims processes share one claims store (a mongo-wire server, as replicas share
 * a MongoDB), each behind its own gateway, and the agents alternate between them. Every race must
 * end with exactly one claim; no task ever has two active claims; each race's winner gets the next
 * fencing token; each claim meters exactly one agent run. The winner releases the task through the
 * API between races, so every race starts from the same state through the real service path.
 */
const AGENTS = 50;
const RACES = 200;

describe.each<Mode>(['all-in-one', 'distributed'])('claim race (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;
  let ws: string;
  let agents: (TestKey & { agentId: string; base: string })[];

  beforeAll(async () => {
    cluster = await startCluster(mode, mode === 'distributed' ? { agentsClaimsReplicas: 2 } : {});
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    ws = (await createWorkspace(cluster.baseUrl, admin, `Race ${randomBytes(3).toString('hex')}`, 'pro')).id;
    agents = [];
    for (let i = 0; i < AGENTS; i++) {
      const agentId = `racer-${i}`;
      const key = await createKey(cluster.baseUrl, admin, ws, 'pro', ['issues:read', 'issues:write', 'agents:read', 'agents:execute'], agentId);
      agents.push({ ...key, agentId, base: cluster.gatewayUrls[i % cluster.gatewayUrls.length]! });
    }
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it(`claim race: ${AGENTS} agents race for one task ${RACES} times: exactly one claim per race, never two active claims on the task`, async () => {
    expect(new Set(agents.map((a) => a.base)).size).toBe(mode === 'distributed' ? 2 : 1);
    const project = await request(cluster.baseUrl, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Race track' } });
    const created = await request(cluster.baseUrl, 'POST', '/api/issues', { cookie: admin, body: { projectId: project.body.data.id, title: 'The prize' } });
    const issueId: string = created.body.data.id;
    for (let race = 1; race <= RACES; race++) {
      const answers = await Promise.all(agents.map((a) => request(a.base, 'POST', '/api/agents/claim', { token: a.token, body: { issueId } })));
      const won = answers.filter((r) => r.status === 200);
      const lost = answers.filter((r) => r.status !== 200);
      expect(won, `race ${race}: ${JSON.stringify(lost.find((r) => r.status !== 409)?.body ?? '')}`).toHaveLength(1);
      // A loser meets the claim being taken (active-claim) or the task already in progress (not-ready).
      for (const r of lost) expect([409, ['active-claim', 'not-ready'].includes(r.body.error?.reason)]).toEqual([r.status, true]);
      const claim = won[0]!.body.data.claim;
      expect(claim.fencingToken).toBe(race);
      const active = await request(cluster.baseUrl, 'GET', `/api/agents/claims?workspaceId=${ws}&issueId=${issueId}&state=starting,active`, { cookie: admin });
      expect(active.body.data.map((c: any) => c.id)).toEqual([claim.id]);
      // Back to ready through the real path: the winner releases.
      const winner = agents.find((a) => a.agentId === claim.agentId)!;
      const released = await request(winner.base, 'POST', `/api/agents/claims/${issueId}/release`, { token: winner.token, body: { fencingToken: race } });
      expect(released.status, JSON.stringify(released.body)).toBe(200);
      expect(released.body.data.issue.status).toBe('ready');
    }
    // Every race is on record once, each with its own token; each claim metered one run.
    const history = await request(cluster.baseUrl, 'GET', `/api/agents/claims?workspaceId=${ws}&issueId=${issueId}&state=released&limit=200`, { cookie: admin });
    expect(history.body.data.map((c: any) => c.fencingToken).sort((a: number, b: number) => a - b)).toEqual(Array.from({ length: RACES }, (_, i) => i + 1));
    const usage = await request(cluster.baseUrl, 'GET', `/api/billing/usage?workspaceId=${ws}`, { cookie: admin });
    expect(usage.body.data.quotas.find((q: any) => q.kind === 'agent-runs').used).toBe(RACES);
    const issue = await request(cluster.baseUrl, 'GET', `/api/issues/${issueId}`, { cookie: admin });
    expect(issue.body.data.status).toBe('ready');
    expect(issue.body.data.version).toBe(1 + 2 * RACES);
    if (cluster.claimsStoreUri) {
      // The shared store itself: no task with two active claims, no claim left active.
      const store = createMongoStore({ uri: cluster.claimsStoreUri, database: 'planning-agents-claims' });
      try {
        expect(await store.collection('claims').countDocuments({ state: 'active' })).toBe(0);
        expect(await store.collection('claims').countDocuments({ issueId })).toBe(RACES);
      } finally {
        await store.close();
      }
    }
  }, 300_000);
});
