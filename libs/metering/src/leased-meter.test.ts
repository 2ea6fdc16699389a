import { createEmbeddedStore, type DocumentStore } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLeasedMeter, createUsageMeter, type UsageMeter } from './index.js';

/** The shared meter, counting the calls that reach the store. */
function counting(meter: UsageMeter): UsageMeter & { writes: number } {
  const counted = {
    writes: 0,
    tryConsume: (request: Parameters<UsageMeter['tryConsume']>[0]) => {
      counted.writes++;
      return meter.tryConsume(request);
    },
    refund: (request: Parameters<UsageMeter['refund']>[0]) => {
      counted.writes++;
      return meter.refund(request);
    },
    used: meter.used.bind(meter),
  };
  return counted;
}

describe('metering: leased meter', () => {
  let store: DocumentStore;
  let shared: UsageMeter;
  const now = new Date('2025-03-15T12:00:00.000Z');
  const use = { workspaceId: 'ws_a', kind: 'api-requests' as const, now };

  beforeEach(async () => {
    store = createEmbeddedStore();
    shared = await createUsageMeter(store);
  });
  afterEach(async () => {
    await store.close();
  });

  it('metering: two replicas leasing from one counter never allow more than the limit together', async () => {
    const a = createLeasedMeter(shared, { hotMs: 60_000 });
    const b = createLeasedMeter(await createUsageMeter(store), { hotMs: 60_000 });
    const allowed: boolean[] = [];
    // Waves of concurrent uses on both replicas, so leases grow and run into the limit mid-wave.
    for (let wave = 0; wave < 30; wave++) {
      const decisions = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).tryConsume({ ...use, limit: 500 })),
      );
      allowed.push(...decisions.map((d) => d.allowed));
    }
    expect(allowed.filter(Boolean)).toHaveLength(500);
    await Promise.all([a.close(), b.close()]);
    expect(await shared.used('ws_a', 'api-requests', now)).toBe(500);
  });

  it('metering: a busy workspace takes leases (few store writes); what is left is given back at close', async () => {
    const counted = counting(shared);
    const meter = createLeasedMeter(counted, { hotMs: 60_000, maxLease: 64 });
    for (let i = 0; i < 1000; i++) expect((await meter.tryConsume({ ...use, limit: null })).allowed).toBe(true);
    // 1 + 2 + 4 + ... + 64, then leases of 64: about 20 leases for 1,000 uses.
    expect(counted.writes).toBeLessThan(30);
    expect(await shared.used('ws_a', 'api-requests', now)).toBeGreaterThan(1000);
    expect(await meter.used('ws_a', 'api-requests', now)).toBe(1000);
    await meter.close();
    expect(await shared.used('ws_a', 'api-requests', now)).toBe(1000);
  });

  it('metering: a quiet workspace costs one write per use and holds nothing back', async () => {
    const counted = counting(shared);
    const meter = createLeasedMeter(counted, { hotMs: 0 });
    for (let i = 1; i <= 10; i++) {
      const decision = await meter.tryConsume({ ...use, limit: 100 });
      expect(decision).toMatchObject({ allowed: true, used: i, limit: 100, period: '2025-03' });
      expect(await shared.used('ws_a', 'api-requests', now)).toBe(i);
    }
    expect(counted.writes).toBe(10);
    await meter.close();
  });

  it('metering: near the limit a lease shrinks to what is left, then the refusal names the count', async () => {
    const meter = createLeasedMeter(shared, { hotMs: 60_000 });
    for (let i = 0; i < 37; i++) expect((await meter.tryConsume({ ...use, limit: 37 })).allowed).toBe(true);
    const refused = await meter.tryConsume({ ...use, limit: 37 });
    expect(refused).toMatchObject({ allowed: false, used: 37, limit: 37 });
    await meter.close();
    expect(await shared.used('ws_a', 'api-requests', now)).toBe(37);
  });

  it('metering: an idle lease is given back; a month that ended gives its lease back', async () => {
    let clock = now;
    const meter = createLeasedMeter(shared, { hotMs: 60_000, idleMs: 300, clock: () => clock });
    for (let i = 0; i < 10; i++) await meter.tryConsume({ ...use, limit: null });
    expect(await shared.used('ws_a', 'api-requests', now)).toBeGreaterThan(10);
    await expect.poll(() => shared.used('ws_a', 'api-requests', now), { timeout: 5_000 }).toBe(10);

    for (let i = 0; i < 10; i++) await meter.tryConsume({ ...use, limit: null });
    clock = new Date('2025-04-01T00:00:01.000Z');
    await meter.tryConsume({ ...use, now: clock, limit: null });
    await expect.poll(() => shared.used('ws_a', 'api-requests', now), { timeout: 5_000 }).toBe(20);
    await meter.close();
    expect(await shared.used('ws_a', 'api-requests', clock)).toBe(1);
  });

  it('metering: calls in a transaction go to the shared counter', async () => {
    const counted = counting(shared);
    const meter = createLeasedMeter(counted, { hotMs: 60_000 });
    await store.withTransaction(async (session) => {
      await meter.tryConsume({ ...use, limit: 10, session });
    });
    expect(counted.writes).toBe(1);
    expect(await shared.used('ws_a', 'api-requests', now)).toBe(1);
    await meter.close();
  });
});
