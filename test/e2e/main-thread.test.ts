import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { getFreePort } from '@planning/testing';
import { createWorkspace } from '../support/auth.js';
import { login, request } from '../support/http.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, ServiceProcess } from '../support/service-process.js';

/**
 * What each thread of the all-in-one bundle has compiled, read from V8 itself: the bundle starts
 * with test/support/loaded-scripts.mjs (`--import`, which the services' worker inherits), and
 * each thread lists the scripts its isolate has parsed. A chunk of the bundle stands for the
 * source files its source map names. With the services' thread the gateway's (main) thread reads
 * the services' module definitions (names, dependencies, settings) and never their
 * implementation, which only the services' thread loads.
 */

const SERVICES = ['issues', 'agents-claims', 'imports-exports', 'audit'];
/** The files of a service the gateway's thread may hold: its definition, settings and the demo seeding. */
const LIGHT = new Set([
  ...SERVICES.flatMap((s) => [`services/${s}/src/index.ts`, `services/${s}/src/definition.ts`, `services/${s}/src/definition-core.ts`, `services/${s}/src/config.ts`]),
  'services/issues/src/demo/module.ts',
  'services/issues/src/demo/seed.ts',
]);

/** The source files (relative to the checkout) behind the scripts a thread has parsed. */
function sourcesOf(urls: string[]): Set<string> {
  const dist = pathToFileURL(join(ROOT, 'dist')).href + '/';
  const files = new Set<string>();
  for (const url of urls) {
    if (!url.startsWith('file:')) continue;
    if (!url.startsWith(dist)) {
      files.add(relative(ROOT, fileURLToPath(url)));
      continue;
    }
    const map = JSON.parse(readFileSync(fileURLToPath(`${url}.map`), 'utf8')) as { sources: string[] };
    for (const source of map.sources) files.add(relative(ROOT, fileURLToPath(new URL(source, url))));
  }
  return files;
}

const serviceFiles = (files: Set<string>) => [...files].filter((f) => SERVICES.some((s) => f.startsWith(`services/${s}/src/`))).sort();

const ADMIN_PASSWORD = 'main-thread-password-1';

/** The all-in-one bundle on loopback ports of its own, in memory, in the layout asked for. */
async function bundleEnv(port: number, layout: 'on' | 'off', demo: '0' | '1'): Promise<Record<string, string>> {
  return {
    PORT: String(port),
    GRPC_PORT: String(await getFreePort()),
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    DATA_DIR: ':memory:',
    LOG_LEVEL: 'warn',
    SERVICE_DEMO: demo,
    SERVICES_THREAD: layout,
    SERVICE_ADMIN_PASSWORD: ADMIN_PASSWORD,
  };
}

/**
 * Pages above 64 KiB are written into buffers given back once a response has finished (across
 * the threads: thread-port.ts; in one thread: direct.ts): answers in flight together must never
 * share or lose bytes.
 */
async function concurrentPagesAreExact(baseUrl: string): Promise<void> {
  const cookie = await login(baseUrl, 'admin@example.com', ADMIN_PASSWORD);
  const ws = (await createWorkspace(baseUrl, cookie, 'Buffers')).id as string;
  const project = await request(baseUrl, 'POST', '/api/projects', { cookie, body: { workspaceId: ws, name: 'Pages' } });
  expect(project.status).toBe(201);
  for (let i = 0; i < 60; i++) {
    const created = await request(baseUrl, 'POST', '/api/issues', {
      cookie,
      body: { projectId: project.body.data.id, title: `Task ${i}`, description: `${String(i).padStart(3, '0')} `.repeat(600 + 40 * i), priority: i % 2 ? 'high' : 'low' },
    });
    expect(created.status).toBe(201);
  }
  const paths = [`/api/issues?workspaceId=${ws}&limit=50`, `/api/issues?workspaceId=${ws}&priority=high&limit=30`];
  const expected = await Promise.all(paths.map(async (path) => (await fetch(`${baseUrl}${path}`, { headers: { cookie } })).text()));
  expect(expected.map((body) => body.length).every((n) => n > 64 * 1024)).toBe(true);
  expect(expected[0]).not.toBe(expected[1]);
  for (let round = 0; round < 4; round++) {
    const bodies = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const res = await fetch(`${baseUrl}${paths[i % 2]!}`, { headers: { cookie } });
        expect(res.status).toBe(200);
        return [i % 2, await res.text()] as const;
      }),
    );
    for (const [which, body] of bodies) expect(body === expected[which], `round ${round}: page ${which} differs`).toBe(true);
  }
}

