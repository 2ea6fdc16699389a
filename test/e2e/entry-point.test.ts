import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ENTRY, ROOT } from '../support/service-process.js';

function runEntry(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [ENTRY, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('entry point: configuration', () => {
  it('entry point: --print-config shows the resolved configuration with every secret hidden', () => {
    const secrets = {
      SERVICE_ADMIN_PASSWORD: 'canary-admin-password-1234',
      SERVICE_INTERNAL_SECRET: 'canary-internal-secret-0123456789abcdef',
      REDIS_URL: 'redis://:canary-redis-pw@127.0.0.1:6379',
      MONGODB_URI: 'mongodb://user:canary-mongo-pw@127.0.0.1:27017/?replicaSet=rs0',
    };
    const { status, stdout } = runEntry(['--print-config'], { ...secrets, PORT: '9999' });
    expect(status).toBe(0);
    const printed = JSON.parse(stdout);
    expect(printed.target).toBe('all');
    expect(printed.modules).toContain('gateway');
    expect(printed.process.PORT).toBe(9999);
    expect(printed.process.SERVICE_INTERNAL_SECRET).toBe('[hidden]');
    expect(printed.process.REDIS_URL).toBe('[hidden]');
    expect(printed.settings.gateway.SERVICE_ADMIN_PASSWORD).toBe('[hidden]');
    for (const value of ['canary-admin-password-1234', 'canary-internal-secret', 'canary-redis-pw', 'canary-mongo-pw']) {
      expect(stdout).not.toContain(value);
    }
  });

  it('entry point: --target picks the modules; a single-service target prints its own', () => {
    const { status, stdout } = runEntry(['--target=issues', '--print-config'], {
      NATS_URL: 'nats://127.0.0.1:4222',
      SERVICE_INTERNAL_SECRET: 'x'.repeat(32),
      // A service process needs a database or an explicit embedded store, and its peers' addresses.
      DATA_DIR: ':memory:',
      AGENTS_CLAIMS_GRPC_URL: '127.0.0.1:50052',
    });
    expect(status).toBe(0);
    const printed = JSON.parse(stdout);
    expect(printed.target).toBe('issues');
    expect(printed.modules).toContain('issues');
    expect(printed.modules).not.toContain('gateway');
  });

  it('entry point: every configuration problem is reported at once, with exit status 2', () => {
    const { status, stderr } = runEntry(['--target=gateway'], { PORT: 'eighty', LOG_LEVEL: 'loud' });
    expect(status).toBe(2);
    for (const variable of ['PORT', 'LOG_LEVEL']) expect(stderr).toContain(variable);
    const second = runEntry(['--target=gateway'], {});
    expect(second.status).toBe(2);
    for (const variable of ['NATS_URL', 'SERVICE_INTERNAL_SECRET', 'ISSUES_GRPC_URL', 'AUDIT_GRPC_URL']) {
      expect(second.stderr).toContain(variable);
    }
    expect(second.stderr).toMatch(/in-process event bus cannot span processes/);
  });

  it('entry point: an unknown flag or target is refused', () => {
    const typo = runEntry(['--targte=all']);
    expect(typo.status).toBe(2);
    expect(typo.stderr).toMatch(/Unknown option '--targte'/);
    const bad = runEntry(['--target=everything']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--target');
  });
});
