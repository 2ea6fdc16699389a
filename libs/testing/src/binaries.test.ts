import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { getFreePort, PORT_RESERVATIONS, reservePort } from './binaries.js';

describe('test ports', () => {
  const dir = mkdtempSync(join(tmpdir(), 'port-reservations-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ports: a port another live process reserved is not handed out; a free one is reserved for this process', () => {
    writeFileSync(join(dir, '20001'), String(process.ppid));
    expect(reservePort(20001, dir)).toBe(false);
    expect(reservePort(20002, dir)).toBe(true);
    expect(readFileSync(join(dir, '20002'), 'utf8')).toBe(String(process.pid));
    expect(reservePort(20002, dir)).toBe(false);
  });

  it('ports: getFreePort reserves what it hands out, machine-wide, and never the same port twice', async () => {
    const ports = await Promise.all(Array.from({ length: 20 }, () => getFreePort()));
    expect(new Set(ports).size).toBe(20);
    for (const port of ports) {
      if (port >= 10_000 && port < 32_768) expect(readFileSync(join(PORT_RESERVATIONS, String(port)), 'utf8')).toBe(String(process.pid));
    }
  });

  it('ports: reservations of a process that ended are cleared when it exits', () => {
    const script = `import { getFreePort, PORT_RESERVATIONS } from ${JSON.stringify(new URL('./binaries.ts', import.meta.url).pathname)};
      const port = await getFreePort(); console.log(port);`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(child.status, child.stderr).toBe(0);
    const port = Number(child.stdout.trim());
    expect(port).toBeGreaterThan(0);
    expect(existsSync(join(PORT_RESERVATIONS, String(port)))).toBe(false);
  });
});
