import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request } from '../support/http.js';

/** The walking skeleton, through every layer, in both modes: the same suite, the same assertions. */
describe.each<Mode>(['all-in-one', 'distributed'])('skeleton (%s)', (mode) => {
  let cluster: Cluster;
  let cookie: string;

  beforeAll(async () => {
    cluster = await startCluster(mode);
    cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('skeleton: every process answers /live and /ready', async () => {
    for (const proc of cluster.processes.values()) {
      const live = await request(proc.baseUrl, 'GET', '/live');
      expect(live.status).toBe(200);
      const ready = await request(proc.baseUrl, 'GET', '/ready');
      expect(ready.status).toBe(200);
      expect(ready.body.data).toMatchObject({ status: 'ready', notRunning: [] });
    }
  });

  it('skeleton: login sets an HttpOnly, SameSite=Lax service_session cookie and never an open redirect', async () => {
    const res = await request(cluster.baseUrl, 'POST', '/api/auth/login', {
      body: { email: ADMIN_EMAIL, password: cluster.adminPassword, returnTo: '//evil.example/x' },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ redirectTo: '/', mode: 'local' });
    const setCookie = res.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/^service_session=[A-Za-z0-9_-]{43};/);
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Lax/i);
    expect(setCookie).toMatch(/Path=\//);
  });

  it('skeleton: a wrong password and an unknown email get the same 401', async () => {
    const wrong = await request(cluster.baseUrl, 'POST', '/api/auth/login', {
      body: { email: ADMIN_EMAIL, password: 'not-the-password' },
    });
    const unknown = await request(cluster.baseUrl, 'POST', '/api/auth/login', {
      body: { email: 'nobody@example.com', password: 'not-the-password' },
    });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.body).toEqual(unknown.body);
    expect(wrong.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
  });

  it('skeleton: POST then GET /api/workspaces go through gRPC to the issues store', async () => {
    const created = await request(cluster.baseUrl, 'POST', '/api/workspaces', {
      cookie,
      body: { name: `Skeleton ${mode}` },
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      name: `Skeleton ${mode}`,
      status: 'active',
      defaultSandbox: 'workspace-write',
      planId: 'free',
    });
    expect(created.body.data.id).toMatch(/^ws_/);
    expect(created.body.data.slug).toBe(`skeleton-${mode}`);

    const listed = await request(cluster.baseUrl, 'GET', `/api/workspaces?q=${encodeURIComponent('skeleton')}`, { cookie });
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((w: { id: string }) => w.id)).toContain(created.body.data.id);
  });

  it('skeleton: workspace.created is consumed by audit exactly once and diagnostics count it', async () => {
    const before = await request(cluster.baseUrl, 'GET', '/api/admin/diagnostics', { cookie });
    expect(before.status).toBe(200);
    expect(before.body.data.redacted).toBe(true);
    const created = await request(cluster.baseUrl, 'POST', '/api/workspaces', { cookie, body: { name: 'Counted' } });
    expect(created.status).toBe(201);
    const workspaceId = created.body.data.id as string;

    // Other audit rows (access decisions of these very requests) also raise the total, so wait
    // for the workspace.created row itself, then check the count moved and the row is single.
    const events = await eventually(async () => {
      const res = await request(
        cluster.baseUrl,
        'GET',
        `/api/admin/audit-events?type=workspace.created&workspaceId=${workspaceId}`,
        { cookie },
      );
      return res.status === 200 && res.body.data.length > 0 ? res : undefined;
    }, 20_000, 'audit to record workspace.created');
    const after = await request(cluster.baseUrl, 'GET', '/api/admin/diagnostics', { cookie });
    expect(after.body.data.audit.totalEvents).toBeGreaterThan(before.body.data.audit.totalEvents);
    const again = await request(cluster.baseUrl, 'GET', `/api/admin/audit-events?type=workspace.created&workspaceId=${workspaceId}`, { cookie });
    expect(again.body.data).toHaveLength(1);
    expect(events.body.data).toHaveLength(1);
    expect(events.body.data[0]).toMatchObject({
      type: 'workspace.created',
      workspaceId,
      subject: { type: 'workspace', id: workspaceId },
      outcome: 'allowed',
    });
  });

  it('skeleton: errors use the documented envelope', async () => {
    const noSession = await request(cluster.baseUrl, 'GET', '/api/workspaces');
    expect(noSession.status).toBe(401);
    expect(noSession.body.error.code).toBe('unauthorized');

    const badBody = await request(cluster.baseUrl, 'POST', '/api/workspaces', { cookie, body: { name: 42 } });
    expect(badBody.status).toBe(400);
    expect(badBody.body.error).toMatchObject({ code: 'invalid-input', field: 'name' });

    const malformed = await request(cluster.baseUrl, 'POST', '/api/workspaces', { cookie, rawBody: '{"name":' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('invalid-input');

    const unknownRoute = await request(cluster.baseUrl, 'GET', '/api/does-not-exist', { cookie });
    expect(unknownRoute.status).toBe(404);
    expect(unknownRoute.body.error.code).toBe('not-found');
  });
});
