import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/** Where Debian puts the server binaries, in case they are not on PATH (e.g. /usr/sbin for nats-server). */
const EXTRA_DIRS = ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/sbin'];

/**
 * Finds an executable by name on PATH (and in the usual system directories). Throws an error that
 * names the missing binary and how to install it.
 */
export function findBinary(name: string, debianPackage = name): string {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), ...EXTRA_DIRS];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(
    `The test setup needs the '${name}' binary, which was not found on PATH or in ${EXTRA_DIRS.join(', ')}. ` +
      `Install it (Debian/Ubuntu: apt-get install -y ${debianPackage}) or run .ci/run, which installs it.`,
  );
}

/** Is the binary present? (for reporting, never for skipping suites) */
export function hasBinary(name: string): boolean {
  try {
    findBinary(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * A TCP port that is free on 127.0.0.1, for a server a test starts a moment later.
 *
 * Ports come from below the kernel's ephemeral range when it leaves room (Linux: 32768+): a port
 * the OS hands out for `listen(0)` is in that range, and between our probe and the server's bind
 * an outgoing connection could take it as its local port (seen: EADDRINUSE on a busy machine).
 * Below the range nothing takes a port unasked. A port is never handed out twice per process, nor
 * to two test processes at once (reservePort): two workers, or two checkouts testing on one
 * machine, each probing a port free and then both starting a server on it a moment later, would
 * have one suite talk to the other's server.
 */
export async function getFreePort(): Promise<number> {
  const range = portRangeBelowEphemeral();
  if (range) {
    for (let attempt = 0; attempt < 200; attempt++) {
      const port = range.low + Math.floor(Math.random() * (range.high - range.low + 1));
      if (handedOut.has(port)) continue;
      if (!reservePort(port)) continue;
      if (await canBind(port)) {
        handedOut.add(port);
        return port;
      }
      releasePort(port);
    }
  }
  for (;;) {
    const port = await bindAny();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

const handedOut = new Set<number>();

/** Where test processes on this machine reserve ports: a file per port, holding the owner's pid. */
export const PORT_RESERVATIONS = join(tmpdir(), 'planning-test-ports');
const reserved = new Set<number>();
let swept = false;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function ownerOf(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8'));
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Reserves `port` for this process until it exits, unless another live process holds it.
 * Reservations left by processes that died are cleared the first time a process reserves one.
 */
export function reservePort(port: number, dir = PORT_RESERVATIONS): boolean {
  mkdirSync(dir, { recursive: true });
  if (!swept && dir === PORT_RESERVATIONS) {
    swept = true;
    for (const name of readdirSync(dir)) {
      const owner = ownerOf(join(dir, name));
      if (owner !== undefined && !alive(owner)) {
        try {
          unlinkSync(join(dir, name));
        } catch {
          // another process cleared it
        }
      }
    }
    process.once('exit', () => {
      for (const p of reserved) releasePort(p);
    });
  }
  try {
    writeFileSync(join(dir, String(port)), String(process.pid), { flag: 'wx' });
  } catch {
    return false;
  }
  if (dir === PORT_RESERVATIONS) reserved.add(port);
  return true;
}

function releasePort(port: number, dir = PORT_RESERVATIONS): void {
  reserved.delete(port);
  const file = join(dir, String(port));
  if (ownerOf(file) !== process.pid) return;
  try {
    unlinkSync(file);
  } catch {
    // gone already
  }
}

function portRangeBelowEphemeral(): { low: number; high: number } | undefined {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low !== undefined && Number.isInteger(low) && low > 12_000) return { low: 10_000, high: low - 1 };
  } catch {
    // not Linux, or no procfs: the kernel's choice
  }
  return undefined;
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function bindAny(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not determine a free port'));
        return;
      }
      const port = address.port;
      server.close(() => resolve(port));
    });
  });
}

/** Runs a binary with `--version`-style args and returns its output (for diagnostics in test logs). */
export function binaryVersion(path: string, args: string[]): string {
  const result = spawnSync(path, args, { encoding: 'utf8' });
  return `${result.stdout ?? ''}${result.stderr ?? ''}`.trim();
}

/** Polls `check` until it resolves true or the timeout passes. */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
}
