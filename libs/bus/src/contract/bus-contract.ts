import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ConsumerOptions, Delivery, DeliveryHandler, EventBus, EventEnvelope } from '../port.js';

/** What a contract run needs from an adapter: a fresh bus per test, and how to clean up. */
export interface BusUnderTest {
  bus: EventBus;
  /**
   * Another bus on the same backend (another connection, as another process would have). When
   * absent, the tests that want a second bus use `bus` again.
   */
  reopen?: () => Promise<EventBus>;
  /** Closes what `open` opened; must tolerate a bus the test already closed. */
  cleanup(): Promise<void>;
}

/** Polls until `check` holds; the message says what was awaited and what was seen. */
async function until(check: () => boolean, what: string, seen?: () => unknown, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${seen ? `; seen: ${JSON.stringify(seen())}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

function tag(): string {
  return randomUUID().replace(/-/g, '').slice(0, 12);
}

interface Recorder {
  deliveries: Delivery[];
  ids(): string[];
  handler: DeliveryHandler;
}

/** Records every delivery, then runs `behave` (which may throw to nak, or hang). */
function recorder(behave: (delivery: Delivery) => Promise<void> | void = () => undefined): Recorder {
  const deliveries: Delivery[] = [];
  return {
    deliveries,
    ids: () => deliveries.map((d) => d.event.id),
    handler: async (delivery) => {
      deliveries.push(delivery);
      await behave(delivery);
    },
  };
}

/**
 * The event bus contract: every adapter must pass it. Each test uses its own subjects and
 * durables, so adapters backed by one server can share it across tests.
 */
export function describeBusContract(adapterName: string, open: () => Promise<BusUnderTest>): void {
  describe(`event bus contract (${adapterName})`, () => {
    let ctx: BusUnderTest;
    let extraBuses: EventBus[];
    /** Handlers told to hang are released after each test, so nothing dangles. */
    let gates: Array<() => void>;
    let t: string;

    const subject = (...rest: string[]): string => ['planning', `t${t}`, ...rest].join('.');
    const durable = (name = 'd'): string => `${name}_${t}`;
    const event = (subj: string, id: string = randomUUID(), data: Record<string, unknown> = {}): EventEnvelope => ({
      id,
      type: 'test.happened',
      subject: subj,
      source: 'contract',
      occurredAt: new Date().toISOString(),
      workspaceId: 'ws_1',
      actor: { type: 'user', id: 'usr_1' },
      data,
    });
    const hang = (): Promise<void> => new Promise((resolve) => gates.push(resolve));
    const secondBus = async (): Promise<EventBus> => {
      if (!ctx.reopen) return ctx.bus;
      const bus = await ctx.reopen();
      extraBuses.push(bus);
      return bus;
    };
    const options = (overrides: Partial<ConsumerOptions> = {}): ConsumerOptions => ({
      durable: durable(),
      filterSubjects: [subject('>')],
      ackWaitMs: 30_000,
      nakDelayMs: 50,
      concurrency: 1,
      stopGraceMs: 5_000,
      ...overrides,
    });

    beforeEach(async () => {
      t = tag();
      extraBuses = [];
      gates = [];
      ctx = await open();
    });

    afterEach(async () => {
      for (const release of gates) release();
      for (const bus of extraBuses) await bus.close();
      await ctx.cleanup();
    });

    it('publish: a consumer receives the event and its headers', async () => {
      const sent = event(subject('task', 'created'), undefined, { taskId: 'tsk_1', changed: ['status'] });
      const headers = {
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        tracestate: 'vendor=1',
        'x-request-id': 'req_1',
      };
      const result = await ctx.bus.publish(sent, headers);
      expect(result).toEqual({ duplicate: false });
      const rec = recorder();
      const consumer = await ctx.bus.consume(options(), rec.handler);
      await until(() => rec.deliveries.length === 1, 'one delivery');
      await consumer.stop();
      expect(rec.deliveries[0]).toEqual({ event: sent, headers, deliveryCount: 1 });
    });

    it('publish: the same id twice is stored once and the second publish reports a duplicate', async () => {
      const first = event(subject('task', 'updated'));
      expect(await ctx.bus.publish(first)).toEqual({ duplicate: false });
      expect(await ctx.bus.publish({ ...first, data: { again: true } })).toEqual({ duplicate: true });
      const marker = event(subject('task', 'marker'));
      await ctx.bus.publish(marker);
      const rec = recorder();
      const consumer = await ctx.bus.consume(options(), rec.handler);
      await until(() => rec.ids().includes(marker.id), 'the marker', rec.ids);
      await consumer.stop();
      expect(rec.ids()).toEqual([first.id, marker.id]);
      expect(rec.deliveries[0]?.event.data).toEqual({});
    });

    it('publish: refuses events without an id, with an invalid subject or outside the bus subjects', async () => {
      await expect(ctx.bus.publish(event(subject('x'), ''))).rejects.toMatchObject({ code: 'invalid-input' });
      await expect(ctx.bus.publish(event(`${subject('x')}.*`))).rejects.toMatchObject({ code: 'invalid-input' });
      await expect(ctx.bus.publish(event(`elsewhere.t${t}.x`))).rejects.toMatchObject({ code: 'invalid-input' });
      await expect(ctx.bus.publish(event(subject('x')), { 'Nats-Msg-Id': 'x' })).rejects.toMatchObject({
        code: 'invalid-input',
      });
    });

    it('consume: a handler that throws gets the message again with deliveryCount 2', async () => {
      const sent = event(subject('task', 'created'));
      await ctx.bus.publish(sent);
      const rec = recorder((d) => {
        if (d.deliveryCount === 1) throw new Error('transient failure');
      });
      const consumer = await ctx.bus.consume(options(), rec.handler);
      await until(() => rec.deliveries.length >= 2, 'a redelivery', () => rec.deliveries.length);
      const marker = event(subject('task', 'marker'));
      await ctx.bus.publish(marker);
      await until(() => rec.ids().includes(marker.id), 'the marker', rec.ids);
      await consumer.stop();
      expect(rec.deliveries.map((d) => [d.event.id, d.deliveryCount])).toEqual([
        [sent.id, 1],
        [sent.id, 2],
        [marker.id, 1],
      ]);
    });

    it('consume: a delivery not acknowledged within ackWaitMs is redelivered', async () => {
      const sent = event(subject('task', 'created'));
      await ctx.bus.publish(sent);
      const rec = recorder((d) => (d.deliveryCount === 1 ? hang() : undefined));
      const consumer = await ctx.bus.consume(options({ ackWaitMs: 400, concurrency: 2, stopGraceMs: 0 }), rec.handler);
      await until(() => rec.deliveries.length >= 2, 'a redelivery after the ack wait', () => rec.deliveries.length);
      await consumer.stop();
      expect(rec.deliveries.slice(0, 2).map((d) => [d.event.id, d.deliveryCount])).toEqual([
        [sent.id, 1],
        [sent.id, 2],
      ]);
    });

    it('consume: maxDeliver stops redelivering a message that keeps failing', async () => {
      const poison = event(subject('task', 'poison'));
      await ctx.bus.publish(poison);
      const rec = recorder((d) => {
        if (d.event.id === poison.id) throw new Error('always fails');
      });
      const consumer = await ctx.bus.consume(options({ maxDeliver: 2, nakDelayMs: 0 }), rec.handler);
      await until(() => rec.deliveries.length >= 2, 'two deliveries', () => rec.deliveries.length);
      const marker = event(subject('task', 'marker'));
      await ctx.bus.publish(marker);
      await until(() => rec.ids().includes(marker.id), 'the marker', rec.ids);
      // Give a wrongly scheduled third delivery the chance to show up.
      await new Promise((r) => setTimeout(r, 300));
      await consumer.stop();
      expect(rec.deliveries.filter((d) => d.event.id === poison.id).map((d) => d.deliveryCount)).toEqual([1, 2]);
    });

    it('consume: a consumer stopped before acking hands the message to the next consumer of the durable', async () => {
      const sent = event(subject('task', 'created'));
      await ctx.bus.publish(sent);
      const first = recorder(() => hang());
      const c1 = await ctx.bus.consume(options({ stopGraceMs: 0 }), first.handler);
      await until(() => first.deliveries.length === 1, 'the first delivery');
      await c1.stop();
      // ackWaitMs is 30 s: only the stop can have handed the message back in time.
      const other = await secondBus();
      const second = recorder();
      const c2 = await other.consume(options({ stopGraceMs: 0 }), second.handler);
      await until(() => second.deliveries.length === 1, 'the redelivery to the next consumer');
      await c2.stop();
      expect(second.deliveries.map((d) => [d.event.id, d.deliveryCount])).toEqual([[sent.id, 2]]);
    });

    it('consume: stop waits for a running handler within stopGraceMs and its ack counts', async () => {
      const sent = event(subject('task', 'created'));
      await ctx.bus.publish(sent);
      let finished = false;
      const first = recorder(async () => {
        await new Promise((r) => setTimeout(r, 100));
        finished = true;
      });
      const c1 = await ctx.bus.consume(options({ stopGraceMs: 10_000 }), first.handler);
      await until(() => first.deliveries.length === 1, 'the first delivery');
      await c1.stop();
      expect(finished).toBe(true);
      const marker = event(subject('task', 'marker'));
      await ctx.bus.publish(marker);
      const second = recorder();
      const c2 = await (await secondBus()).consume(options(), second.handler);
      await until(() => second.ids().includes(marker.id), 'the marker', second.ids);
      await c2.stop();
      expect(second.ids()).toEqual([marker.id]);
    });

    it('consume: a durable resumes after its last ack and gets what was published while it was away', async () => {
      const before = event(subject('task', 'created'));
      await ctx.bus.publish(before);
      const rec = recorder();
      const c1 = await ctx.bus.consume(options(), rec.handler);
      await until(() => rec.deliveries.length === 1, 'the first event');
      await c1.stop();
      const away = [event(subject('task', 'updated')), event(subject('task', 'deleted'))];
      for (const e of away) await ctx.bus.publish(e);
      const c2 = await ctx.bus.consume(options(), rec.handler);
      await until(() => rec.deliveries.length >= 3, 'the events published while away', rec.ids);
      await c2.stop();
      expect(rec.ids()).toEqual([before.id, ...away.map((e) => e.id)]);
    });

    it('consume: a new durable receives events published before it existed', async () => {
      const sent = [event(subject('a')), event(subject('b'))];
      for (const e of sent) await ctx.bus.publish(e);
      const rec = recorder();
      const consumer = await ctx.bus.consume(options({ durable: durable('late') }), rec.handler);
      await until(() => rec.deliveries.length >= 2, 'both events', rec.ids);
      await consumer.stop();
      expect(rec.ids()).toEqual(sent.map((e) => e.id));
    });

    it('consume: two consumers of one durable share the work and no message reaches both', async () => {
      const slow = async (): Promise<void> => {
        await new Promise((r) => setTimeout(r, 15));
      };
      const a = recorder(slow);
      const b = recorder(slow);
      const ca = await ctx.bus.consume(options(), a.handler);
      const cb = await (await secondBus()).consume(options(), b.handler);
      const sent = Array.from({ length: 40 }, (_, i) => event(subject('task', 'created'), undefined, { i }));
      for (const e of sent) await ctx.bus.publish(e);
      const seen = (): Set<string> => new Set([...a.ids(), ...b.ids()]);
      await until(() => seen().size === sent.length, 'every message', () => seen().size);
      await Promise.all([ca.stop(), cb.stop()]);
      const firstDeliveries = [...a.deliveries, ...b.deliveries].filter((d) => d.deliveryCount === 1);
      expect(firstDeliveries.map((d) => d.event.id).sort()).toEqual(sent.map((e) => e.id).sort());
      expect(a.deliveries.length).toBeGreaterThan(0);
      expect(b.deliveries.length).toBeGreaterThan(0);
    });

    it('consume: filter subjects select by several subjects and wildcards', async () => {
      const all = {
        ax: event(subject('a', 'x')),
        axy: event(subject('a', 'x', 'y')),
        bcd: event(subject('b', 'c', 'd')),
        b: event(subject('b')),
        cx: event(subject('c', 'x')),
      };
      for (const e of Object.values(all)) await ctx.bus.publish(e);
      const marker = event(subject('a', 'end'));
      await ctx.bus.publish(marker);
      const several = recorder();
      const single = recorder();
      const c1 = await ctx.bus.consume(
        options({ durable: durable('several'), filterSubjects: [subject('a', '*'), subject('b', '>')] }),
        several.handler,
      );
      const c2 = await ctx.bus.consume(
        options({ durable: durable('single'), filterSubjects: [subject('*', 'x')] }),
        single.handler,
      );
      await until(() => several.ids().includes(marker.id), 'the marker', several.ids);
      await until(() => single.deliveries.length >= 2, 'the single-filter matches', single.ids);
      await Promise.all([c1.stop(), c2.stop()]);
      expect(several.deliveries.map((d) => d.event.subject)).toEqual([all.ax.subject, all.bcd.subject, marker.subject]);
      expect(single.deliveries.map((d) => d.event.subject)).toEqual([all.ax.subject, all.cx.subject]);
    });

    it('consume: one publisher’s messages reach a consumer with concurrency 1 in publish order', async () => {
      const sent = Array.from({ length: 30 }, (_, i) => event(subject('task', 'updated'), undefined, { i }));
      const rec = recorder(async (d) => {
        // Uneven handler times must not reorder anything.
        if ((d.event.data as { i: number }).i % 3 === 0) await new Promise((r) => setTimeout(r, 5));
      });
      const consumer = await ctx.bus.consume(options(), rec.handler);
      for (const e of sent) await ctx.bus.publish(e);
      await until(() => rec.deliveries.length >= sent.length, 'every message', () => rec.deliveries.length);
      await consumer.stop();
      expect(rec.ids()).toEqual(sent.map((e) => e.id));
    });

    it('consume: 500 messages under concurrency are each acknowledged exactly once', async () => {
      const sent = Array.from({ length: 500 }, (_, i) => event(subject('load', 'x'), `load-${t}-${i}`, { i }));
      const acked = new Map<string, number>();
      let running = 0;
      let maxRunning = 0;
      const consumer = await ctx.bus.consume(options({ concurrency: 8 }), async (d) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        try {
          await new Promise((r) => setTimeout(r, (d.event.data as { i: number }).i % 4));
        } finally {
          running--;
        }
        acked.set(d.event.id, (acked.get(d.event.id) ?? 0) + 1);
      });
      for (let i = 0; i < sent.length; i += 50) {
        await Promise.all(sent.slice(i, i + 50).map((e) => ctx.bus.publish(e)));
      }
      await until(() => acked.size === sent.length, 'every message', () => acked.size, 30_000);
      await consumer.stop();
      expect([...acked.values()].every((n) => n === 1)).toBe(true);
      expect(maxRunning).toBeGreaterThan(1);
      expect(maxRunning).toBeLessThanOrEqual(8);
    });

    it('lifecycle: ping answers; a closed bus refuses work and closes again quietly', async () => {
      await expect(ctx.bus.ping()).resolves.toBeUndefined();
      await ctx.bus.close();
      await expect(ctx.bus.publish(event(subject('x')))).rejects.toMatchObject({ code: 'unavailable' });
      await expect(ctx.bus.consume(options(), async () => undefined)).rejects.toMatchObject({ code: 'unavailable' });
      await expect(ctx.bus.ping()).rejects.toMatchObject({ code: 'unavailable' });
      await expect(ctx.bus.close()).resolves.toBeUndefined();
    });
  });
}
