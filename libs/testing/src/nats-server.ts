import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBinary, getFreePort, waitFor } from './binaries.js';

export interface NatsServerOptions {
  /** Start with JetStream enabled (`-js`, file store in a temp dir). Default true. */
  jetstream?: boolean;
  /** How long to wait for the server to accept connections. Default 15 s. */
  startTimeoutMs?: number;
}

export interface NatsServerHandle {
  /** `nats://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** JetStream store directory (a temp dir, removed by `stop()`). */
  storeDir: string;
  /** Kills the server and removes the store directory. Safe to call twice. */
  stop(): Promise<void>;
  /** Stops the server and starts it again on the same port and store dir (streams persist). */
  restart(): Promise<void>;
}

/** A running nats-server: the supervising shell and the server's own pid. */
interface Running {
  shell: ChildProcess;
  serverPid: Promise<number | undefined>;
  /** Set once the server pid has been read, for the synchronous exit hook. */
  knownPid?: number;
}

/**
 * Servers still running, killed synchronously when the test process exits so a failed or
 * aborted test leaves no nats-server behind.
 */
const live = new Set<Running>();
/** Store directories not yet removed, removed on exit too. */
const storeDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const running of live) {
      if (running.knownPid !== undefined) {
        try {
          process.kill(running.knownPid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      running.shell.kill('SIGKILL');
    }
    for (const dir of storeDirs) {
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // best effort on the way out
      }
    }
  });
}

/**
 * The server runs under a small shell that holds our stdin pipe: when this process dies in any
 * way (even SIGKILL, which runs no exit hook) the pipe closes and the shell stops the server.
 * Background jobs of a non-interactive shell read /dev/null, so the pipe is kept on fd 3 for `cat`.
 */
const SUPERVISOR =
  'exec 3<&0; "$0" "$@" 3<&- & pid=$!; echo $pid; (cat <&3 >/dev/null; kill -TERM $pid 2>/dev/null) & exec 3<&-; wait $pid';

function launchServer(binary: string, args: string[]): Running {
  const shell = spawn('/bin/sh', ['-c', SUPERVISOR, binary, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const running: Running = { shell, serverPid: Promise.resolve(undefined) };
  running.serverPid = new Promise((resolve) => {
    let out = '';
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      const lines = out.split('\n');
      if (lines.length < 2) return;
      shell.stdout?.off('data', onData);
      shell.stdout?.resume();
      const pid = Number(lines[0]);
      running.knownPid = Number.isInteger(pid) && pid > 0 ? pid : undefined;
      resolve(running.knownPid);
    };
    shell.stdout?.on('data', onData);
    shell.once('exit', () => resolve(running.knownPid));
  });
  live.add(running);
  shell.once('exit', () => live.delete(running));
  return running;
}

/**
 * Reads the INFO line a NATS server sends on connect. Resolves true once the server answers (and,
 * when JetStream is wanted, advertises it), false when it does not yet.
 */
function probe(port: number, wantJetStream: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: '127.0.0.1', port });
    let buffer = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      const end = buffer.indexOf('\r\n');
      if (end === -1) return;
      const line = buffer.slice(0, end);
      if (!line.startsWith('INFO ')) return done(false);
      try {
        const info = JSON.parse(line.slice(5)) as { jetstream?: boolean };
        done(!wantJetStream || info.jetstream === true);
      } catch {
        done(false);
      }
    });
  });
}

/** Starts a private nats-server on a random port (never the machine's standard 4222). */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerHandle> {
  const jetstream = options.jetstream ?? true;
  const startTimeoutMs = options.startTimeoutMs ?? 15_000;
  const binary = findBinary('nats-server');
  const port = await getFreePort();
  const storeDir = await mkdtemp(join(tmpdir(), 'nats-js-'));
  storeDirs.add(storeDir);
  installExitHook();
  const removeStoreDir = async (): Promise<void> => {
    await rm(storeDir, { recursive: true, force: true });
    storeDirs.delete(storeDir);
  };

  let running: Running | undefined;
  let stopped = false;

  const launch = async (): Promise<void> => {
    const args = ['-a', '127.0.0.1', '-p', String(port)];
    if (jetstream) args.push('-js', '-sd', storeDir);
    const current = launchServer(binary, args);
    running = current;
    // Keep the tail of the log for the error message if the server dies on start.
    let log = '';
    current.shell.stderr?.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString('utf8')).slice(-4000);
    });
    let exited = false;
    current.shell.once('exit', () => {
      exited = true;
    });
    try {
      // An early exit ends the wait at once rather than after the whole timeout.
      await waitFor(async () => exited || (await probe(port, jetstream)), startTimeoutMs, `nats-server on port ${port}`);
      if (exited) throw new Error(`nats-server exited during start:\n${log}`);
    } catch (err) {
      await kill(current);
      throw err;
    }
  };

  const shutdown = async (): Promise<void> => {
    const current = running;
    running = undefined;
    if (current) await kill(current);
  };

  try {
    await launch();
  } catch (err) {
    await removeStoreDir();
    throw err;
  }

  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    async stop() {
      if (stopped) return;
      stopped = true;
      await shutdown();
      await removeStoreDir();
    },
    async restart() {
      if (stopped) throw new Error('nats-server fixture was stopped');
      await shutdown();
      await launch();
    },
  };
}

/**
 * Closing the supervisor's stdin makes it send SIGTERM (a clean JetStream shutdown); SIGKILL
 * follows if the server has not exited after a few seconds.
 */
async function kill(running: Running): Promise<void> {
  const { shell } = running;
  if (shell.exitCode !== null || shell.signalCode !== null) {
    // The server is gone; closing stdin also ends the supervisor's waiting `cat`.
    shell.stdin?.end();
    live.delete(running);
    return;
  }
  const exited = new Promise<void>((resolve) => shell.once('exit', () => resolve()));
  const serverPid = await running.serverPid;
  shell.stdin?.end();
  const timer = setTimeout(() => {
    if (serverPid !== undefined) {
      try {
        process.kill(serverPid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    shell.kill('SIGKILL');
  }, 5000);
  await exited;
  clearTimeout(timer);
  live.delete(running);
}
