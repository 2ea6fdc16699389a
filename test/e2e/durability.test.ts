import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, startDistributed, type Cluster } from '../support/cluster.js';
import { eventually, login, request } from '../support/http.js';

/** Counts audit events of one type by paging through the admin audit trail. */
async function auditEventIds(cluster: Cluster, cookie: string, type: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `/api/admin/audit-events?type=${type}&limit=200${cursor ? `&cursor=${cursor}` : ''}`;
    const res = await request(cluster.baseUrl, 'GET', query, { cookie });
    if (res.status !== 200) throw new Error(`audit-events: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(...res.body.data.map((e: { id: string }) => e.id));
    cursor = res.body.page.nextCursor;
  } while (cursor);
  return ids;
}

async function createWorkspaces(cluster: Cluster, cookie: string, count: number, prefix: string): Promise<string[]> {
  const ids: string[] = [];
  // A few at a time, as real clients would.
  for (let i = 0; i < count; i += 10) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(10, count - i) }, (_, j) =>
        request(cluster.baseUrl, 'POST', '/api/workspaces', { cookie, body: { name: `${prefix} ${i + j}` } }),
      ),
    );
    for (const res of batch) {
      expect(res.status).toBe(201);
      ids.push(res.body.data.id);
    }
  }
  return ids;
}

describe('durability (distributed)', () => {
  let cluster: Cluster | undefined;

  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('durability: audit stopped while 200 workspaces are created holds exactly 200 events after it returns', async () => {
    cluster = await startDistributed();
    const cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    const audit = cluster.process('audit');
    await audit.stop();

    await createWorkspaces(cluster, cookie, 200, 'Durable');

    await audit.start();
    const ids = await eventually(async () => {
      const found = await auditEventIds(cluster!, cookie, 'workspace.created');
      return found.length >= 200 ? found : undefined;
    }, 60_000, '200 workspace.created audit events');
    // Give any duplicate a chance to arrive, then count again: none lost, none doubled.
    await new Promise((r) => setTimeout(r, 1_500));
    const again = await auditEventIds(cluster, cookie, 'workspace.created');
    expect(again).toHaveLength(200);
    expect(new Set(again).size).toBe(200);
    expect(ids).toHaveLength(200);
  }, 180_000);

  it('durability: a crash between the store write and the publish loses nothing (the relay catches up)', async () => {
    cluster = await startDistributed({ envFor: { issues: { SERVICE_FAILPOINTS: 'outbox.before-publish=crash' } } });
    const cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    const issues = cluster.process('issues');

    // The issues process commits the workspace and its event, then dies before publishing.
    const res = await request(cluster.baseUrl, 'POST', '/api/workspaces', { cookie, body: { name: 'Crash before publish' } });
    await issues.waitForExit();
    expect([201, 503]).toContain(res.status);

    // Back without the failpoint: the relay publishes what the dead process left behind.
    delete issues.env.SERVICE_FAILPOINTS;
    await issues.start();
    const listed = await eventually(async () => {
      const r = await request(cluster!.baseUrl, 'GET', '/api/workspaces?q=Crash', { cookie });
      return r.status === 200 && r.body.data.length === 1 ? r : undefined;
    }, 30_000, 'the committed workspace');
    const workspaceId = listed.body.data[0].id as string;

    const events = await eventually(async () => {
      const r = await request(
        cluster!.baseUrl,
        'GET',
        `/api/admin/audit-events?type=workspace.created&workspaceId=${workspaceId}`,
        { cookie },
      );
      return r.body.data?.length > 0 ? r : undefined;
    }, 30_000, 'the relayed event');
    expect(events.body.data).toHaveLength(1);
  }, 120_000);

  it('durability: a crash after the publish but before marking it published doubles nothing', async () => {
    cluster = await startDistributed({ envFor: { issues: { SERVICE_FAILPOINTS: 'outbox.after-publish=crash' } } });
    const cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    const issues = cluster.process('issues');

    await request(cluster.baseUrl, 'POST', '/api/workspaces', { cookie, body: { name: 'Crash after publish' } });
    await issues.waitForExit();
    delete issues.env.SERVICE_FAILPOINTS;
    await issues.start();

    const listed = await eventually(async () => {
      const r = await request(cluster!.baseUrl, 'GET', '/api/workspaces?q=Crash', { cookie });
      return r.status === 200 && r.body.data.length === 1 ? r : undefined;
    }, 30_000, 'the committed workspace');
    const workspaceId = listed.body.data[0].id as string;
    // The restarted relay publishes the event again; the bus and the audit store deduplicate it.
    await eventually(async () => {
      const r = await request(
        cluster!.baseUrl,
        'GET',
        `/api/admin/audit-events?type=workspace.created&workspaceId=${workspaceId}`,
        { cookie },
      );
      return r.body.data?.length > 0 ? r : undefined;
    }, 30_000, 'the event');
    await new Promise((r) => setTimeout(r, 2_000));
    const events = await request(
      cluster.baseUrl,
      'GET',
      `/api/admin/audit-events?type=workspace.created&workspaceId=${workspaceId}`,
      { cookie },
    );
    expect(events.body.data).toHaveLength(1);
  }, 120_000);
});
