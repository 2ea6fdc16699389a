import { describe, expect, it } from 'vitest';
import { modulesFor } from './modules.js';

describe('module registry: targets', () => {
  it('module registry: all turns on every service, the shared infrastructure and the demo data', () => {
    const modules = modulesFor('all');
    for (const name of ['gateway', 'issues', 'agents-claims', 'imports-exports', 'audit', 'metrics', 'bus', 'rpc-server', 'rpc-clients', 'http', 'demo']) {
      expect(modules).toContain(name);
    }
    expect(modules).toHaveLength(11);
    // The metrics endpoint starts first and stops last.
    expect(modules[0]).toBe('metrics');
    // The demo seeds through the services once the gateway has created the administrator.
    expect(modules.indexOf('demo')).toBeGreaterThan(modules.indexOf('gateway'));
    expect(modules.indexOf('demo')).toBeGreaterThan(modules.indexOf('issues'));
  });

  it.each([
    ['gateway', ['metrics', 'bus', 'rpc-server', 'rpc-clients', 'http', 'gateway']],
    ['issues', ['metrics', 'bus', 'rpc-server', 'rpc-clients', 'http', 'issues']],
    ['agents-claims', ['metrics', 'bus', 'rpc-server', 'rpc-clients', 'http', 'agents-claims']],
    ['imports-exports', ['metrics', 'bus', 'rpc-server', 'rpc-clients', 'http', 'imports-exports']],
    ['audit', ['metrics', 'bus', 'rpc-server', 'rpc-clients', 'http', 'audit']],
  ] as const)('module registry: --target=%s runs exactly its service and what it needs', (target, expected) => {
    expect([...modulesFor(target)].sort()).toEqual([...expected].sort());
  });

  it('module registry: every module starts after its dependencies', () => {
    const order = modulesFor('all');
    const before = (a: string, b: string) => order.indexOf(a) < order.indexOf(b);
    expect(before('bus', 'issues')).toBe(true);
    expect(before('rpc-server', 'rpc-clients')).toBe(true);
    expect(before('rpc-clients', 'gateway')).toBe(true);
    expect(before('http', 'gateway')).toBe(true);
    expect(before('rpc-server', 'audit')).toBe(true);
  });

  it('module registry: a single-service target never starts another service', () => {
    for (const target of ['issues', 'audit', 'gateway'] as const) {
      const services = modulesFor(target).filter((m) =>
        ['gateway', 'issues', 'agents-claims', 'imports-exports', 'audit'].includes(m),
      );
      expect(services).toEqual([target]);
    }
  });
});
