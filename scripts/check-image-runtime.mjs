#!/usr/bin/env node
// The image's runtime without Docker (the build machines have none): what the Dockerfile's build
// and runtime stages do, done here and run.
//
//   node scripts/check-image-runtime.mjs <node-24-binary>      (after `pnpm build`)
//
// 1. The build stage's `pnpm deploy` of image/ (DEPLOY_ARGS, the same command the Dockerfile
//    runs; test/image checks they agree), with Node 24 first on PATH and its headers as
//    npm_config_nodedir, as in the build stage: native addons are installed or compiled for it.
// 2. The runtime stage's /app: dist/ and the deployed node_modules, read-only.
// 3. The entry point as the image runs it: `node /app/main.mjs` on Node 24, NODE_ENV=production,
//    DATA_DIR on a writable folder, HOME that does not exist; as uid 1000 (the image's USER) when
//    this runs as root. It must get ready, sign in, create a workspace, serve /metrics, exit 0 on
//    SIGTERM, and (as uid 1000) write no file outside DATA_DIR and /tmp: the image runs with a
//    read-only root filesystem.
/* global fetch -- Node 18+ has it; the lint config lists only the globals the sources use. */
import { Buffer } from 'node:buffer';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUNDLE_ENV, BUNDLE_NODE_FLAGS } from './node-flags.mjs';

/** The build stage's deploy, as the Dockerfile writes it (its target folder last). */
export const DEPLOY_ARGS = ['--filter', '@planning/image-deps', '--config.inject-workspace-packages=true', 'deploy', '--prod', '--frozen-lockfile'];

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const IMAGE_UID = 1000;

function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Files owned by `uid` and changed after `marker` on the root filesystem, but under /tmp (a
 * tmpfs in the image, writable) and `skip` (DATA_DIR, the image's /data volume).
 */
function writtenBy(uid, marker, skip) {
  // find's status is not 0 when a folder cannot be read (a process's private tmp): what it printed still counts.
  const { stdout } = spawnSync('find', ['/', '-xdev', '-path', '/tmp', '-prune', '-o', '-user', String(uid), '-newer', marker, '-print'], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return [...new Set(String(stdout).split('\n'))].filter((path) => path && path !== skip && !path.startsWith(`${skip}/`));
}

async function main() {
  const node24 = process.argv[2] && resolve(process.argv[2]);
  if (!node24) {
    console.error('usage: node scripts/check-image-runtime.mjs <node-24-binary>');
    process.exit(2);
  }
  if (!existsSync(join(root, 'dist/main.mjs'))) throw new Error('dist/main.mjs is missing: run pnpm build first');
  const work = mkdtempSync(join(tmpdir(), 'image-runtime-'));
  let child;
  try {
    // 1. The build stage's deploy, on Node 24.
    const bin = join(work, 'bin');
    mkdirSync(bin);
    symlinkSync(node24, join(bin, 'node'));
    const deploy = join(work, 'deploy');
    const started = Date.now();
    execFileSync('pnpm', [...DEPLOY_ARGS, '--prefer-offline', deploy], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, npm_config_nodedir: dirname(dirname(node24)) },
    });
    console.log(`check-image-runtime: pnpm deploy on Node 24 in ${Math.round((Date.now() - started) / 1000)} s`);

    // 2. /app: the bundle and the deployed packages, read-only (the image's are root's, 0755/0644).
    const app = join(work, 'app');
    cpSync(join(root, 'dist'), app, { recursive: true });
    cpSync(join(deploy, 'node_modules'), join(app, 'node_modules'), { recursive: true, verbatimSymlinks: true });
    execFileSync('chmod', ['-R', 'a-w', app]);
    const data = join(work, 'data');
    mkdirSync(data);
    const asImageUser = process.getuid?.() === 0;
    if (asImageUser) {
      chownSync(data, IMAGE_UID, IMAGE_UID);
      chmodSync(work, 0o755);
    }

    // 3. The entry point as the image runs it.
    const [port, grpcPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    const password = `image-runtime-${Date.now()}`;
    const env = {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: '/nonexistent',
      NODE_ENV: 'production',
      ...BUNDLE_ENV,
      DATA_DIR: data,
      HOST: '127.0.0.1',
      GRPC_HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      METRICS_PORT: String(metricsPort),
      SERVICE_ADMIN_PASSWORD: password,
    };
    const marker = join(work, 'started');
    writeFileSync(marker, '');
    const command = asImageUser ? ['setpriv', `--reuid=${IMAGE_UID}`, `--regid=${IMAGE_UID}`, '--clear-groups', node24] : [node24];
    const output = [];
    child = spawn(command[0], [...command.slice(1), ...BUNDLE_NODE_FLAGS, join(app, 'main.mjs')], { cwd: '/', env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (c) => output.push(c));
    child.stderr.on('data', (c) => output.push(c));
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const base = `http://127.0.0.1:${port}`;
    const fail = (what) => {
      throw new Error(`${what}\n${Buffer.concat(output).toString('utf8').split('\n').slice(-30).join('\n')}`);
    };
    for (const deadline = Date.now() + 60_000; ; ) {
      if (child.exitCode !== null) fail(`the process exited during start (${child.exitCode})`);
      const ready = await fetch(`${base}/ready`).then((r) => r.ok, () => false);
      if (ready) break;
      if (Date.now() > deadline) fail('not ready after 60 s');
      await new Promise((r) => setTimeout(r, 250));
    }
    const login = await fetch(`${base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@example.com', password }),
    });
    if (login.status !== 200) fail(`sign-in answered ${login.status}`);
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
    const workspace = await fetch(`${base}/api/workspaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie },
      body: JSON.stringify({ name: 'Image runtime' }),
    });
    if (workspace.status !== 201) fail(`creating a workspace answered ${workspace.status}: ${await workspace.text()}`);
    const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text());
    if (!metrics.includes('http_server_request_duration')) fail('/metrics has no http_server_request_duration');
    child.kill('SIGTERM');
    const { code, signal } = await exited;
    if (code !== 0) fail(`SIGTERM: exit ${code ?? signal}, expected 0`);
    if (asImageUser) {
      const stray = writtenBy(IMAGE_UID, marker, data);
      if (stray.length > 0) fail(`wrote outside DATA_DIR and /tmp (the image's root filesystem is read-only): ${stray.slice(0, 10).join(', ')}`);
    }
    console.log(
      `check-image-runtime: Node ${execFileSync(node24, ['--version'], { encoding: 'utf8' }).trim()}, ${asImageUser ? `uid ${IMAGE_UID}` : 'this user (not root: no uid switch, no write scan)'}, ` +
        'read-only /app: ready, sign-in, a workspace, /metrics, exit 0 on SIGTERM' +
        (asImageUser ? ', nothing written outside DATA_DIR and /tmp' : ''),
    );
  } finally {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    execFileSync('chmod', ['-R', 'u+w', work]);
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err) => {
    console.error(`check-image-runtime: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
