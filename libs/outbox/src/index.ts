/**
 * The transactional outbox. A state change and its event are written in the same store
 * transaction; a relay publishes pending events to the bus with the event id as message id and
 * marks them published. A crash anywhere loses nothing (the event is in the store before the
 * change is visible) and doubles nothing downstream (the bus deduplicates by message id and
 * consumers are idempotent by event id).
 */
import type { EventBus, EventEnvelope } from '@planning/bus';
import { newId } from '@planning/ids';
import { failpoint } from '@planning/runtime/failpoints';
import type { Collection, DocumentStore, StoreSession, StoredDocument } from '@planning/store';

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
  /** Published events are removed after this long (housekeeping). Default 7 days. */
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

export async function createOutbox(options: OutboxOptions): Promise<Outbox> {
  const clock = options.clock ?? (() => new Date());
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  const leaseMs = options.leaseMs ?? 3_000;
  const collection: Collection<OutboxDocument> = options.store.collection<OutboxDocument>(
    options.collection ?? 'outbox',
  );
  await collection.createIndexes([
    { name: 'pending_order', keys: { pending: 1, _id: 1 } },
    { name: 'published_ttl', keys: { publishedAt: 1 }, expireAfterSeconds: options.retentionSeconds ?? 7 * 86_400 },
  ]);

  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let pass: Promise<void> | undefined;
  let again = false;

  const publishOne = async (doc: OutboxDocument): Promise<boolean> => {
    const now = clock();
    // Take a lease so a second relay (another replica of the service) leaves this event alone.
    const leased = await collection.findOneAndUpdate(
      { _id: doc._id, pending: true, $or: [{ leaseUntil: { $exists: false } }, { leaseUntil: { $lte: now } }] },
      { $set: { leaseUntil: new Date(now.getTime() + leaseMs) }, $inc: { attempts: 1 } },
    );
    if (!leased) return true;
    failpoint('outbox.before-publish');
    await options.bus.publish(leased.event, leased.headers);
    failpoint('outbox.after-publish');
    await collection.updateOne(
      { _id: leased._id },
      { $set: { publishedAt: clock() }, $unset: { pending: '', leaseUntil: '' } },
    );
    return true;
  };

  const drainOnce = async (): Promise<void> => {
    for (;;) {
      const batch = await collection.find({ pending: true }, { sort: { _id: 1 }, limit: 100 });
      if (batch.length === 0) return;
      for (const doc of batch) {
        await publishOne(doc);
      }
      if (batch.length < 100) return;
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
      if (!running) return;
      runPass().catch(() => undefined);
    },
    pendingCount: () => collection.countDocuments({ pending: true }),
    flush: () => runPass(),
    async start() {
      running = true;
      // Whatever a crashed predecessor left behind goes out first.
      runPass().catch(() => undefined);
      schedule();
    },
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      await pass?.catch(() => undefined);
    },
  };
  return outbox;
}
