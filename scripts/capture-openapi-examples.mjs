#!/usr/bin/env node
/* global fetch */
// Captures the success-response examples of the API reference from the running service: starts
// the all-in-one bundle (dist/main.mjs, in memory, on free ports), walks the main flow (sign in,
// workspace, API key, project, issue, its records, ready work, a claim from start to release) and
// writes each answer's body to services/gateway/src/openapi-examples.json, keyed by operationId.
// The OpenAPI document attaches them to the 2xx responses (openapi.ts, finishDocument), and
// Spectral checks every example against its schema in CI, so an example that drifts from the
// response schema fails the build. Re-run after a response shape changes:
//
//   pnpm build && node scripts/capture-openapi-examples.mjs
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

const [port, grpcPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
const password = 'Example-Admin-Pass-1';
const child = spawn(process.execPath, [join(root, 'dist/main.mjs')], {
  env: {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: String(port),
    GRPC_PORT: String(grpcPort),
    METRICS_PORT: String(metricsPort),
    DATA_DIR: ':memory:',
    SERVICE_DEMO: '0',
    SERVICE_ADMIN_PASSWORD: password,
    LOG_LEVEL: 'warn',
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;
try {
  for (let i = 0; ; i++) {
    if ((await fetch(`${base}/ready`).catch(() => undefined))?.ok) break;
    if (i > 300) throw new Error('the service did not become ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  let cookie = '';
  const examples = {};
  const call = async (operationId, method, path, { body, token, expect } = {}) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(token ? { authorization: `Bearer ${token}` } : { cookie }),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = await res.json();
    if (res.status !== expect) throw new Error(`${operationId}: ${res.status} ${JSON.stringify(json)}`);
    if (operationId) examples[operationId] = { status: String(res.status), body: json };
    const setCookie = res.headers.get('set-cookie');
    if (setCookie) cookie = setCookie.split(';')[0];
    return json.data;
  };

  await call('login', 'POST', '/api/auth/login', { body: { email: 'admin@example.com', password }, expect: 200 });
  const ws = await call('createWorkspace', 'POST', '/api/workspaces', { body: { name: 'Acme platform', planId: 'pro' }, expect: 201 });
  const key = await call('createApiKey', 'POST', '/api/api-keys', {
    body: { workspaceId: ws.id, agentId: 'builder-1', planId: 'pro', scopes: ['issues:read', 'issues:write', 'agents:read', 'agents:execute'], label: 'CI builder' },
    expect: 201,
  });
  const project = await call('createProject', 'POST', '/api/projects', { body: { workspaceId: ws.id, name: 'Checkout rewrite' }, expect: 201 });
  const issue = await call('createIssue', 'POST', '/api/issues', {
    body: {
      projectId: project.id,
      title: 'Parse the payment provider webhook',
      description: 'Accept the provider\u2019s signed webhook and record the payment state.',
      status: 'ready',
      priority: 'high',
      labels: ['payments'],
      acceptanceChecks: [{ title: 'Unit tests cover a bad signature' }],
    },
    expect: 201,
  });
  await call('updateIssue', 'PATCH', `/api/issues/${issue.id}`, { body: { dueDate: '2026-12-15', estimate: 3 }, expect: 200 });
  await call('searchIssues', 'GET', `/api/issues?workspaceId=${ws.id}&status=ready&limit=1`, { expect: 200 });
  await call('listReadyWork', 'GET', '/api/agents/ready-work?limit=1', { token: key.token, expect: 200 });
  const claimed = await call('claimWork', 'POST', '/api/agents/claim', { token: key.token, body: { issueId: issue.id }, expect: 200 });
  const fencingToken = claimed.claim.fencingToken;
  await call('renewClaim', 'POST', `/api/agents/claims/${issue.id}/heartbeat`, { token: key.token, body: { fencingToken }, expect: 200 });
  await call('postClaimStatus', 'POST', `/api/agents/claims/${issue.id}/status`, {
    token: key.token,
    body: { message: 'Parser done; writing the tests next', fencingToken },
    expect: 201,
  });
  await call('addComment', 'POST', `/api/issues/${issue.id}/comments`, { token: key.token, body: { body: 'The provider retries for 24 hours; handlers must be idempotent.' }, expect: 201 });
  await call('logTime', 'POST', `/api/issues/${issue.id}/time-entries`, { token: key.token, body: { minutes: 45, note: 'Parser and fixtures', fencingToken }, expect: 201 });
  await call('addEvidence', 'POST', `/api/issues/${issue.id}/evidence`, {
    token: key.token,
    body: { kind: 'test-result', title: 'Webhook parser tests', body: '12 passed', fencingToken },
    expect: 201,
  });
  await call('getIssue', 'GET', `/api/issues/${issue.id}`, { token: key.token, expect: 200 });
  await call('releaseClaim', 'POST', `/api/agents/claims/${issue.id}/release`, { token: key.token, body: { fencingToken }, expect: 200 });
  // The key's secret is shown once; the example shows its shape, not a usable token.
  examples.createApiKey.body.data.token = 'svc_EXAMPLE_shown_once_store_it_now';

  const out = join(root, 'services/gateway/src/openapi-examples.json');
  writeFileSync(out, `${JSON.stringify(examples, null, 2)}\n`);
  console.log(`${Object.keys(examples).length} examples written to ${out}`);
} finally {
  child.kill('SIGTERM');
}
