import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { getFreePort } from '@planning/testing';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const ENTRY = join(ROOT, 'dist', 'main.mjs');

const live = new Set<ChildProcess>();
let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

/** One process of the entry point, with its output kept for assertions and debugging. */
export class ServiceProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<number | null> | undefined;
  readonly output: string[] = [];
  /** The process's METRICS_PORT (chosen at its first start, kept across restarts). */
  metricsPort: number | undefined;

  constructor(
    readonly name: string,
    readonly env: Record<string, string>,
    readonly httpPort: number,
    readonly args: string[] = [],
    /** Options for `node` itself, before the entry (e.g. `--import` of a probe). */
    readonly nodeArgs: string[] = [],
  ) {}

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  /** The running process's id (for RSS readings). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** `GET` this URL for the process's Prometheus metrics. */
  get metricsUrl(): string {
    return `http://127.0.0.1:${this.metricsPort ?? 0}/metrics`;
  }

  async start(options: { waitReady?: boolean; timeoutMs?: number } = {}): Promise<void> {
    hookExit();
    // Every process serves /metrics on a port of its own; processes of concurrent suites must not collide.
    this.metricsPort ??= Number(this.env.METRICS_PORT ?? (await getFreePort()));
    const child = spawn(process.execPath, ['--enable-source-maps', ...this.nodeArgs, ENTRY, ...this.args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', METRICS_PORT: String(this.metricsPort), ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    live.add(child);
    const collect = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) if (line) this.output.push(line);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code) => {
        live.delete(child);
        resolve(code);
      });
    });
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    const path = options.waitReady === false ? '/live' : '/ready';
    for (;;) {
      if (!this.running) {
        throw new Error(`${this.name} exited during start:\n${this.output.slice(-30).join('\n')}`);
      }
      try {
        const res = await fetch(`${this.baseUrl}${path}`);
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        throw new Error(`${this.name} not ${path} after start:\n${this.output.slice(-30).join('\n')}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Graceful stop (SIGTERM), or a crash (SIGKILL). Resolves with the exit code once gone. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (!this.child || !this.running) return this.child?.exitCode ?? null;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 20_000);
    const code = await this.exited;
    clearTimeout(timer);
    return code ?? null;
  }

  /** Resolves when the process exits by itself (e.g. a failpoint crash). */
  waitForExit(): Promise<number | null> {
    return this.exited ?? Promise.resolve(null);
  }
}
