import { afterEach, describe, expect, it } from 'vitest';
import { createInProcessBus, type EventBus, type EventEnvelope } from '@planning/bus';
import { configureFailpoints } from '@planning/runtime/failpoints';
import { createEmbeddedStore, type DocumentStore, type EmbeddedCollection } from '@planning/store';
import { createOutbox, subjectFor, type Outbox } from './index.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

interface Harness {
  store: DocumentStore;
  bus: EventBus;
  outbox: Outbox;
  received: EventEnvelope[];
}

const open: Harness[] = [];

async function harness(
  options: { start?: boolean; bus?: EventBus; store?: DocumentStore; leaseMs?: number; pollIntervalMs?: number } = {},
): Promise<Harness> {
  const store = options.store ?? createEmbeddedStore();
  const bus = options.bus ?? (await createInProcessBus());
  const received: EventEnvelope[] = [];
  await bus.consume({ durable: `test-${open.length}`, filterSubjects: ['planning.>'] }, async (d) => {
    received.push(d.event);
  });
  const outbox = await createOutbox({
    store,
    bus,
    source: 'issues',
    logger: quiet,
    pollIntervalMs: options.pollIntervalMs ?? 50,
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
  });
  if (options.start !== false) await outbox.start();
  const h = { store, bus, outbox, received };
  open.push(h);
  return h;
}

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

afterEach(async () => {
  configureFailpoints(undefined);
  for (const h of open.splice(0)) {
    await h.outbox.stop();
    await h.bus.close();
    await h.store.close();
  }
});

