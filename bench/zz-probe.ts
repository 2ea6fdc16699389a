import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKey, createWorkspace } from '../test/support/auth.js';
import { ADMIN_EMAIL } from '../test/support/cluster.js';
import { login, request } from '../test/support/http.js';
import { getFreePort } from '@planning/testing';

const port = await getFreePort();
const dir = mkdtempSync(join(tmpdir(), 'probe-'));
const child = spawn(process.execPath, [...(process.env.PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROF}`] : []), 'dist/main.mjs'], {
  cwd: process.cwd(),
  env: { PATH: process.env.PATH!, HOME: dir, PORT: String(port), GRPC_PORT: String(await getFreePort()), METRICS_PORT: String(await getFreePort()), HOST: '127.0.0.1', LOG_LEVEL: 'warn', SERVICE_DEMO: '0', SERVICE_ADMIN_PASSWORD: 'pw-123456789', DATA_DIR: join(dir, 'data'), SERVICES_THREAD: process.env.ST ?? 'on' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;
for (;;) { try { if ((await fetch(`${base}/ready`)).ok) break; } catch {} await new Promise((r) => setTimeout(r, 100)); }
const admin = await login(base, ADMIN_EMAIL, 'pw-123456789');
const ws = (await createWorkspace(base, admin, 'probe', 'enterprise')).id as string;
const project = (await request(base, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'P' } })).body.data.id as string;
const key = await createKey(base, admin, ws, 'enterprise', ['issues:read', 'issues:write', 'agents:read', 'agents:execute'], 'agent-1');
const task = (await request(base, 'POST', '/api/issues', { cookie: admin, body: { projectId: project, title: 'T', description: 'd', status: 'ready', priority: 'high', acceptanceChecks: [{ title: 'x' }] } })).body.data.id as string;
const t = (label: string, ms: number[]) => { ms.sort((a, b) => a - b); console.log(label, 'p50', ms[ms.length >> 1]!.toFixed(1), 'min', ms[0]!.toFixed(1), 'max', ms.at(-1)!.toFixed(1)); };
const c: number[] = [], r: number[] = [], g: number[] = [], p: number[] = [];
for (let i = 0; i < 30; i++) {
  let s = performance.now();
  const res = await request(base, 'POST', '/api/agents/claim', { token: key.token, body: { issueId: task } });
  if (res.status >= 300) throw new Error(JSON.stringify(res.body));
  c.push(performance.now() - s);
  s = performance.now();
  await request(base, 'GET', `/api/issues/${task}`, { token: key.token });
  g.push(performance.now() - s);
  s = performance.now();
  const rel = await request(base, 'POST', `/api/agents/claims/${task}/release`, { token: key.token, body: {} });
  if (rel.status >= 300) { console.log(rel.status, JSON.stringify(rel.body).slice(0, 300)); break; }
  r.push(performance.now() - s);
  s = performance.now();
  await request(base, 'PATCH', `/api/issues/${task}`, { cookie: admin, body: { priority: i % 2 ? 'low' : 'high' } });
  p.push(performance.now() - s);
}
t('claim', c); t('get', g); t('release', r); t('patch', p);
child.kill('SIGTERM');
