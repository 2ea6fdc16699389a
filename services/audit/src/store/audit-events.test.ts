import type { EventEnvelope } from '@planning/bus';
import { createSqliteStore, type Filter } from '@planning/store';
import { describe, expect, it } from 'vitest';
import { AUDIT_EVENT_INDEXES, AuditEventRepository, type AuditScope } from './audit-events.js';

const TYPES = ['issues.task.updated', 'auth.login', 'exports.export.created'];
const event = (n: number): EventEnvelope =>
  ({
    id: `evt_${String(n).padStart(26, '0')}`,
    type: TYPES[n % 3],
    subject: `planning.${TYPES[n % 3]}`,
    source: 'issues',
    occurredAt: new Date(Date.UTC(2026, 10, 26, 12, 0, 0, n)).toISOString(),
    ...(n % 7 === 0 ? {} : { workspaceId: n % 2 ? 'ws_a' : 'ws_b' }),
    actor: { type: 'user', id: 'usr_1' },
    data: { subject: { type: 'task', id: `tsk_${n}` }, ...(n % 5 === 0 ? { outcome: 'denied' } : {}) },
  }) as unknown as EventEnvelope;

describe('audit events: lists newest first, a page reads its own rows', () => {
  it('every scope, type and cursor answers as the events sorted by id, and each page is an index walk in order', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    const repo = await AuditEventRepository.open(store);
    const events = Array.from({ length: 600 }, (_, i) => event(i + 1));
    for (let i = 0; i < events.length; i += 100) await repo.recordMany(events.slice(i, i + 100));
    const scopes: AuditScope[] = [{ all: true, workspaceIds: [] }, { all: false, workspaceIds: ['ws_a'] }, { all: false, workspaceIds: ['ws_a', 'ws_b'] }];
    const raw = store.collection('audit_events');
    for (const scope of scopes) {
      for (const type of [undefined, 'auth.login']) {
        const expected = events
          .filter((e) => (scope.all || scope.workspaceIds.includes(e.workspaceId as string)) && (type === undefined || e.type === type))
          .map((e) => e.id)
          .sort() // ASCII ids: code unit order is the store's order
          .reverse();
        // Every page, through the cursor, as the API walks them.
        const seen: string[] = [];
        let before: string | undefined;
        for (;;) {
          const page = await repo.list(scope, { limit: 51, ...(type ? { type } : {}), ...(before ? { before } : {}) });
          seen.push(...page.slice(0, 50).map((r) => r._id));
          if (page.length <= 50) break;
          before = page[49]!._id;
        }
        const label = JSON.stringify({ scope, type });
        expect(seen, label).toEqual(expected);
        // The filters list() makes: the page after a cursor deep in the list examines its own rows.
        const filter: Filter = { ...(scope.all ? {} : { workspaceId: { $in: scope.workspaceIds } }), ...(type ? { type } : {}), _id: { $lt: expected[Math.floor(expected.length / 2)] as string } };
        const plan = await raw.explain(filter, { sort: { _id: -1 }, limit: 51 });
        expect(plan.inMemorySort, label).toBe(false);
        expect(plan.docsExamined, label).toBeLessThanOrEqual(type && !scope.all ? 51 * 4 : 51);
      }
    }
    expect(await repo.count({ all: false, workspaceIds: ['ws_b'] })).toBe(events.filter((e) => e.workspaceId === 'ws_b').length);
    await store.close();
  });

  it('opening drops the indexes it replaced (time-ordered ones that could not serve the order) and keeps the data', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    const raw = store.collection('audit_events');
    await raw.createIndexes([
      { name: 'workspace_at', keys: { workspaceId: 1, at: -1 } },
      { name: 'outcome_at', keys: { outcome: 1, at: -1 } },
      { name: 'type_at', keys: { type: 1, at: -1 } },
    ]);
    await raw.insertOne({ _id: event(1).id, type: 'auth.login', workspaceId: 'ws_a', at: event(1).occurredAt, outcome: 'allowed' });
    const repo = await AuditEventRepository.open(store);
    const plan = await raw.explain({ workspaceId: { $in: ['ws_a'] } }, { sort: { _id: -1 }, limit: 10 });
    expect(plan).toMatchObject({ plan: 'IXSCAN', index: 'workspace_id', inMemorySort: false });
    // The old names are free again: created with other keys, they would clash if they were still there.
    await raw.createIndexes([{ name: 'workspace_at', keys: { at: 1 } }, { name: 'type_at', keys: { at: 1, type: 1 } }]);
    expect((await repo.list({ all: true, workspaceIds: [] }, { limit: 5 })).map((r) => r._id)).toEqual([event(1).id]);
    expect(AUDIT_EVENT_INDEXES.map((i) => i.name)).toEqual(['workspace_id', 'type_id', 'denied_at']);
    // outcome_at (every event by outcome) went too: the name is free for other keys.
    await raw.createIndexes([{ name: 'outcome_at', keys: { at: 1, outcome: 1 } }]);
    await store.close();
  });

  it('recent denials are counted from an index of the denied events alone; allowed events add no entry to it', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    const repo = await AuditEventRepository.open(store);
    const events = Array.from({ length: 300 }, (_, i) => event(i + 1));
    await repo.recordMany(events);
    const since = new Date(Date.UTC(2026, 10, 26, 12, 0, 0, 101));
    for (const scope of [{ all: true, workspaceIds: [] }, { all: false, workspaceIds: ['ws_a'] }, { all: false, workspaceIds: ['ws_a', 'ws_b'] }] as AuditScope[]) {
      const expected = events.filter(
        (e) => (e.data as { outcome?: string }).outcome === 'denied' && e.occurredAt >= since.toISOString() && (scope.all || scope.workspaceIds.includes(e.workspaceId as string)),
      ).length;
      expect(expected).toBeGreaterThan(0);
      expect(await repo.countDeniedSince(scope, since), JSON.stringify(scope)).toBe(expected);
    }
    const raw = store.collection('audit_events');
    // The count of every scope walks the denied events since the time (fewer entries than the
    // workspace's events: the planner counts each candidate's range).
    for (const scope of [{}, { workspaceId: { $in: ['ws_a'] } }, { workspaceId: { $in: ['ws_a', 'ws_b'] } }]) {
      const plan = await raw.explain({ ...scope, outcome: 'denied', at: { $gte: since.toISOString() } }, {});
      expect(plan, JSON.stringify(scope)).toMatchObject({ plan: 'IXSCAN', index: 'denied_at' });
    }
    // An event recorded denied is in the index once; an allowed one is not in it at all (the
    // index answers a filter that only it can serve: no rows it does not hold).
    expect(await raw.countDocuments({ outcome: 'denied' })).toBe(events.filter((e) => (e.data as { outcome?: string }).outcome === 'denied').length);
    await store.close();
  });
});
