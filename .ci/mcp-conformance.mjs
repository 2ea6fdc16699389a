#!/usr/bin/env node
/* global fetch -- Node 18+ has it; the lint config lists only the globals the sources use. */
// The official MCP conformance suite (@modelcontextprotocol/conformance, which needs Node 24)
// against a started all-in-one bound to 127.0.0.1: the scenarios that apply to this server.
//
//   node .ci/mcp-conformance.mjs <node-24-binary>
//
// Runs the production bundle (dist/main.mjs, built by the test run) on this Node (its native addons
// are built for it), the suite on Node 24; makes a
// workspace and an API key through the REST API, and puts a small proxy in front of /api/mcp that
// adds the key — the suite connects without credentials, as an agent host with a configured key
// would not — passing Host and Origin through unchanged (the DNS-rebinding scenario sends its own).
// Exits non-zero when a scenario fails; prints each scenario's checks.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];
const CONFORMANCE = '@modelcontextprotocol/conformance@0.1.16';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const node24 = process.argv[2];
if (!node24) {
  console.error('usage: node .ci/mcp-conformance.mjs <node-24-binary>');
  process.exit(2);
}

const work = mkdtempSync(join(tmpdir(), 'mcp-conformance-'));
const cleanups = [() => rmSync(work, { recursive: true, force: true })];
const cleanup = async () => {
  for (const fn of cleanups.reverse()) await fn();
};

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

async function main() {
  execFileSync('npm', ['install', '--prefix', work, '--no-fund', '--no-audit', '--loglevel=error', CONFORMANCE], { stdio: 'inherit' });

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const password = `conformance-${Date.now()}`;
  const service = spawn(process.execPath, [join(root, 'dist/main.mjs'), '--target=all'], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(await freePort()),
      DATA_DIR: ':memory:',
      SERVICE_DEMO: '0',
      SERVICE_ADMIN_PASSWORD: password,
      LOG_LEVEL: 'warn',
      SHUTDOWN_DELAY_MS: '0',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise((resolve) => service.once('exit', resolve));
  cleanups.push(async () => {
    service.kill('SIGTERM');
    await exited;
  });
  for (let i = 0; ; i++) {
    const ready = await fetch(`${base}/ready`).then((r) => r.ok, () => false);
    if (ready) break;
    if (i > 600 || service.exitCode !== null) throw new Error('the service did not become ready');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  // A workspace and an agent key, through the REST API.
  const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'admin@example.com', password }) });
  const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const post = async (path, body) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', cookie }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()).data;
  };
  const workspace = await post('/api/workspaces', { name: 'Conformance', planId: 'pro' });
  const { token } = await post('/api/api-keys', { workspaceId: workspace.id, agentId: 'conformance', planId: 'pro', scopes: ['issues:read', 'agents:read'] });

  // The proxy: the key added, everything else (Host, Origin) as the suite sent it.
  const proxyPort = await freePort();
  const proxy = createServer((req, res) => {
    const upstream = httpRequest({ host: '127.0.0.1', port, method: req.method, path: req.url, headers: { ...req.headers, authorization: `Bearer ${token}` } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise((resolve) => proxy.listen(proxyPort, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => proxy.close(resolve)));

  const cli = join(work, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
  const failed = [];
  for (const scenario of SCENARIOS) {
    console.log(`\n== ${scenario}`);
    const outputDir = join(work, 'results', scenario);
    const code = await new Promise((resolve) => {
      const run = spawn(node24, [cli, 'server', '--url', `http://localhost:${proxyPort}/api/mcp`, '--scenario', scenario, '-o', outputDir], { stdio: 'inherit' });
      run.once('exit', (exitCode) => resolve(exitCode));
    });
    if (code !== 0) failed.push(scenario);
  }
  if (failed.length > 0) throw new Error(`MCP conformance scenarios failed: ${failed.join(', ')}`);
  console.log(`\nMCP conformance: ${SCENARIOS.join(', ')} passed`);
}

main()
  .then(cleanup, async (err) => {
    await cleanup();
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  });
