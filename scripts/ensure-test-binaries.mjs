#!/usr/bin/env node
// The test suites start their own nats-server and redis-server on random ports. On a fresh
// Debian/Ubuntu machine this installs the two packages when they are missing (as root, or with
// passwordless sudo); anywhere else it says exactly what to install.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

const wanted = [
  { binary: 'nats-server', pkg: 'nats-server' },
  { binary: 'redis-server', pkg: 'redis-server' },
];
const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/bin', '/usr/local/bin'];
const has = (binary) => dirs.some((d) => d && existsSync(join(d, binary)));
const missing = wanted.filter((w) => !has(w.binary));
if (missing.length === 0) process.exit(0);

const packages = missing.map((m) => m.pkg);
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const hasApt = has('apt-get');
const sudoOk = !isRoot && has('sudo') && spawnSync('sudo', ['-n', 'true']).status === 0;
if (hasApt && (isRoot || sudoOk)) {
  const prefix = isRoot ? [] : ['sudo', '-n'];
  const run = (args) => {
    const [cmd, ...rest] = [...prefix, ...args];
    execFileSync(cmd, rest, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  };
  console.error(`Installing ${packages.join(', ')} for the test suites (Debian packages)...`);
  run(['apt-get', 'update', '-qq']);
  run(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...packages]);
  const still = missing.filter((w) => !has(w.binary));
  if (still.length === 0) process.exit(0);
  console.error(`Still missing after install: ${still.map((s) => s.binary).join(', ')}`);
  process.exit(1);
}
console.error(
  `The test suites need ${missing.map((m) => `'${m.binary}'`).join(' and ')} on PATH.\n` +
    `Install ${packages.join(' ')} (Debian/Ubuntu: sudo apt-get install -y ${packages.join(' ')}; macOS: brew install nats-server redis).`,
);
process.exit(1);
