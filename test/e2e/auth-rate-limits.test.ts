import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createWorkspace } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request, type ApiResponse } from '../support/http.js';
import type { ServiceProcess } from '../support/service-process.js';

const BURST = 120; // beginner: 60/min, burst 120
const REFILL_PER_SECOND = 1;

/** Fires `count` token requests at once, spread over `baseUrls`; returns the responses and the seconds it took. */
async function burst(baseUrls: string[], token: string, count: number): Promise<{ responses: ApiResponse[]; seconds: number }> {
  const started = Date.now();
  const responses = await Promise.all(
    Array.from({ length: count }, (_, i) => request(baseUrls[i % baseUrls.length]!, 'GET', '/api/workspaces?limit=1', { token })),
  );
  return { responses, seconds: (Date.now() - started) / 1000 };
}

function expectLimited(responses: ApiResponse[], seconds: number): void {
  const accepted = responses.filter((r) => r.status === 200).length;
  const limited = responses.filter((r) => r.status === 429);
  expect(accepted + limited.length).toBe(responses.length);
  // The whole burst, plus at most what refilled while the requests were in flight.
  expect(accepted).toBeGreaterThanOrEqual(BURST);
  expect(accepted).toBeLessThanOrEqual(BURST + Math.ceil(seconds * REFILL_PER_SECOND));
  expect(limited.length).toBeGreaterThan(0);
  for (const res of limited) {
    expect(res.body.error.code).toBe('rate-limited');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(res.headers.get('ratelimit-policy')).toBe(`"burst";q=${BURST};w=60`);
    expect(res.headers.get('ratelimit')).toMatch(/^"burst";r=0;t=[1-9]\d*$/);
  }
}

describe.each<Mode>(['all-in-one', 'distributed'])('rate limits (%s)', (mode) => {
  let cluster: Cluster;
  let cookie: string;
  let workspaceId: string;

  beforeAll(async () => {
    cluster = await startCluster(mode);
    cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    workspaceId = (await createWorkspace(cluster.baseUrl, cookie, `Limits ${mode}`, 'beginner')).id;
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('rate limit: a beginner key gets its burst of 120, then 429 with Retry-After', async () => {
    const key = await createKey(cluster.baseUrl, cookie, workspaceId, 'beginner', ['projects:read']);
    const first = await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token });
    expect(first.headers.get('ratelimit')).toBe('"burst";r=119;t=0');
    const { responses, seconds } = await burst([cluster.baseUrl], key.token, BURST + 9);
    expectLimited([first, ...responses], seconds);
    // Another key of the same workspace has its own bucket.
    const other = await createKey(cluster.baseUrl, cookie, workspaceId, 'beginner', ['projects:read']);
    expect((await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: other.token })).status).toBe(200);
  });

  it.runIf(mode === 'distributed')('rate limit: two gateway replicas sharing Redis enforce one bucket; without Redis each limits on its own', async () => {
    const key = await createKey(cluster.baseUrl, cookie, workspaceId, 'beginner', ['projects:read']);
    const outageKey = await createKey(cluster.baseUrl, cookie, workspaceId, 'beginner', ['projects:read']);
    // The second replica shares the gateway's records (in production: one MongoDB). The
    // embedded store cannot be shared between processes, so it starts from a copy of them.
    const dataDir = await mkdtemp(join(tmpdir(), 'planning-gw2-'));
    let second: ServiceProcess | undefined;
    try {
      await cp(join(cluster.dataDir, 'gateway'), join(dataDir, 'gateway'), { recursive: true });
      second = await cluster.addGateway({ DATA_DIR: dataDir });
      const both = [cluster.baseUrl, second.baseUrl];
      // One at a time, alternating: each replica serves half of the burst, then both refuse.
      const started = Date.now();
      const responses: ApiResponse[] = [];
      for (let i = 0; i < 2 * BURST; i++) responses.push(await request(both[i % 2]!, 'GET', '/api/workspaces?limit=1', { token: key.token }));
      expectLimited(responses, (Date.now() - started) / 1000);
      // Both replicas answered and both refused: one shared bucket.
      const bySecond = responses.filter((_, i) => i % 2 === 1);
      expect(bySecond.some((r) => r.status === 200)).toBe(true);
      expect(bySecond.some((r) => r.status === 429)).toBe(true);

      // Redis goes away mid-run: requests are still served and still limited, per replica.
      await cluster.redis!.stop();
      for (const base of both) {
        const { responses: outage, seconds: outageSeconds } = await burst([base], outageKey.token, BURST + 20);
        expectLimited(outage, outageSeconds);
      }
      for (const proc of [cluster.process('gateway'), second]) {
        const ready = await request(proc.baseUrl, 'GET', '/ready');
        expect(ready.status).toBe(200);
        expect(ready.body.data.details.gateway.rateLimiter).toMatchObject({ kind: 'redis', mode: 'per-replica' });
        expect(proc.output.join('\n')).toMatch(/rate limiter degraded/);
      }

      // Redis is back: the replicas share buckets again.
      await cluster.redis!.start();
      await eventually(async () => {
        await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token });
        const ready = await request(cluster.baseUrl, 'GET', '/ready');
        return ready.body.data.details.gateway.rateLimiter.mode === 'shared';
      }, 20_000, 'the limiter to use Redis again');
    } finally {
      await second?.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