describe('outbox: events commit with the change', () => {
  it('outbox: an event added in a committed transaction is published with its id, subject and source', async () => {
    const h = await harness();
    const things = h.store.collection('things');
    const event = await h.outbox.transaction(async (session) => {
      await things.insertOne({ _id: 't1', n: 1 }, { session });
      return h.outbox.add({ type: 'thing.created', workspaceId: 'ws_1', data: { subject: { type: 'thing', id: 't1' } } }, { session });
    });
    await until(() => h.received.length === 1);
    expect(h.received[0]).toEqual(event);
    expect(event.subject).toBe(subjectFor('issues', 'thing.created'));
    expect(event.source).toBe('issues');
    expect(event.id).toMatch(/^evt_/);
    expect(await h.outbox.pendingCount()).toBe(0);
  });

  it('outbox: a transaction that throws leaves neither the change nor the event', async () => {
    const h = await harness();
    const things = h.store.collection('things');
    await expect(
      h.outbox.transaction(async (session) => {
        await things.insertOne({ _id: 't1' }, { session });
        await h.outbox.add({ type: 'thing.created', data: {} }, { session });
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    await h.outbox.flush();
    expect(await things.countDocuments({})).toBe(0);
    expect(await h.outbox.pendingCount()).toBe(0);
    expect(h.received).toHaveLength(0);
  });

  it('outbox: the trace context of the request that made the change travels with the event', async () => {
    const store = createEmbeddedStore();
    const bus = await createInProcessBus();
    const headers: Record<string, string>[] = [];
    await bus.consume({ durable: 'trace', filterSubjects: ['planning.>'] }, async (d) => {
      headers.push(d.headers);
    });
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const outbox = await createOutbox({ store, bus, source: 'issues', logger: quiet, traceHeaders: () => ({ traceparent }) });
    await outbox.start();
    await outbox.add({ type: 'thing.created', data: {} });
    await until(() => headers.length === 1);
    expect(headers[0]).toMatchObject({ traceparent });
    await outbox.stop();
    await bus.close();
    await store.close();
  });

  it('outbox: events are published in the order they were added', async () => {
    const h = await harness();
    for (let i = 0; i < 20; i++) await h.outbox.add({ type: 'thing.changed', data: { i } });
    await until(() => h.received.length === 20);
    expect(h.received.map((e) => e.data.i)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});

describe('outbox: crashes lose nothing and double nothing', () => {
  it('outbox: a relay that fails before publishing leaves the event pending, and the next pass publishes it', async () => {
    // A lease of 0: the failed attempt's claim on the event lapses at once.
    const h = await harness({ start: false, leaseMs: 0 });
    configureFailpoints('outbox.before-publish=throw');
    await h.outbox.add({ type: 'thing.created', data: {} });
    await expect(h.outbox.flush()).rejects.toThrow(/failpoint/);
    expect(await h.outbox.pendingCount()).toBe(1);
    expect(h.received).toHaveLength(0);
    configureFailpoints(undefined);
    const again = await createOutbox({ store: h.store, bus: h.bus, source: 'issues', logger: quiet, leaseMs: 0 });
    await again.flush();
    await until(() => h.received.length === 1);
    expect(await h.outbox.pendingCount()).toBe(0);
  });

  it('outbox: a relay that fails after publishing republishes, and the bus drops the duplicate', async () => {
    const h = await harness({ start: false, leaseMs: 0 });
    configureFailpoints('outbox.after-publish=throw');
    await h.outbox.add({ type: 'thing.created', data: {} });
    await expect(h.outbox.flush()).rejects.toThrow(/failpoint/);
    configureFailpoints(undefined);
    const again = await createOutbox({ store: h.store, bus: h.bus, source: 'issues', logger: quiet, leaseMs: 0 });
    await again.flush();
    await until(() => h.received.length >= 1);
    // Give a duplicate every chance to arrive before counting.
    await new Promise((r) => setTimeout(r, 200));
    expect(h.received).toHaveLength(1);
    expect(await h.outbox.pendingCount()).toBe(0);
  });

  it('outbox: two relays on one store publish each event once', async () => {
    const store = createEmbeddedStore();
    const bus = await createInProcessBus();
    const a = await harness({ store, bus });
    const b = await createOutbox({ store, bus, source: 'issues', logger: quiet, pollIntervalMs: 50 });
    await b.start();
    for (let i = 0; i < 100; i++) await a.outbox.add({ type: 'thing.changed', data: { i } });
    await until(() => a.received.length >= 100);
    await new Promise((r) => setTimeout(r, 200));
    await b.stop();
    expect(new Set(a.received.map((e) => e.id)).size).toBe(100);
    expect(a.received).toHaveLength(100);
  });
});

describe('outbox: leases only where another relay could take the batch', () => {
  /** A store that another process shares (MongoDB's case): the same SQLite store, not exclusive. */
  const shared = (store: DocumentStore): DocumentStore =>
    new Proxy(store, { get: (target, key) => (key === 'exclusive' ? false : Reflect.get(target, key, target)) });
  const leased = async (store: DocumentStore) =>
    (await store.collection('outbox').find({})).map((d) => ({ owner: d.leaseOwner !== undefined, attempts: d.attempts }));

  it('outbox: on an exclusive store with one relay, a pass takes no lease (no write before publishing)', async () => {
    // No polling pass in between: each flush below is the pass that meets the failpoint.
    const h = await harness({ pollIntervalMs: 60_000 });
    expect(h.store.exclusive).toBe(true);
    configureFailpoints('outbox.before-publish=throw');
    await h.outbox.add({ type: 'thing.created', data: {} }, { session: undefined });
    await expect(h.outbox.flush()).rejects.toThrow(/failpoint/);
    expect(await leased(h.store)).toEqual([{ owner: false, attempts: 0 }]);
    configureFailpoints(undefined);
    await h.outbox.flush();
    await until(() => h.received.length === 1);
    expect(await h.outbox.pendingCount()).toBe(0);
  });

  it('outbox: a second relay on the same exclusive store turns leasing on for both, and off again when it stops', async () => {
    const store = createEmbeddedStore();
    const bus = await createInProcessBus();
    const a = await harness({ store, bus, pollIntervalMs: 60_000 });
    const b = await createOutbox({ store, bus, source: 'issues', logger: quiet, pollIntervalMs: 60_000 });
    await b.start();
    configureFailpoints('outbox.before-publish=throw');
    await a.outbox.add({ type: 'thing.created', data: {} }, { session: undefined });
    await expect(a.outbox.flush()).rejects.toThrow(/failpoint/);
    expect(await leased(store)).toEqual([{ owner: true, attempts: 1 }]);
    await b.stop();
    await store.collection('outbox').updateMany({}, { $unset: { leaseUntil: '', leaseOwner: '' } });
    configureFailpoints('outbox.before-publish=throw');
    await expect(a.outbox.flush()).rejects.toThrow(/failpoint/);
    expect(await leased(store)).toEqual([{ owner: false, attempts: 1 }]);
    configureFailpoints(undefined);
    await a.outbox.flush();
    await until(() => a.received.length === 1);
  });

  it('outbox: on a store other processes may share, every pass leases its batch', async () => {
    const h = await harness({ store: shared(createEmbeddedStore()), pollIntervalMs: 60_000 });
    configureFailpoints('outbox.before-publish=throw');
    await h.outbox.add({ type: 'thing.created', data: {} }, { session: undefined });
    await expect(h.outbox.flush()).rejects.toThrow(/failpoint/);
    expect(await leased(h.store)).toEqual([{ owner: true, attempts: 1 }]);
    configureFailpoints(undefined);
  });
});

describe('outbox: what it keeps', () => {
  it('outbox: published events are deleted, so the outbox holds only what is pending', async () => {
    const h = await harness();
    for (let i = 0; i < 250; i++) await h.outbox.add({ type: 'thing.changed', data: { i } });
    await until(() => h.received.length === 250);
    await h.outbox.flush();
    expect(await h.store.collection('outbox').countDocuments({})).toBe(0);
  });

  it('outbox: on an exclusive store without a retention it has no index of its own; published events left by a retention keep the pending index until they are gone', async () => {
    const store = createEmbeddedStore();
    const bus = await createInProcessBus();
    const relayQuery = () => (store.collection('outbox') as EmbeddedCollection).explain({ pending: true }, { sort: { _id: 1 }, limit: 100 });
    // With a retention: published events stay, so the relay needs the pending index.
    const keeping = await createOutbox({ store, bus, source: 'issues', logger: quiet, retentionSeconds: 3600, pollIntervalMs: 60_000 });
    await keeping.start();
    await keeping.add({ type: 'thing.created', data: {} });
    await keeping.flush();
    await keeping.stop();
    expect(await relayQuery()).toMatchObject({ plan: 'IXSCAN', index: 'pending_order' });
    // Without one, while that published event is still there: the index stays.
    const first = await createOutbox({ store, bus, source: 'issues', logger: quiet, pollIntervalMs: 60_000 });
    expect(await relayQuery()).toMatchObject({ plan: 'IXSCAN', index: 'pending_order' });
    await first.stop();
    await store.collection('outbox').deleteMany({ pending: { $exists: false } });
    // Once only pending events are left: no index; the relay walks the ids, in order, unsorted.
    const received: EventEnvelope[] = [];
    await bus.consume({ durable: 'only-pending', filterSubjects: ['planning.>'] }, async (d) => {
      received.push(d.event);
    });
    const outbox = await createOutbox({ store, bus, source: 'issues', logger: quiet, pollIntervalMs: 60_000 });
    const explained = await relayQuery();
    expect(explained).toMatchObject({ plan: 'COLLSCAN', inMemorySort: false });
    expect(explained.index).toBeUndefined();
    const added: string[] = [];
    for (let i = 0; i < 150; i++) added.push((await outbox.add({ type: 'thing.changed', data: { i } })).id);
    await outbox.start();
    await outbox.flush();
    // (The new consumer also gets the stream's earlier thing.created.)
    const changed = () => received.filter((e) => e.type === 'thing.changed');
    await until(() => changed().length === 150);
    expect(changed().map((e) => e.id)).toEqual([...added].sort());
    expect(await outbox.pendingCount()).toBe(0);
    await outbox.stop();
    await bus.close();
    await store.close();
  });

  it('outbox: with a retention, published events are kept (marked published) until it runs out', async () => {
    const store = createEmbeddedStore();
    const bus = await createInProcessBus();
    const outbox = await createOutbox({ store, bus, source: 'issues', logger: quiet, retentionSeconds: 3600 });
    await outbox.start();
    await outbox.add({ type: 'thing.created', data: {} });
    await outbox.flush();
    const kept = await store.collection('outbox').find({});
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatchObject({ publishedAt: expect.any(Date) });
    expect(await outbox.pendingCount()).toBe(0);
    await outbox.stop();
    await bus.close();
    await store.close();
  });

  it('outbox: commits made in one turn are published by one pass after the turn, not inside the request', async () => {
    const h = await harness();
    const things = h.store.collection('things');
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        h.outbox.transaction(async (session) => {
          await things.insertOne({ _id: `t${i}` }, { session });
          await h.outbox.add({ type: 'thing.created', data: { i } }, { session });
        }),
      ),
    );
    // The commits have resolved and nothing is published yet: the relay waits for the next turn.
    expect(h.received).toHaveLength(0);
    await until(() => h.received.length === 30);
  });
});
