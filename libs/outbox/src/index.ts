/**
 * The transactional outbox. A state change and its event are written in the same store
 * transaction; a relay publishes pending events to the bus with the event id as message id and
 * then deletes them (or, with a retention, marks them published). A crash anywhere loses nothing
 * (the event is in the store before the change is visible) and doubles nothing downstream (the
 * bus deduplicates by message id and consumers are idempotent by event id).
 *
 * The relay is off the request path: a commit only wakes it, and it runs once the current turn
 * of the event loop is over, so commits made together are published together, in batches of up
 * to 100 events at three store operations per batch (find, lease, delete). On a store no other
 * process writes (`DocumentStore.exclusive`: the embedded SQLite store) with one relay on the
 * collection, the relay takes no lease: two operations per batch (find, delete), since the only
 * other relay that could take the batch is this one's next pass, which runs after it. There,
 * without a retention, the outbox has no index of its own: every event in it is pending.
 */
import type { EventBus, EventEnvelope } from '@planning/bus';
import { newId } from '@planning/ids';
import { failpoint } from '@planning/runtime/failpoints';
import type { Collection, DocumentStore, IndexSpec, StoreSession, StoredDocument } from '@planning/store';
import { observeOutbox } from '@planning/telemetry';

export interface OutboxLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/** What a caller supplies; the outbox fills in id, source, subject and time. */
export interface NewEvent<TData extends Record<string, unknown> = Record<string, unknown>> {
  /** `<entity>.<verb>`, e.g. `workspace.created`. */
  type: string;
  workspaceId?: string;
  actor?: { type: string; id: string };
  data: TData;
}

interface OutboxDocument extends StoredDocument {
  event: EventEnvelope;
  headers: Record<string, string>;
  /** Present (true) until published; absent afterwards, so the pending index stays small. */
  pending?: true;
  leaseUntil?: Date;
  /** The relay pass that holds the lease. */
  leaseOwner?: string;
  publishedAt?: Date;
  attempts: number;
  createdAt: Date;
}

export interface OutboxOptions {
  store: DocumentStore;
  bus: EventBus;
  /** The owning service, e.g. `issues`: events go to `planning.<source>.<type>`. */
  source: string;
  logger: OutboxLogger;
  collection?: string;
  /** How often the relay looks for events nobody kicked it for (crash recovery). Default 1 s. */
  pollIntervalMs?: number;
  /**
   * How long a relay owns an event it is publishing before another relay (another replica, or
   * this service restarted after a crash) may take it. Short: a second publish is harmless
   * (the bus deduplicates by message id), a long wait after a crash is not. Default 3 s.
   */
  leaseMs?: number;
  /**
   * How long a published event is kept in the outbox. Default 0: deleted as soon as the bus has
   * it (the bus and the audit service keep the history), so the outbox holds only what is not
   * yet published.
   */
  retentionSeconds?: number;
  /** Current trace context as headers, carried with the event to its consumers. */
  traceHeaders?: () => Record<string, string>;
  clock?: () => Date;
}

