import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { request } from '../support/http.js';
import { buildWorld, credentialsOf, PRINCIPALS, send, type MatrixEntry, type World } from './world.js';

/**
 * The authorization matrix: every endpoint × {no credentials, a token of another workspace, a
 * token lacking the scope, viewer, member, admin, system admin} answers the documented status, in
 * both modes. The routes come from the running gateway's OpenAPI document, so a route without
 * an entry fails the first test. Entries live in ./entries/*.ts, one file per area (README.md).
 */
const entriesDir = join(dirname(fileURLToPath(import.meta.url)), 'entries');
const ENTRIES: MatrixEntry[] = [];
for (const file of readdirSync(entriesDir).filter((f) => f.endsWith('.ts')).sort()) {
  const mod = (await import(pathToFileURL(join(entriesDir, file)).href)) as { entries?: MatrixEntry[] };
  if (!Array.isArray(mod.entries)) throw new Error(`test/authz/entries/${file} must export 'entries'`);
  ENTRIES.push(...mod.entries);
}
const keyOf = (e: { method: string; path: string }) => `${e.method.toUpperCase()} ${e.path}`;

describe.each<Mode>(['all-in-one', 'distributed'])('authorization matrix (%s)', (mode) => {
  let cluster: Cluster;
  let world: World;
  let documented: Map<string, { responses: Record<string, unknown> }>;

  beforeAll(async () => {
    cluster = await startCluster(mode);
    world = await buildWorld(cluster);
    const doc = await request(cluster.baseUrl, 'GET', '/docs/json');
    expect(doc.status).toBe(200);
    documented = new Map();
    for (const [path, operations] of Object.entries(doc.body.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)) {
      if (!path.startsWith('/api/')) continue;
      for (const [method, operation] of Object.entries(operations)) documented.set(`${method.toUpperCase()} ${path}`, operation);
    }
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('matrix: every /api route of the gateway has an entry, and every entry a route', () => {
    const entryKeys = new Set(ENTRIES.map(keyOf));
    expect(entryKeys.size, 'duplicate entries').toBe(ENTRIES.length);
    const missing = [...documented.keys()].filter((k) => !entryKeys.has(k)).sort();
    const stale = [...entryKeys].filter((k) => !documented.has(k)).sort();
    expect(missing, 'routes without a matrix entry: add them to test/authz/entries (see README.md)').toEqual([]);
    expect(stale, 'entries for routes that do not exist').toEqual([]);
  });

  it('matrix: the OpenAPI document lists every status the matrix expects', () => {
    const undocumented: string[] = [];
    for (const entry of ENTRIES) {
      const operation = documented.get(keyOf(entry));
      if (!operation) continue;
      for (const status of new Set(Object.values(entry.expect))) {
        if (!(String(status) in operation.responses)) undocumented.push(`${keyOf(entry)}: ${status}`);
      }
    }
    expect(undocumented).toEqual([]);
  });

  it.each(ENTRIES.map((e) => [keyOf(e), e] as const))('matrix: %s', async (_name, entry) => {
    const mismatches: string[] = [];
    for (const who of PRINCIPALS) {
      const spec = await entry.request(world, who);
      const res = await send(world, spec, credentialsOf(world, who, entry.scope));
      if (res.status !== entry.expect[who]) {
        mismatches.push(`${who}: expected ${entry.expect[who]}, got ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
      }
      if (res.status >= 400 && res.status !== 429) {
        expect(res.body?.error?.code, `${who}: error envelope`).toEqual(expect.any(String));
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('BOLA: a workspace-A token (every scope) and workspace-A users never succeed with workspace-B ids', async () => {
    const leaks: string[] = [];
    for (const entry of ENTRIES) {
      if (!entry.againstB) {
        if (entry.expect.wrongWorkspaceToken === 404) leaks.push(`${keyOf(entry)}: workspace-bound, but has no againstB request`);
        continue;
      }
      const token = await send(world, await entry.againstB(world), { token: world.a.token.token });
      const expected = entry.scope ? 404 : 403;
      if (token.status !== expected) leaks.push(`${keyOf(entry)} token A: expected ${expected}, got ${token.status}`);
      for (const who of ['viewer', 'member', 'admin'] as const) {
        const res = await send(world, await entry.againstB(world), { cookie: world.a[who].cookie });
        if (res.status < 400) leaks.push(`${keyOf(entry)} ${who} of A: got ${res.status}`);
      }
    }
    expect(leaks).toEqual([]);
  });
});
