import { spawn, type ChildProcess } from 'node:child_process';
import { connect as tcpConnect } from 'node:net';
import { findBinary, getFreePort, waitFor } from './binaries.js';

export interface RedisServerOptions {
  /** How long to wait for the server to answer PING. Default 10 s. */
  startTimeoutMs?: number;
}

export interface RedisServerHandle {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** Kills the server (its data is gone: no persistence). Safe to call twice. */
  stop(): Promise<void>;
  /** Starts the server again on the same port after `stop()` (empty: nothing was persisted). */
  start(): Promise<void>;
}

/**
 * Children still running, killed synchronously when the test process exits so a failed or
 * aborted test leaves no redis-server behind.
 */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

/**
 * Sends an inline PING over plain TCP (no client library in the testing lib) and resolves true
 * once the answer is `+PONG`. A loading server answers `-LOADING`, which counts as not yet.
 */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: '127.0.0.1', port });
    let buffer = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      if (buffer.includes('\r\n')) done(buffer.startsWith('+PONG'));
    });
  });
}

/**
 * Starts a private, non-persistent redis-server on a random port of 127.0.0.1 (never the
 * machine's standard 6379). The binary comes from `findBinary('redis-server')`, which throws an
 * error naming it when it is missing.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServerHandle> {
  const startTimeoutMs = options.startTimeoutMs ?? 10_000;
  const binary = findBinary('redis-server');
  installExitHook();

  let child: ChildProcess | undefined;

  const launch = async (port: number): Promise<void> => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    live.add(proc);
    // Keep the tail of the log for the error message if the server dies on start.
    let log = '';
    const keep = (chunk: Buffer): void => {
      log = (log + chunk.toString('utf8')).slice(-4000);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    const exited = new Promise<never>((_, reject) => {
      proc.once('exit', (code, signal) => {
        live.delete(proc);
        reject(new Error(`redis-server on port ${port} exited during start (${signal ?? code}):\n${log}`));
      });
    });
    try {
      await Promise.race([waitFor(() => ping(port), startTimeoutMs, `redis-server on port ${port}`), exited]);
    } catch (err) {
      await kill(proc);
      if (child === proc) child = undefined;
      throw err;
    } finally {
      // The race is settled; a later (expected) exit must not surface as an unhandled rejection.
      exited.catch(() => {});
    }
  };

  // getFreePort can lose a race with another process for the port; a fresh port is fine on the
  // first start, not on a restart (the URL is already handed out).
  let port = await getFreePort();
  for (let attempt = 1; ; attempt++) {
    try {
      await launch(port);
      break;
    } catch (err) {
      if (attempt >= 3) throw err;
      port = await getFreePort();
    }
  }

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      const proc = child;
      child = undefined;
      if (proc) await kill(proc);
    },
    async start() {
      if (child) return;
      await launch(port);
    },
  };
}

/** SIGTERM, then SIGKILL if it has not exited after a few seconds. */
async function kill(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) {
    live.delete(proc);
    return;
  }
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    proc.once('exit', () => {
      clearTimeout(timer);
      live.delete(proc);
      resolve();
    });
    proc.kill('SIGTERM');
  });
}