export interface Outbox {
  /**
   * Records an event. Pass the transaction's session so the event commits (or not) with the
   * change it describes. Returns the complete envelope.
   */
  add<TData extends Record<string, unknown>>(
    event: NewEvent<TData>,
    options?: { session?: StoreSession },
  ): Promise<EventEnvelope<TData>>;
  /**
   * Runs `fn` in a store transaction and wakes the relay once it has committed. The usual way
   * to change state and record its events together.
   */
  transaction<R>(fn: (session: StoreSession) => Promise<R>): Promise<R>;
  /** Wakes the relay now (after a commit made outside `transaction`). */
  kick(): void;
  /** Events not yet published. */
  pendingCount(): Promise<number>;
  /** Publishes everything pending now; resolves when the outbox is empty or publishing fails. */
  flush(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Subject of an event type for a service: `planning.issues.workspace.created`. */
export function subjectFor(source: string, type: string): string {
  return `planning.${source}.${type}`;
}

/** Events one relay pass leases and publishes at once. */
const BATCH = 100;

/**
 * The relays started on each exclusive store, by collection: with one, it needs no lease; a
 * second on the same collection (tests start two, as two replicas would) turns leasing back on
 * for both.
 */
const relaysOn = new WeakMap<DocumentStore, Map<string, number>>();

export async function createOutbox(options: OutboxOptions): Promise<Outbox> {
  const clock = options.clock ?? (() => new Date());
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  const leaseMs = options.leaseMs ?? 3_000;
  const collectionName = options.collection ?? 'outbox';
  const collection: Collection<OutboxDocument> = options.store.collection<OutboxDocument>(collectionName);
  const relays = options.store.exclusive === true ? (relaysOn.get(options.store) ?? new Map<string, number>()) : undefined;
  if (relays !== undefined) relaysOn.set(options.store, relays);
  /** Whether a pass must lease its batch: another process, or another relay here, may take it. */
  const leasing = (): boolean => relays === undefined || (relays.get(collectionName) ?? 0) - (registered ? 1 : 0) > 0;
  /** Counted among the store's relays (between start and stop). */
  let registered = false;
  const retentionSeconds = options.retentionSeconds ?? 0;
  // An exclusive store that keeps nothing published holds only pending events: the relay walks
  // the collection in id order (the store's own id index), and a pending index would only be
  // written with every event and deleted with it again. Published events left by an earlier
  // retention keep it until they are gone (the walk would step over them at every pass): they
  // are the oldest (the relay publishes in id order), so the oldest event tells, without reading
  // a backlog of pending ones.
  const oldest =
    options.store.exclusive === true && retentionSeconds === 0 ? await collection.find({}, { sort: { _id: 1 }, limit: 1, projection: { pending: 1 } }) : undefined;
  const onlyPending = oldest !== undefined && (oldest.length === 0 || oldest[0]?.pending === true);
  const indexes: IndexSpec[] = onlyPending ? [] : [{ name: 'pending_order', keys: { pending: 1, _id: 1 } }];
  // Leases are looked up by owner only where other processes may share the outbox; an exclusive
  // store leases only while a second relay runs here, and then finds its few leased events
  // among the pending ones without this index (one index entry less per event written).
  if (options.store.exclusive !== true) indexes.push({ name: 'lease_owner', keys: { leaseOwner: 1 }, partialFilterExpression: { pending: true } });
  if (retentionSeconds > 0) indexes.push({ name: 'published_ttl', keys: { publishedAt: 1 }, expireAfterSeconds: retentionSeconds });
  await collection.createIndexes(indexes);
  if (onlyPending) await collection.dropIndexes(['pending_order']);

  let timer: NodeJS.Timeout | undefined;
  let unobserve: (() => void) | undefined;
  let running = false;
  let pass: Promise<void> | undefined;
  let again = false;
  let woken = false;

  /** Publishes one batch, in order; returns how many events the batch found. */
  const publishBatch = async (): Promise<number> => {
    const now = clock();
    const free = { $or: [{ leaseUntil: { $exists: false } }, { leaseUntil: { $lte: now } }] };
    if (!leasing()) {
      // Nobody else publishes from this collection: publish the batch and delete it (or mark it
      // published). A crash in between leaves it pending for the next start, as with a lease.
      const batch = await collection.find({ pending: true }, { sort: { _id: 1 }, limit: BATCH });
      if (batch.length === 0) return 0;
      failpoint('outbox.before-publish');
      for (const doc of batch) await options.bus.publish(doc.event, doc.headers);
      failpoint('outbox.after-publish');
      const done = { _id: { $in: batch.map((d) => d._id) } };
      if (retentionSeconds > 0) await collection.updateMany(done, { $set: { publishedAt: clock() }, $unset: { pending: '', leaseUntil: '', leaseOwner: '' } });
      else await collection.deleteMany(done);
      return batch.length;
    }
    const found = await collection.find({ pending: true, ...free }, { sort: { _id: 1 }, limit: BATCH });
    if (found.length === 0) return 0;
    // Lease the batch so a second relay (another replica, or this service restarted after a
    // crash) leaves it alone; when another relay got some of it first, publish only ours.
    const owner = newId('lease');
    const ids = found.map((d) => d._id);
    const leased = await collection.updateMany(
      { _id: { $in: ids }, pending: true, ...free },
      { $set: { leaseUntil: new Date(now.getTime() + leaseMs), leaseOwner: owner }, $inc: { attempts: 1 } },
    );
    const mine = leased.matchedCount === found.length ? found : await collection.find({ leaseOwner: owner, pending: true }, { sort: { _id: 1 } });
    if (mine.length === 0) return found.length;
    failpoint('outbox.before-publish');
    for (const doc of mine) await options.bus.publish(doc.event, doc.headers);
    failpoint('outbox.after-publish');
    const published = { _id: { $in: mine.map((d) => d._id) }, leaseOwner: owner };
    if (retentionSeconds > 0) {
      await collection.updateMany(published, { $set: { publishedAt: clock() }, $unset: { pending: '', leaseUntil: '', leaseOwner: '' } });
    } else {
      await collection.deleteMany(published);
    }
    return found.length;
  };

  const drainOnce = async (): Promise<void> => {
    while ((await publishBatch()) === BATCH) {
      // A full batch: there may be more.
    }
  };

  const runPass = (): Promise<void> => {
    if (pass) {
      again = true;
      return pass;
    }
    pass = (async () => {
      try {
        do {
          again = false;
          await drainOnce();
        } while (again);
      } catch (err) {
        options.logger.warn({ err }, 'outbox relay could not publish; will retry');
        throw err;
      } finally {
        pass = undefined;
      }
    })();
    return pass;
  };

  const schedule = (): void => {
    if (!running) return;
    timer = setTimeout(() => {
      runPass()
        .catch(() => undefined)
        .finally(schedule);
    }, pollIntervalMs);
    timer.unref?.();
  };

  const outbox: Outbox = {
    async add(event, addOptions) {
      const envelope: EventEnvelope<typeof event.data> = {
        id: newId('evt'),
        type: event.type,
        subject: subjectFor(options.source, event.type),
        source: options.source,
        occurredAt: clock().toISOString(),
        ...(event.workspaceId !== undefined ? { workspaceId: event.workspaceId } : {}),
        ...(event.actor !== undefined ? { actor: event.actor } : {}),
        data: event.data,
      };
      await collection.insertOne(
        {
          _id: envelope.id,
          event: envelope as EventEnvelope,
          headers: options.traceHeaders?.() ?? {},
          pending: true,
          attempts: 0,
          createdAt: clock(),
        },
        addOptions?.session ? { session: addOptions.session } : undefined,
      );
      if (!addOptions?.session) outbox.kick();
      return envelope;
    },
    async transaction(fn) {
      const result = await options.store.withTransaction(fn);
      failpoint('outbox.after-commit');
      outbox.kick();
      return result;
    },
    kick() {
      if (!running || woken) return;
      // After the current turn: the request that committed answers first, and commits made in
      // the same turn share one pass.
      woken = true;
      setImmediate(() => {
        woken = false;
        if (running) runPass().catch(() => undefined);
      });
    },
    pendingCount: () => collection.countDocuments({ pending: true }),
    flush: () => runPass(),
    async start() {
      running = true;
      if (relays !== undefined && !registered) {
        registered = true;
        relays.set(collectionName, (relays.get(collectionName) ?? 0) + 1);
      }
      // planning.outbox.pending and planning.outbox.lag, read from the store at each collection.
      unobserve = observeOutbox(options.source, async () => {
        const [pending, oldest] = await Promise.all([
          collection.countDocuments({ pending: true }),
          collection.find({ pending: true }, { sort: { _id: 1 }, limit: 1 }),
        ]);
        const createdAt = oldest[0]?.createdAt;
        return { pending, oldestAgeSeconds: createdAt ? (clock().getTime() - createdAt.getTime()) / 1000 : 0 };
      });
      // Whatever a crashed predecessor left behind goes out first.
      runPass().catch(() => undefined);
      schedule();
    },
    async stop() {
      running = false;
      if (relays !== undefined && registered) {
        registered = false;
        relays.set(collectionName, (relays.get(collectionName) ?? 1) - 1);
      }
      unobserve?.();
      if (timer) clearTimeout(timer);
      await pass?.catch(() => undefined);
    },
  };
  return outbox;
}