describe('the gateway’s thread beside the services’ thread', () => {
  let dir: string;
  let app: ServiceProcess;
  const loaded: Record<'main' | 'worker', Set<string>> = { main: new Set(), worker: new Set() };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'planning-main-thread-'));
    const port = await getFreePort();
    app = new ServiceProcess(
      'all-in-one',
      {
        // The demo seeding runs in the gateway's thread and calls the issues service through the port.
        ...(await bundleEnv(port, 'on', '1')),
        LOADED_SCRIPTS_TRIGGER: join(dir, 'now'),
        LOADED_SCRIPTS_OUT: join(dir, 'scripts'),
      },
      port,
      [],
      ['--import', join(ROOT, 'test/support/loaded-scripts.mjs')],
    );
    await app.start();
    // A request through both threads first: the services answer from their thread.
    expect((await fetch(`${app.baseUrl}/ready`)).status).toBe(200);
    writeFileSync(join(dir, 'now'), 'now');
    const deadline = Date.now() + 20_000;
    for (;;) {
      const files = readdirSync(dir).filter((f) => f.startsWith('scripts.') && f.endsWith('.json'));
      if (files.length >= 2) {
        for (const file of files) {
          const thread = file.split('.')[1] as 'main' | 'worker';
          const report = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { urls?: string[]; error?: string };
          if (!report.urls) throw new Error(`${thread} thread: ${report.error}`);
          loaded[thread] = sourcesOf(report.urls);
        }
        break;
      }
      if (Date.now() > deadline) throw new Error(`no script lists from both threads: ${readdirSync(dir).join(', ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  afterAll(async () => {
    await app?.stop();
    if (dir && existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  });

  it('pages rendered into buffers the services’ thread reuses: many at once, of two sizes, each body exactly its own', async () => {
    await concurrentPagesAreExact(app.baseUrl);
  }, 60_000);

  it('main thread: the services’ implementations load only in the services’ thread', () => {
    // The probe sees each thread's own code: the gateway here, every service's implementation there.
    expect(loaded.main.has('services/gateway/src/module.ts')).toBe(true);
    expect(loaded.worker.has('services/gateway/src/module.ts')).toBe(false);
    for (const service of SERVICES) expect(loaded.worker.has(`services/${service}/src/module.ts`), service).toBe(true);
    // The gateway's thread holds each service's definition, and nothing else of the services.
    for (const service of SERVICES) expect(loaded.main.has(`services/${service}/src/definition.ts`), service).toBe(true);
    expect(serviceFiles(loaded.main).filter((f) => !LIGHT.has(f))).toEqual([]);
  });

  it('services’ thread: no HTTP server code (fastify is evaluated only where the HTTP server runs)', () => {
    expect(loaded.main.has('libs/runtime/src/http.ts')).toBe(true);
    expect(loaded.worker.has('libs/runtime/src/http.ts')).toBe(false);
    expect([...loaded.worker].filter((f) => /\/fastify\/|\/@fastify\//.test(f))).toEqual([]);
  });

  it('services’ thread: no zod (the main thread parses every setting and hands the services theirs)', () => {
    // The environment is read once, in the main thread, with the schemas (libs/config: zod) of the
    // process and of every module; the worker gets the parsed values (services-worker.ts).
    expect(loaded.main.has('libs/config/src/index.ts')).toBe(true);
    expect([...loaded.main].filter((f) => /\/zod\//.test(f)).length).toBeGreaterThan(0);
    expect([...loaded.worker].filter((f) => /\/zod\/|^libs\/config\/|^services\/[^/]+\/src\/config\.ts$|^libs\/runtime\/src\/(process-env|module-settings)\.ts$/.test(f))).toEqual([]);
    for (const service of ['issues', 'agents-claims', 'imports-exports']) expect(loaded.worker.has(`services/${service}/src/definition-core.ts`), service).toBe(true);
  });

  it('main thread: no grpc-js (its calls cross the MessagePort; the gRPC server runs in the services’ thread)', () => {
    const grpc = (files: Set<string>) => [...files].filter((f) => f.includes('/@grpc/grpc-js/'));
    expect(grpc(loaded.worker).length).toBeGreaterThan(0);
    expect(grpc(loaded.main)).toEqual([]);
  });

  it('neither thread loads what it has not used: the MCP SDK until the first MCP request, OTLP exporters unless configured, mingo beyond its query and update operators', () => {
    const matching = (files: Set<string>, pattern: RegExp) => [...files].filter((f) => pattern.test(f));
    // mcp/engine.ts, imported by the route on the endpoint's first POST (none was made here).
    expect(matching(loaded.main, /@modelcontextprotocol\//)).toEqual([]);
    expect(loaded.main.has('services/gateway/src/mcp/route.ts')).toBe(true);
    expect(loaded.main.has('services/gateway/src/mcp/engine.ts')).toBe(false);
    // No OTLP exporter is configured here: libs/telemetry/src/otlp-exporters.ts is loaded only when one is.
    for (const thread of ['main', 'worker'] as const) {
      expect(matching(loaded[thread], /@opentelemetry\/(exporter-(trace|metrics)-otlp|otlp-)/), thread).toEqual([]);
      expect(matching(loaded[thread], /@opentelemetry\/sdk-trace\//).length, thread).toBeGreaterThan(0);
    }
    // The store's filters and updates (libs/store/src/document): mingo's query operators and updater, not its index.
    for (const thread of ['main', 'worker'] as const) {
      expect(matching(loaded[thread], /\/mingo\/cjs\/operators\/query\//).length, thread).toBeGreaterThan(0);
      expect(matching(loaded[thread], /\/mingo\/cjs\/(index\.js|aggregator\.js|operators\/(accumulator|window)\/)/), thread).toEqual([]);
    }
  });
});

describe('one thread (SERVICES_THREAD=off)', () => {
  let app: ServiceProcess;
  afterAll(async () => {
    await app?.stop();
  });

  it('pages rendered into buffers reused in the same thread: many at once, of two sizes, each body exactly its own', async () => {
    const port = await getFreePort();
    app = new ServiceProcess('all-in-one', await bundleEnv(port, 'off', '0'), port);
    await app.start();
    await concurrentPagesAreExact(app.baseUrl);
  }, 60_000);
});
