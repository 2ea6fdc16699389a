import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHttpApp } from './http.js';
import { defaultDataDir, type ProcessConfig } from './process-config.js';
import { loadProcessConfig } from './process-env.js';
import { loadModuleSettings } from './module-settings.js';
import { lazyModule, resolveModules, type ModuleDefinition, type RuntimeLogger } from './registry.js';
import { createRuntime } from './runtime.js';
import { openServiceStore } from './infra.js';
import { configureFailpoints, failpoint, FailpointError } from './failpoints.js';
import { env } from '@planning/config';
import { createLogger } from '@planning/telemetry';

const quiet: RuntimeLogger = {
  info() {},
  warn() {},
  error() {},
  debug() {},
  child() {
    return quiet;
  },
};

function config(): ProcessConfig {
  const loaded = loadProcessConfig({});
  if (!loaded.ok) throw new Error('default config should load');
  return loaded.value;
}

function recorder() {
  const calls: string[] = [];
  const mod = (name: string, deps: string[] = [], extra: Partial<ModuleDefinition> = {}): ModuleDefinition => ({
    name,
    deps,
    async init() {
      calls.push(`init ${name}`);
      return {
        exports: { name },
        async start() {
          calls.push(`start ${name}`);
        },
        async drain() {
          calls.push(`drain ${name}`);
        },
        async stop() {
          calls.push(`stop ${name}`);
        },
      };
    },
    ...extra,
  });
  return { calls, mod };
}

describe('module registry: resolve', () => {
  it('module registry: dependencies come first and unrequested modules stay off', () => {
    const { mod } = recorder();
    const defs = [mod('a'), mod('b', ['a']), mod('c', ['b']), mod('unused')];
    expect(resolveModules(defs, ['c'])).toEqual(['a', 'b', 'c']);
  });

  it('module registry: cycles and unknown modules are refused with the path', () => {
    const { mod } = recorder();
    expect(() => resolveModules([mod('a', ['b']), mod('b', ['a'])], ['a'])).toThrow(/cycle: a -> b -> a/);
    expect(() => resolveModules([mod('a', ['ghost'])], ['a'])).toThrow(/unknown module 'ghost' \(needed by a\)/);
  });
});

