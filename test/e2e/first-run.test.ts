import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { getFreePort } from '@planning/testing';
import { describe, expect, it } from 'vitest';
import { ENTRY, ROOT } from '../support/service-process.js';

/**
 * What a person sees on the first run, through the real entry point: Ctrl-C on `pnpm start` (a
 * SIGINT to the whole process group, as a terminal sends it) ends with status 0 and no package
 * manager noise; a port in use names the variable to change; a terminal gets the banner, a pipe
 * only JSON lines.
 */

interface Run {
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  pid: number;
}

function start(command: string, args: string[], env: Record<string, string>): Run {
  const chunks: Buffer[] = [];
  const child = spawn(command, args, {
    cwd: ROOT,
    // Its own process group, so the test can signal the group as a terminal does.
    detached: true,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', SERVICE_DEMO: '0', DATA_DIR: ':memory:', SERVICE_ADMIN_PASSWORD: 'first-run-password-1', HOST: '127.0.0.1', GRPC_HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (c: Buffer) => chunks.push(c));
  child.stderr.on('data', (c: Buffer) => chunks.push(c));
  return {
    pid: child.pid!,
    output: () => Buffer.concat(chunks).toString('utf8'),
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
  };
}

async function waitLive(port: number, run: Run, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/live`)).ok) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`not live:\n${run.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function hold(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

describe('first run', () => {
  it('first run: Ctrl-C on `pnpm start` exits 0 without ELIFECYCLE', async () => {
    const [port, grpcPort] = [await getFreePort(), await getFreePort()];
    const run = start('pnpm', ['start'], { PORT: String(port), GRPC_PORT: String(grpcPort) });
    try {
      await waitLive(port, run, 90_000);
      process.kill(-run.pid, 'SIGINT');
      const { code, signal } = await run.exited;
      expect({ code, signal }, run.output().split('\n').map((l) => l.slice(0, 120)).join('\n')).toEqual({ code: 0, signal: null });
      expect(run.output()).not.toContain('ELIFECYCLE');
      expect(run.output()).toContain('"msg":"stopped"');
    } finally {
      try {
        process.kill(-run.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }, 120_000);

  it('first run: Ctrl-C while it is still starting exits 0, not "start failed"', async () => {
    const [port, grpcPort] = [await getFreePort(), await getFreePort()];
    const run = start(process.execPath, [ENTRY], { PORT: String(port), GRPC_PORT: String(grpcPort) });
    try {
      // The HTTP port opens before the gateway has finished starting (the admin account is
      // still being created): the signal lands in the middle of the start.
      const deadline = Date.now() + 60_000;
      while (!run.output().includes('"msg":"http listening"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      process.kill(-run.pid, 'SIGINT');
      const { code } = await run.exited;
      expect(code, run.output().split('\n').filter((l) => !l.includes('"level":"info"')).map((l) => l.slice(0, 160)).join('\n')).toBe(0);
      // Nothing reads as a failure; when the signal did land mid-start, the log says it was interrupted.
      expect(run.output()).not.toContain('"msg":"start failed"');
      expect(run.output()).not.toContain('"level":"error"');
    } finally {
      try {
        process.kill(-run.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }, 90_000);

  it('first run: a port in use names the variable to change (PORT, GRPC_PORT)', async () => {
    for (const variable of ['PORT', 'GRPC_PORT'] as const) {
      const [port, grpcPort] = [await getFreePort(), await getFreePort()];
      const taken = await hold(variable === 'PORT' ? port : grpcPort);
      try {
        const run = start(process.execPath, [ENTRY], { PORT: String(port), GRPC_PORT: String(grpcPort) });
        const { code } = await run.exited;
        expect(code).toBe(1);
        const busy = variable === 'PORT' ? port : grpcPort;
        expect(run.output()).toContain(`port ${busy} is already in use by another process. Stop it, or set ${variable} to a free port`);
      } finally {
        taken.close();
      }
    }
  }, 90_000);

  it('first run: on a terminal the banner says where everything is; through a pipe only JSON lines', async () => {
    const [port, grpcPort] = [await getFreePort(), await getFreePort()];
    const env = { PORT: String(port), GRPC_PORT: String(grpcPort) };
    // `script` gives the process a pseudo-terminal, as a shell in a terminal does.
    const tty = start('script', ['-qefc', `${process.execPath} ${ENTRY}`, '/dev/null'], env);
    try {
      await waitLive(port, tty, 60_000);
      const deadline = Date.now() + 10_000;
      while (!tty.output().includes('Stop ') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const text = tty.output();
      expect(text).toContain(`http://127.0.0.1:${port}/docs`);
      expect(text).toContain(`http://127.0.0.1:${port}/api/mcp`);
      expect(text).toContain('admin@example.com with the password in SERVICE_ADMIN_PASSWORD');
      expect(text).toMatch(/Data\s+in memory/);
      // Info lines are left to the banner on a terminal.
      expect(text).not.toContain('"level":"info"');
    } finally {
      process.kill(-tty.pid, 'SIGINT');
      await tty.exited;
    }

    const piped = start(process.execPath, [ENTRY], env);
    try {
      await waitLive(port, piped, 60_000);
      const lines = piped.output().trim().split('\n');
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
      expect(piped.output()).not.toContain('Planning service is running');
    } finally {
      process.kill(-piped.pid, 'SIGINT');
      expect((await piped.exited).code).toBe(0);
    }
  }, 150_000);
});
