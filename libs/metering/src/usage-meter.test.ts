import { createEmbeddedStore, type DocumentStore } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createUsageMeter, quotaExceeded, type UsageMeter } from './index.js';

describe('metering: usage meter', () => {
  let store: DocumentStore;
  let meter: UsageMeter;
  const now = new Date('2025-03-31T23:59:00.000Z');

  beforeEach(async () => {
    store = createEmbeddedStore();
    meter = await createUsageMeter(store);
  });
  afterEach(async () => {
    await store.close();
  });

  it('metering: counts up to the limit and refuses beyond it', async () => {
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await meter.tryConsume({ workspaceId: 'ws_a', kind: 'imports', limit: 3, now }));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decisions.map((d) => d.used)).toEqual([1, 2, 3, 3]);
    expect(decisions[3]).toMatchObject({ limit: 3, period: '2025-03', resetsAt: '2025-04-01T00:00:00.000Z' });
    expect(await meter.used('ws_a', 'imports', now)).toBe(3);
  });

  it('metering: concurrent consumers never exceed the limit in total', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, () => meter.tryConsume({ workspaceId: 'ws_a', kind: 'agent-runs', limit: 25, now })),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(25);
    expect(await meter.used('ws_a', 'agent-runs', now)).toBe(25);
  });

  it('metering: counters are per workspace, kind and UTC month', async () => {
    await meter.tryConsume({ workspaceId: 'ws_a', kind: 'exports', limit: 1, now });
    expect((await meter.tryConsume({ workspaceId: 'ws_b', kind: 'exports', limit: 1, now })).allowed).toBe(true);
    expect((await meter.tryConsume({ workspaceId: 'ws_a', kind: 'imports', limit: 1, now })).allowed).toBe(true);
    const nextMonth = new Date('2025-04-01T00:00:00.000Z');
    const fresh = await meter.tryConsume({ workspaceId: 'ws_a', kind: 'exports', limit: 1, now: nextMonth });
    expect(fresh).toMatchObject({ allowed: true, used: 1, period: '2025-04' });
  });

  it('metering: unlimited still counts; amounts larger than the limit are refused outright', async () => {
    const unlimited = await meter.tryConsume({ workspaceId: 'ws_a', kind: 'api-requests', limit: null, amount: 5, now });
    expect(unlimited).toMatchObject({ allowed: true, used: 5, limit: null });
    const tooBig = await meter.tryConsume({ workspaceId: 'ws_a', kind: 'imports', limit: 2, amount: 3, now });
    expect(tooBig).toMatchObject({ allowed: false, used: 0 });
    const zero = await meter.tryConsume({ workspaceId: 'ws_a', kind: 'agent-runs', limit: 0, now });
    expect(zero.allowed).toBe(false);
  });

  it('metering: a refund gives back what was taken, never below zero', async () => {
    const taken = await meter.tryConsume({ workspaceId: 'ws_a', kind: 'agent-runs', limit: 1, now });
    await meter.refund({ workspaceId: 'ws_a', kind: 'agent-runs', period: taken.period });
    await meter.refund({ workspaceId: 'ws_a', kind: 'agent-runs', period: taken.period });
    expect(await meter.used('ws_a', 'agent-runs', now)).toBe(0);
    expect((await meter.tryConsume({ workspaceId: 'ws_a', kind: 'agent-runs', limit: 1, now })).allowed).toBe(true);
  });

  it('metering: meters inside a caller transaction and rolls back with it', async () => {
    await expect(
      store.withTransaction(async (session) => {
        await meter.tryConsume({ workspaceId: 'ws_a', kind: 'agent-runs', limit: 5, now, session });
        throw new Error('claim failed');
      }),
    ).rejects.toThrow('claim failed');
    expect(await meter.used('ws_a', 'agent-runs', now)).toBe(0);
  });

  it('metering: quotaExceeded carries the redacted quota object', () => {
    const err = quotaExceeded('imports', { limit: 2, used: 2, resetsAt: '2025-04-01T00:00:00.000Z' });
    expect(err.httpStatus).toBe(403);
    expect(err.toBody()).toEqual({
      error: {
        code: 'quota-exceeded',
        message: expect.any(String),
        quota: { kind: 'imports', limit: 2, used: 2, resetsAt: '2025-04-01T00:00:00.000Z' },
      },
    });
  });
});