describe('runtime: lifecycle', () => {
  it('runtime: init and start in dependency order, drain then stop in reverse', async () => {
    const { calls, mod } = recorder();
    const runtime = createRuntime({
      definitions: [mod('a'), mod('b', ['a'])],
      target: 'test',
      roots: ['b'],
      config: config(),
      settings: new Map(),
      logger: quiet,
    });
    await runtime.start();
    expect(runtime.view.status()).toEqual([
      { name: 'a', state: 'running' },
      { name: 'b', state: 'running' },
    ]);
    await runtime.shutdown();
    expect(calls).toEqual(['init a', 'init b', 'start a', 'start b', 'drain b', 'drain a', 'stop b', 'stop a']);
  });

  it('runtime: a lazy module loads its implementation when a runtime initialises it, not to resolve or read settings', async () => {
    const { calls, mod } = recorder();
    let loads = 0;
    const lazy = lazyModule<{ LAZY_LIMIT: number }, { limit: number }>(
      { name: 'lazy', deps: ['a'], settings: { LAZY_LIMIT: env.int(1, 10).default(3) } },
      async () => {
        loads += 1;
        return {
          async init(ctx) {
            calls.push(`init lazy ${ctx.get<{ name: string }>('a').name} ${ctx.settings.LAZY_LIMIT}`);
            return { exports: { limit: ctx.settings.LAZY_LIMIT } };
          },
        };
      },
    );
    const definitions = [mod('a'), lazy];
    expect(resolveModules(definitions, ['lazy'])).toEqual(['a', 'lazy']);
    const settings = loadModuleSettings(definitions, ['a', 'lazy'], config(), { LAZY_LIMIT: '7' });
    expect(settings.ok).toBe(true);
    expect(loadModuleSettings(definitions, ['lazy'], config(), { LAZY_LIMIT: '70' }).ok).toBe(false);
    expect(loads).toBe(0);
    const runtime = createRuntime({ definitions, target: 'test', roots: ['lazy'], config: config(), settings: settings.ok ? settings.settings : new Map(), logger: quiet });
    await runtime.start();
    expect(loads).toBe(1);
    expect(calls).toEqual(['init a', 'init lazy a 7', 'start a']);
    await runtime.shutdown();
  });

  it('runtime: a module may only reach its declared dependencies', async () => {
    const { mod } = recorder();
    let seen: unknown;
    const peeker: ModuleDefinition = {
      name: 'peeker',
      deps: ['a'],
      async init(ctx) {
        seen = ctx.get('a');
        expect(() => ctx.get('b')).toThrow(/not among its deps/);
        return {};
      },
    };
    const runtime = createRuntime({
      definitions: [mod('a'), mod('b'), peeker],
      target: 'test',
      roots: ['peeker', 'b'],
      config: config(),
      settings: new Map(),
      logger: quiet,
    });
    await runtime.start();
    expect(seen).toEqual({ name: 'a' });
    await runtime.shutdown();
  });

  it('runtime: a failing start stops what already started', async () => {
    const { calls, mod } = recorder();
    const broken: ModuleDefinition = {
      name: 'broken',
      deps: ['a'],
      async init() {
        return {
          async start() {
            throw new Error('cannot bind');
          },
        };
      },
    };
    const runtime = createRuntime({
      definitions: [mod('a'), broken],
      target: 'test',
      roots: ['broken'],
      config: config(),
      settings: new Map(),
      logger: quiet,
    });
    await expect(runtime.start()).rejects.toThrow('cannot bind');
    expect(calls).toContain('stop a');
  });

  it('runtime: /ready lists modules not running, turns 503 while draining, and /live stays up', async () => {
    let release!: () => void;
    const slow: ModuleDefinition = {
      name: 'slow',
      deps: [],
      async init() {
        return {
          start: () => new Promise<void>((resolve) => (release = resolve)),
          ready: () => ({ ok: true, details: { backend: 'fine' } }),
        };
      },
    };
    const runtime = createRuntime({
      definitions: [slow],
      target: 'test',
      roots: ['slow'],
      config: config(),
      settings: new Map(),
      logger: quiet,
    });
    const app = createHttpApp({ runtime: runtime.view });
    const starting = runtime.start();
    await new Promise((r) => setTimeout(r, 10));
    const during = await app.inject({ method: 'GET', url: '/ready' });
    expect(during.statusCode).toBe(503);
    expect(during.json().data).toMatchObject({ status: 'not-ready', notRunning: ['slow'] });
    release();
    await starting;
    const ready = await app.inject({ method: 'GET', url: '/ready' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json().data).toMatchObject({ status: 'ready', details: { slow: { backend: 'fine' } } });
    const shutdown = runtime.shutdown(200);
    const draining = await app.inject({ method: 'GET', url: '/ready' });
    expect(draining.statusCode).toBe(503);
    expect(draining.json().data.status).toBe('draining');
    expect((await app.inject({ method: 'GET', url: '/live' })).statusCode).toBe(200);
    await shutdown;
    await app.close();
  });

  it('runtime: a module whose backend fails its check makes the process not ready', async () => {
    const flaky: ModuleDefinition = {
      name: 'flaky',
      deps: [],
      async init() {
        return { ready: () => ({ ok: false, details: { error: 'connection refused' } }) };
      },
    };
    const runtime = createRuntime({
      definitions: [flaky],
      target: 'test',
      roots: ['flaky'],
      config: config(),
      settings: new Map(),
      logger: quiet,
    });
    await runtime.start();
    const report = await runtime.view.ready();
    expect(report).toMatchObject({ ok: false, notRunning: ['flaky'], details: { flaky: { error: 'connection refused' } } });
    await runtime.shutdown();
  });
});

describe('service stores', () => {
  it("a service's store reports failed housekeeping to the service's log as a warning, with the service named", async () => {
    const lines: { level: string; details: Record<string, unknown>; message: string }[] = [];
    const logger = {
      info: (details: Record<string, unknown>, message: string) => lines.push({ level: 'info', details, message }),
      warn: (details: Record<string, unknown>, message: string) => lines.push({ level: 'warn', details, message }),
    };
    const store = await openServiceStore({ ...config(), dataDir: ':memory:' }, 'issues', logger);
    try {
      await store.withTransaction(async (session) => store.collection('c').insertOne({ _id: 'a' }, { session }), {
        onCommitted: () => {
          throw new Error('callback failed');
        },
      });
    } finally {
      await store.close();
    }
    expect(lines).toEqual([{ level: 'warn', details: { service: 'issues', error: 'callback failed' }, message: 'an onCommitted callback threw' }]);
  });
});

describe('configuration: process', () => {
  it('configuration: all-in-one runs on embedded defaults with nothing set', () => {
    const loaded = loadProcessConfig({});
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(loaded.value).toMatchObject({ target: 'all', PORT: 8080, shutdownDelayMs: 0 });
    expect(loaded.value.NATS_URL).toBeUndefined();
    expect(loaded.value.internalSecret).toHaveLength(64);
  });

  it('configuration: a single-service target without NATS, secret or peers is refused, every problem at once', () => {
    const loaded = loadProcessConfig({}, 'gateway');
    expect(loaded.ok).toBe(false);
    if (loaded.ok) return;
    expect(loaded.problems.map((p) => p.variable).sort()).toEqual([
      'AGENTS_CLAIMS_GRPC_URL',
      'AUDIT_GRPC_URL',
      'IMPORTS_EXPORTS_GRPC_URL',
      'ISSUES_GRPC_URL',
      'MONGODB_URI',
      'NATS_URL',
      'SERVICE_INTERNAL_SECRET',
    ]);
    expect(loaded.problems.find((p) => p.variable === 'NATS_URL')?.message).toMatch(/in-process event bus cannot span processes/);
    expect(loaded.problems.find((p) => p.variable === 'MONGODB_URI')?.message).toMatch(/DATA_DIR=:memory:/);
  });

  it('configuration: the issues target needs agents-claims (the fence of agent writes) and nothing else', () => {
    const base = { NATS_URL: 'nats://127.0.0.1:4222', SERVICE_INTERNAL_SECRET: 'x'.repeat(32), MONGODB_URI: 'mongodb://127.0.0.1:27017' };
    const without = loadProcessConfig(base, 'issues');
    expect(without.ok).toBe(false);
    expect(without.ok ? [] : without.problems.map((p) => p.variable)).toEqual(['AGENTS_CLAIMS_GRPC_URL']);
    const loaded = loadProcessConfig({ ...base, AGENTS_CLAIMS_GRPC_URL: '127.0.0.1:50052' }, 'issues');
    expect(loaded.ok && loaded.value.peers).toEqual({ 'agents-claims': '127.0.0.1:50052' });
  });

  it('configuration: a single-service target runs on the embedded store only when DATA_DIR says so', () => {
    const base = { NATS_URL: 'nats://127.0.0.1:4222', SERVICE_INTERNAL_SECRET: 'x'.repeat(32), AGENTS_CLAIMS_GRPC_URL: '127.0.0.1:50052' };
    const memory = loadProcessConfig({ ...base, DATA_DIR: ':memory:' }, 'issues');
    expect(memory.ok && memory.value.dataDir).toBe(':memory:');
    const files = loadProcessConfig({ ...base, DATA_DIR: 'relative/dir' }, 'issues');
    expect(files.ok && files.value.dataDir).toBe(path.resolve('relative/dir'));
    const mongo = loadProcessConfig({ ...base, MONGODB_URI: 'mongodb://127.0.0.1:27017', DATA_DIR: '/ignored' }, 'issues');
    expect(mongo.ok && mongo.value.dataDir).toBeUndefined();
  });

  it('configuration: all-in-one keeps its data under the user data directory unless DATA_DIR says otherwise', () => {
    const loaded = loadProcessConfig({ HOME: '/home/u' });
    expect(loaded.ok && loaded.value.dataDir).toBe(process.platform === 'linux' ? '/home/u/.local/share/planning-service' : defaultDataDir({ HOME: '/home/u' }));
    expect(loadProcessConfig({ HOME: '/home/u', XDG_DATA_HOME: '/xdg' }).ok && defaultDataDir({ HOME: '/home/u', XDG_DATA_HOME: '/xdg' }, 'linux')).toBe('/xdg/planning-service');
    expect(defaultDataDir({ HOME: '/Users/u' }, 'darwin')).toBe('/Users/u/Library/Application Support/planning-service');
    expect(defaultDataDir({ HOME: 'C:\\Users\\u', LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' }, 'win32')).toContain('planning-service');
    const memory = loadProcessConfig({ DATA_DIR: ':memory:' });
    expect(memory.ok && memory.value.dataDir).toBe(':memory:');
  });

  it('configuration: an unknown target is reported as --target', () => {
    const loaded = loadProcessConfig({}, 'everything');
    expect(!loaded.ok && loaded.problems[0]?.variable).toBe('--target');
  });

  it('configuration: module settings are parsed together and all problems reported', () => {
    const defs: ModuleDefinition[] = [
      { name: 'a', deps: [], settings: { A_PORT: env.port() }, init: async () => ({}) },
      { name: 'b', deps: [], settings: { B_FLAG: env.bool() }, init: async () => ({}) },
    ];
    const result = loadModuleSettings(defs, ['a', 'b'], config(), { A_PORT: 'x', B_FLAG: 'maybe' });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map((p) => p.variable)).toEqual(['A_PORT', 'B_FLAG']);
  });
});

describe('failpoints', () => {
  it('failpoints: off by default, throw when configured, and fire on the n-th hit', () => {
    configureFailpoints(undefined);
    expect(() => failpoint('x.y')).not.toThrow();
    expect(configureFailpoints('x.y=throw@2')).toEqual([]);
    expect(() => failpoint('x.y')).not.toThrow();
    expect(() => failpoint('x.y')).toThrow(FailpointError);
    expect(() => failpoint('x.y')).not.toThrow();
    expect(configureFailpoints('nonsense')).toHaveLength(1);
    configureFailpoints(undefined);
  });
});

describe('configuration: trusted proxies', () => {
  it('configuration: TRUST_PROXY takes booleans or an address list', () => {
    const of = (value: string | undefined) => {
      const loaded = loadProcessConfig(value === undefined ? {} : { TRUST_PROXY: value });
      if (!loaded.ok) throw new Error('should load');
      return loaded.value.trustProxy;
    };
    expect(of(undefined)).toBe(false);
    expect(of('true')).toBe(true);
    expect(of('0')).toBe(false);
    expect(of('loopback, 10.0.0.0/8')).toBe('loopback, 10.0.0.0/8');
  });

  it('http: one log line per request, without the query string; probes at debug', async () => {
    const lines: Record<string, unknown>[] = [];
    const destination = { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) };
    const app = createHttpApp({ logger: createLogger({ name: 'test', level: 'info', destination }) });
    app.get('/api/things/:id', async () => ({ ok: true }));
    await app.inject({ method: 'GET', url: '/api/things/t1?q=secret-words&projectId=prj_hidden' });
    await app.inject({ method: 'GET', url: '/live' });
    await app.close();
    const text = JSON.stringify(lines);
    expect(text).not.toContain('secret-words');
    expect(text).not.toContain('prj_hidden');
    const done = lines.filter((l) => l.msg === 'request completed');
    expect(done).toHaveLength(1);
    expect(done[0]).toMatchObject({ http: { method: 'GET', path: '/api/things/t1', route: '/api/things/:id', statusCode: 200 } });
  });

  it('configuration: the client address comes from X-Forwarded-For only behind a trusted proxy', async () => {
    for (const [trustProxy, expected] of [
      [false, '127.0.0.1'],
      [true, '203.0.113.7'],
    ] as const) {
      const app = createHttpApp({ trustProxy });
      app.get('/ip', async (request) => ({ ip: request.ip }));
      const res = await app.inject({ method: 'GET', url: '/ip', headers: { 'x-forwarded-for': '203.0.113.7' } });
      expect(res.json().ip).toBe(expected);
      await app.close();
    }
  });
});
