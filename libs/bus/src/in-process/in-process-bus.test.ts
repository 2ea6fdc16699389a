import { describe, expect, it } from 'vitest';
import { describeBusContract } from '../contract/bus-contract.js';
import type { Delivery, EventEnvelope } from '../port.js';
import { createInProcessBus, type DroppedMessage } from './in-process-bus.js';

describeBusContract('in-process', async () => {
  const bus = createInProcessBus();
  return { bus, cleanup: () => bus.close() };
});

const event = (id: string, subject = 'planning.test.thing.created'): EventEnvelope => ({
  id,
  type: 'thing.created',
  subject,
  source: 'test',
  occurredAt: '2026-01-01T00:00:00.000Z',
  data: {},
});

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('in-process bus', () => {
  it('dedupe: an id is accepted again once the duplicate window has passed', async () => {
    let now = 1_000_000;
    const bus = createInProcessBus({ duplicateWindowMs: 60_000, clock: () => now });
    expect(await bus.publish(event('e1'))).toEqual({ duplicate: false });
    now += 59_000;
    expect(await bus.publish(event('e1'))).toEqual({ duplicate: true });
    now += 2_000;
    expect(await bus.publish(event('e1'))).toEqual({ duplicate: false });
    await bus.close();
  });

  it('deliveries: each delivery gets its own copy of the event', async () => {
    const bus = createInProcessBus();
    const seen: Delivery[] = [];
    await bus.publish(event('e1'));
    const consumer = await bus.consume(
      { durable: 'copy', filterSubjects: ['planning.>'], nakDelayMs: 0 },
      async (d) => {
        seen.push(d);
        if (d.deliveryCount === 1) {
          d.event.data.mutated = true;
          throw new Error('again');
        }
      },
    );
    await until(() => seen.length === 2);
    await consumer.stop();
    expect(seen[1]?.event.data).toEqual({});
    await bus.close();
  });

  it('retention: messages every durable has acknowledged are dropped; a newcomer starts after them', async () => {
    const bus = createInProcessBus();
    const first: string[] = [];
    const c1 = await bus.consume({ durable: 'early', filterSubjects: ['planning.>'] }, async (d) => {
      first.push(d.event.id);
    });
    await bus.publish(event('e1'));
    await until(() => first.length === 1);
    await c1.stop();
    await bus.publish(event('e2'));
    const late: string[] = [];
    const c2 = await bus.consume({ durable: 'late', filterSubjects: ['planning.>'] }, async (d) => {
      late.push(d.event.id);
    });
    await until(() => late.length === 1);
    await c2.stop();
    // e1 was dropped once `early` acked it; e2 is still held for `early`, which has not seen it.
    expect(late).toEqual(['e2']);
    await bus.close();
  });

  it('retention: maxMessages caps what is kept for durables that are away', async () => {
    const bus = createInProcessBus({ maxMessages: 3 });
    for (let i = 1; i <= 5; i++) await bus.publish(event(`e${i}`));
    const got: string[] = [];
    const consumer = await bus.consume({ durable: 'd', filterSubjects: ['planning.>'] }, async (d) => {
      got.push(d.event.id);
    });
    await until(() => got.length === 3);
    await consumer.stop();
    expect(got).toEqual(['e3', 'e4', 'e5']);
    await bus.close();
  });

  it('retention: a cap that drops what a durable has not handled says so; dropping what every durable finished does not', async () => {
    let now = 1_000_000;
    const dropped: DroppedMessage[] = [];
    const bus = createInProcessBus({ maxMessages: 2, maxAgeMs: 60_000, clock: () => now, onDrop: (d) => dropped.push(d) });
    // No durable yet: the cap trims silently (nobody is owed these messages).
    for (let i = 1; i <= 3; i++) await bus.publish(event(`pre${i}`));
    expect(dropped).toEqual([]);
    // `fast` handles everything; `slow` only audit subjects and never finishes (it hangs).
    const fast = await bus.consume({ durable: 'fast', filterSubjects: ['planning.>'] }, async () => {});
    let release!: () => void;
    const hang = new Promise<void>((r) => (release = r));
    const slow = await bus.consume({ durable: 'slow', filterSubjects: ['planning.audit.>'], concurrency: 1 }, () => hang);
    await bus.publish(event('a1', 'planning.audit.thing.created'));
    await bus.publish(event('a2', 'planning.audit.thing.created'));
    await bus.publish(event('t1'));
    await bus.publish(event('t2'));
    await until(() => dropped.length >= 2);
    // a1 (in flight at slow) and a2 (not yet delivered to slow) were dropped by the cap; t1 was
    // not slow's to handle and fast had finished it, so its drop is not reported.
    expect(dropped.map((d) => [d.subject, d.reason, d.durables])).toEqual([
      ['planning.audit.thing.created', 'max-messages', ['slow']],
      ['planning.audit.thing.created', 'max-messages', ['slow']],
    ]);
    // The age cap: a message older than maxAgeMs that slow never got goes with reason max-age.
    await bus.publish(event('a3', 'planning.audit.thing.created'));
    now += 61_000;
    await bus.publish(event('t3'));
    await until(() => dropped.length >= 3);
    expect(dropped.slice(2).map((d) => [d.subject, d.reason, d.durables])).toEqual([['planning.audit.thing.created', 'max-age', ['slow']]]);
    release();
    await fast.stop();
    await slow.stop();
    await bus.close();
  });

  it('close: does not wait past stopGraceMs for a hanging handler, then refuses publishes', async () => {
    const bus = createInProcessBus();
    let release: () => void = () => undefined;
    let started = false;
    await bus.publish(event('e1'));
    await bus.consume({ durable: 'd', filterSubjects: ['planning.>'], stopGraceMs: 0 }, async () => {
      started = true;
      await new Promise<void>((r) => (release = r));
    });
    await until(() => started);
    await bus.close();
    release();
    await expect(bus.publish(event('e2'))).rejects.toMatchObject({ code: 'unavailable' });
  });
});
