/* eslint-disable @typescript-eslint/no-explicit-any -- answers are whatever the server sent; the test scans them. */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createWorkspace } from '../support/auth.js';
import { findSecrets, readTree } from '../support/canary.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request } from '../support/http.js';

/**
 * Credential-shaped canaries — an API token, a JWT, a session cookie value, a bearer header —
 * posted where they do not belong (URL paths, query strings, request bodies, headers, sign-in
 * fields, MCP arguments) end up in no log line, audit event, export artifact, export history or
 * error body, nor anywhere in the data directory — in distributed mode in no process's log, the
 * ones that never saw the HTTP request included. A control value stored on purpose (a task
 * title) is found, so the scan is known to see what is there.
 */

const base62 = (n: number) => Array.from(randomBytes(n), (b) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'[b % 62]).join('');
const b64url = (bytes: number) => randomBytes(bytes).toString('base64url');

const CANARIES = {
  apiToken: `svc_${base62(43)}${base62(6)}`,
  jwt: `eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.${b64url(48)}.${b64url(64)}`,
  session: b64url(32),
  bearer: `Bearer ${base62(30)}`,
};
/** What must not be found: each canary's distinctive part. */
const SECRETS = [CANARIES.apiToken.slice(4), CANARIES.jwt.split('.')[1]!, CANARIES.session, CANARIES.bearer.slice(7)];
const CONTROL = `control-${randomBytes(8).toString('hex')}`;

describe.each<Mode>(['all-in-one', 'distributed'])('canary (%s)', (mode) => {
  let cluster: Cluster;
  let cookie: string;
  let token: string;
  let workspaceId: string;
  const bodies: Array<{ path: string; text: string }> = [];

  beforeAll(async () => {
    cluster = await startCluster(mode, { env: { LOG_LEVEL: 'debug' } });
    cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    workspaceId = (await createWorkspace(cluster.baseUrl, cookie, 'Canary')).id;
    token = (await createKey(cluster.baseUrl, cookie, workspaceId, 'enterprise', ['issues:read', 'issues:write', 'projects:read', 'projects:write', 'agents:read', 'agents:execute', 'admin'])).token;
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  /** A raw request whose answer body is kept for the scan. */
  async function send(method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}): Promise<number> {
    const res = await fetch(`${cluster.baseUrl}${path}`, { method, headers: init.headers, body: init.body });
    bodies.push({ path: `answer ${method} ${path.slice(0, 60)}`, text: `${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n${await res.text()}` });
    return res.status;
  }

  it('canary: tokens in paths, queries, bodies and headers are refused and leave no trace', async () => {
    const session = { cookie };
    const json = { ...session, 'content-type': 'application/json' };
    const project = (await request(cluster.baseUrl, 'POST', '/api/projects', { cookie, body: { workspaceId, name: 'Canary' } })).body.data;
    const task = (await request(cluster.baseUrl, 'POST', '/api/issues', { cookie, body: { projectId: project.id, title: CONTROL } })).body.data;
    for (const canary of Object.values(CANARIES)) {
      const inPath = encodeURIComponent(canary);
      // Paths: an unknown route, an id, a nested id.
      await send('GET', `/api/${inPath}`, { headers: session });
      await send('GET', `/api/issues/${inPath}`, { headers: session });
      await send('DELETE', `/api/api-keys/${inPath}`, { headers: session });
      // Queries: search text, filters, cursors.
      await send('GET', `/api/issues?workspaceId=${workspaceId}&q=${inPath}`, { headers: session });
      await send('GET', `/api/issues?workspaceId=${inPath}`, { headers: session });
      await send('GET', `/api/users?cursor=${inPath}`, { headers: session });
      await send('GET', `/api/issues/export?workspaceId=${workspaceId}&format=json&q=${inPath}&label=${inPath}`, { headers: session });
      await send('GET', `/api/issues/export?workspaceId=${workspaceId}&format=csv&assignedAgentId=${inPath}`, { headers: session });
      // Bodies: unknown fields, wrong types, values over their bounds.
      await send('POST', '/api/workspaces', { headers: json, body: JSON.stringify({ name: 42, [canary]: canary }) });
      await send('POST', '/api/issues', { headers: json, body: JSON.stringify({ projectId: canary, title: 'x' }) });
      await send('PATCH', `/api/issues/${task.id}`, { headers: json, body: JSON.stringify({ title: `${canary}${'x'.repeat(400)}` }) });
      await send('POST', '/api/agents/claim', { headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': canary }, body: JSON.stringify({ issueId: canary }) });
      await send('POST', '/api/auth/login', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: `${canary}@example.com`, password: canary }) });
      await send('POST', '/api/api-keys', { headers: json, body: JSON.stringify({ workspaceId, agentId: 'a', planId: 'enterprise', scopes: [canary] }) });
      // Headers: a presented token, an API key header, a session cookie, a malformed authorization.
      await send('GET', '/api/workspaces', { headers: { authorization: `Bearer ${canary}` } });
      await send('GET', '/api/workspaces', { headers: { 'x-api-key': canary } });
      await send('GET', '/api/workspaces', { headers: { cookie: `service_session=${canary}` } });
      await send('GET', '/api/workspaces', { headers: { authorization: canary } });
      // MCP: arguments a tool refuses.
      await send('POST', '/api/mcp', {
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'service.get_task_contract', arguments: { issueId: canary } } }),
      });
    }
    expect(bodies.length).toBeGreaterThan(60);

    // What the service keeps about all that: the audit trail, the exports and their history.
    // (Distributed: the audit service writes what reaches it over the bus, a moment later.)
    const audit = await eventually(
      async () => {
        const res = await request(cluster.baseUrl, 'GET', `/api/admin/audit-events?limit=200`, { cookie });
        return res.status === 200 && res.body.data.some((e: any) => e.type === 'auth.token.denied') ? res : undefined;
      },
      20_000,
      'the denied tokens in the audit trail',
    );
    const history = await request(cluster.baseUrl, 'GET', `/api/issues/export/history?workspaceId=${workspaceId}`, { cookie });
    expect(history.body.data.entries.length).toBeGreaterThan(0);
    const artifacts: Array<{ path: string; text: string }> = [];
    for (const format of ['json', 'csv', 'markdown']) {
      const res = await fetch(`${cluster.baseUrl}/api/issues/export?workspaceId=${workspaceId}&format=${format}`, { headers: session });
      artifacts.push({ path: `export ${format}`, text: await res.text() });
    }
    const logs = [...cluster.processes.values()].map((proc) => ({ path: `log of ${proc.name}`, text: proc.output.join('\n') }));
    expect(logs.find((l) => l.path === `log of ${mode === 'all-in-one' ? 'all' : 'gateway'}`)!.text).toContain('request completed');
    const kept = [...bodies, ...logs, ...artifacts, { path: 'audit', text: JSON.stringify(audit.body) }, { path: 'history', text: JSON.stringify(history.body) }];

    // The control: the stored title is in the export, so the scan sees what is there.
    expect(findSecrets(kept, [CONTROL])).not.toEqual([]);
    expect(findSecrets(kept, SECRETS)).toEqual([]);

    await cluster.stop({ keepData: true });
    try {
      const files = await readTree(cluster.dataDir);
      expect(findSecrets(files, [CONTROL])).not.toEqual([]);
      expect(findSecrets(files, SECRETS)).toEqual([]);
    } finally {
      await rm(cluster.dataDir, { recursive: true, force: true });
    }
  }, 240_000);
});
