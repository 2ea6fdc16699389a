import type { Consumer, ConsumerOptions, Delivery, DeliveryHandler, EventBus, EventEnvelope, PublishResult } from '../port.js';
import {
  DEFAULT_DUPLICATE_WINDOW_MS,
  DEFAULT_SUBJECTS,
  closedError,
  copyHeaders,
  isValidFilter,
  matchesAny,
  resolveConsumerOptions,
  validateEnvelope,
  type ResolvedConsumerOptions,
} from '../options.js';
import { invalidInput } from '@planning/errors';

export interface InProcessBusOptions {
  /** A message id seen within this window is not stored again. Default 2 minutes (JetStream's default). */
  duplicateWindowMs?: number;
  /** Milliseconds since the epoch; for the duplicate window and retention. Default `Date.now`. */
  clock?: () => number;
  /** Subjects the bus carries (a publish outside them is refused, as JetStream would). Default `planning.>`. */
  subjects?: readonly string[];
  /** Hard cap on retained messages; the oldest go first, consumed or not. Default 100 000. */
  maxMessages?: number;
  /** Messages older than this are dropped, consumed or not. Default 24 h. */
  maxAgeMs?: number;
  /**
   * Called for each message a cap drops before every durable finished it: those durables never
   * see it. `durables` names them; `reason` is the cap that dropped it. Default: nothing.
   */
  onDrop?: (dropped: DroppedMessage) => void;
}

/** A message a retention cap dropped while durables still had to handle it. */
export interface DroppedMessage {
  subject: string;
  reason: 'max-messages' | 'max-age';
  /** The durables that had not finished with it (not delivered yet, or delivered and not acked). */
  durables: string[];
}

interface StoredMessage {
  seq: number;
  subject: string;
  /** The envelope as JSON, parsed afresh for each delivery so handlers never share an object. */
  payload: string;
  headers: Record<string, string>;
  storedAt: number;
}

/** A message of a durable that has been delivered at least once and is not finished. */
interface Outstanding {
  seq: number;
  deliveries: number;
  /** Identifies the current delivery; results of older deliveries may not nak it. */
  token: number;
  state: 'in-flight' | 'waiting' | 'ready';
  timer?: NodeJS.Timeout;
}

interface Durable {
  name: string;
  options: ResolvedConsumerOptions;
  /** Next stream sequence to deliver for the first time. */
  cursor: number;
  /** Keyed by seq; first deliveries happen in cursor order, so iteration order is seq order. */
  outstanding: Map<number, Outstanding>;
  /** Seqs due for redelivery, ascending. */
  ready: number[];
  consumers: ConsumerRun[];
  nextConsumer: number;
}

interface ActiveDelivery {
  seq: number;
  token: number;
  /** Set when `stop()` gave the message back; the handler's result is then ignored. */
  released: boolean;
  done: Promise<void>;
}

interface ConsumerRun {
  durable: Durable;
  handler: DeliveryHandler;
  concurrency: number;
  stopGraceMs: number;
  active: Set<ActiveDelivery>;
  stopping: boolean;
}

/**
 * The embedded event bus: one process, at-least-once, with the semantics of the JetStream adapter
 * (message-id dedupe, durable consumers that share work and resume, ack wait, nak delay,
 * max deliver). Messages live in memory only.
 *
 * Retention: a message is dropped once every durable the bus knows has finished with it (acked,
 * filtered out or given up on), and in any case when it is older than `maxAgeMs` or beyond
 * `maxMessages`. A durable that first appears later therefore sees only what is still retained;
 * with no durable yet, everything is retained (up to the caps).
 */
export function createInProcessBus(options: InProcessBusOptions = {}): EventBus {
  const duplicateWindowMs = options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
  const now = options.clock ?? Date.now;
  const subjects = [...(options.subjects ?? DEFAULT_SUBJECTS)];
  const maxMessages = options.maxMessages ?? 100_000;
  const maxAgeMs = options.maxAgeMs ?? 24 * 60 * 60_000;
  for (const subject of subjects) {
    if (!isValidFilter(subject)) throw invalidInput('subjects', `invalid subject '${subject}'`);
  }

  /** Retained messages; seqs are contiguous from `log[0].seq` because only the head is dropped. */
  const log: StoredMessage[] = [];
  let nextSeq = 1;
  /** Message id → time stored; insertion order is time order, so expiry pops from the front. */
  const seen = new Map<string, number>();
  const durables = new Map<string, Durable>();
  let nextToken = 1;
  let closed = false;

  const headSeq = (): number => log[0]?.seq ?? nextSeq;
  const messageAt = (seq: number): StoredMessage | undefined => log[seq - headSeq()];

  function forgetExpiredIds(): void {
    const cutoff = now() - duplicateWindowMs;
    for (const [id, at] of seen) {
      if (at > cutoff) break;
      seen.delete(id);
    }
  }

  function prune(): void {
    let floor = Number.POSITIVE_INFINITY;
    if (durables.size === 0) floor = 0;
    for (const durable of durables.values()) {
      const firstOutstanding = durable.outstanding.keys().next();
      floor = Math.min(floor, firstOutstanding.done ? durable.cursor : firstOutstanding.value);
    }
    const ageCutoff = now() - maxAgeMs;
    while (log.length > 0) {
      const head = log[0]!;
      if (head.seq < floor) log.shift();
      else if (log.length > maxMessages || head.storedAt < ageCutoff) {
        log.shift();
        reportDrop(head, log.length >= maxMessages ? 'max-messages' : 'max-age');
      } else break;
    }
  }

  /** A cap dropped `message` although some durable was not done with it. */
  function reportDrop(message: StoredMessage, reason: DroppedMessage['reason']): void {
    if (!options.onDrop) return;
    const waiting: string[] = [];
    for (const durable of durables.values()) {
      const pending = durable.outstanding.has(message.seq) || (durable.cursor <= message.seq && matchesAny(durable.options.filterSubjects, message.subject));
      if (pending) waiting.push(durable.name);
    }
    if (waiting.length === 0) return;
    options.onDrop({ subject: message.subject, reason, durables: waiting });
  }

  function clearTimer(entry: Outstanding): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = undefined;
  }

  function finish(durable: Durable, entry: Outstanding): void {
    clearTimer(entry);
    durable.outstanding.delete(entry.seq);
  }

  function makeReady(durable: Durable, entry: Outstanding): void {
    clearTimer(entry);
    entry.state = 'ready';
    const at = durable.ready.findIndex((s) => s > entry.seq);
    if (at === -1) durable.ready.push(entry.seq);
    else durable.ready.splice(at, 0, entry.seq);
    schedulePump(durable);
  }

  function startTimer(entry: Outstanding, ms: number, fire: () => void): void {
    clearTimer(entry);
    entry.timer = setTimeout(fire, ms);
    // Pending redeliveries alone should not keep a process alive.
    entry.timer.unref();
  }

  /** The next message for this durable: a due redelivery first, then the next new one. */
  function nextMessage(durable: Durable): { message: StoredMessage; entry: Outstanding } | undefined {
    const { maxDeliver } = durable.options;
    while (durable.ready.length > 0) {
      const seq = durable.ready.shift()!;
      const entry = durable.outstanding.get(seq);
      if (!entry || entry.state !== 'ready') continue;
      const message = messageAt(seq);
      if (!message || (maxDeliver > 0 && entry.deliveries >= maxDeliver)) {
        finish(durable, entry);
        continue;
      }
      return { message, entry };
    }
    if (durable.cursor < headSeq()) durable.cursor = headSeq();
    while (durable.cursor < nextSeq) {
      const message = messageAt(durable.cursor);
      durable.cursor++;
      if (!message || !matchesAny(durable.options.filterSubjects, message.subject)) continue;
      const entry: Outstanding = { seq: message.seq, deliveries: 0, token: 0, state: 'ready' };
      durable.outstanding.set(message.seq, entry);
      return { message, entry };
    }
    return undefined;
  }

  function pickConsumer(durable: Durable): ConsumerRun | undefined {
    const n = durable.consumers.length;
    for (let i = 0; i < n; i++) {
      const run = durable.consumers[(durable.nextConsumer + i) % n]!;
      if (!run.stopping && run.active.size < run.concurrency) {
        durable.nextConsumer = (durable.nextConsumer + i + 1) % n;
        return run;
      }
    }
    return undefined;
  }

  const pumpScheduled = new Set<Durable>();

  /** Pumps on a microtask so publishes and acks never run handlers re-entrantly. */
  function schedulePump(durable: Durable): void {
    if (pumpScheduled.has(durable)) return;
    pumpScheduled.add(durable);
    queueMicrotask(() => {
      pumpScheduled.delete(durable);
      pump(durable);
    });
  }

  function pump(durable: Durable): void {
    if (closed) return;
    for (;;) {
      const run = pickConsumer(durable);
      if (!run) break;
      const next = nextMessage(durable);
      if (!next) break;
      deliver(run, next.message, next.entry);
    }
    prune();
  }

  function deliver(run: ConsumerRun, message: StoredMessage, entry: Outstanding): void {
    const durable = run.durable;
    entry.deliveries++;
    entry.token = nextToken++;
    entry.state = 'in-flight';
    const token = entry.token;
    startTimer(entry, durable.options.ackWaitMs, () => {
      // No ack in time: redeliver, although the first handler may still be running.
      const current = durable.outstanding.get(entry.seq);
      if (current === entry && entry.token === token && entry.state === 'in-flight') makeReady(durable, entry);
    });
    const delivery: Delivery = {
      event: JSON.parse(message.payload) as EventEnvelope,
      headers: { ...message.headers },
      deliveryCount: entry.deliveries,
    };
    const active: ActiveDelivery = { seq: entry.seq, token, released: false, done: Promise.resolve() };
    active.done = (async () => {
      let ok = true;
      try {
        await run.handler(delivery);
      } catch {
        ok = false;
      }
      run.active.delete(active);
      if (active.released || closed) return;
      settle(durable, entry.seq, token, ok);
      schedulePump(durable);
    })();
    run.active.add(active);
  }

  function settle(durable: Durable, seq: number, token: number, ok: boolean): void {
    const entry = durable.outstanding.get(seq);
    if (!entry) return;
    if (ok) {
      // Like a JetStream ack, a late ack of an earlier delivery still settles the message.
      finish(durable, entry);
      return;
    }
    if (entry.token !== token || entry.state !== 'in-flight') return;
    const { nakDelayMs } = durable.options;
    if (nakDelayMs === 0) {
      makeReady(durable, entry);
      return;
    }
    entry.state = 'waiting';
    startTimer(entry, nakDelayMs, () => makeReady(durable, entry));
  }

  async function stopRun(run: ConsumerRun): Promise<void> {
    if (run.stopping) return;
    run.stopping = true;
    const durable = run.durable;
    const settled = Promise.all([...run.active].map((a) => a.done));
    if (run.active.size > 0 && run.stopGraceMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([settled, new Promise<void>((r) => (timer = setTimeout(r, run.stopGraceMs)))]);
      clearTimeout(timer);
    }
    for (const active of run.active) {
      active.released = true;
      const entry = durable.outstanding.get(active.seq);
      if (entry && entry.token === active.token && entry.state === 'in-flight') makeReady(durable, entry);
    }
    run.active.clear();
    const index = durable.consumers.indexOf(run);
    if (index !== -1) durable.consumers.splice(index, 1);
    schedulePump(durable);
  }

  return {
    kind: 'in-process',

    async publish(event: EventEnvelope, headers?: Record<string, string>): Promise<PublishResult> {
      if (closed) throw closedError('in-process');
      validateEnvelope(event, subjects);
      const copied = copyHeaders(headers);
      forgetExpiredIds();
      if (seen.has(event.id)) return { duplicate: true };
      const at = now();
      seen.set(event.id, at);
      log.push({ seq: nextSeq++, subject: event.subject, payload: JSON.stringify(event), headers: copied, storedAt: at });
      for (const durable of durables.values()) schedulePump(durable);
      if (durables.size === 0) prune();
      return { duplicate: false };
    },

    async consume(consumerOptions: ConsumerOptions, handler: DeliveryHandler): Promise<Consumer> {
      if (closed) throw closedError('in-process');
      const resolved = resolveConsumerOptions(consumerOptions);
      let durable = durables.get(resolved.durable);
      if (!durable) {
        durable = {
          name: resolved.durable,
          options: resolved,
          cursor: headSeq(),
          outstanding: new Map(),
          ready: [],
          consumers: [],
          nextConsumer: 0,
        };
        durables.set(durable.name, durable);
      } else {
        // The latest consumer's settings win, as a JetStream consumer update would.
        durable.options = resolved;
      }
      const run: ConsumerRun = {
        durable,
        handler,
        concurrency: resolved.concurrency,
        stopGraceMs: resolved.stopGraceMs,
        active: new Set(),
        stopping: false,
      };
      durable.consumers.push(run);
      schedulePump(durable);
      return { stop: () => stopRun(run) };
    },

    async ping(): Promise<void> {
      if (closed) throw closedError('in-process');
    },

    async close(): Promise<void> {
      if (closed) return;
      const runs = [...durables.values()].flatMap((d) => d.consumers);
      await Promise.all(runs.map((run) => stopRun(run)));
      closed = true;
      for (const durable of durables.values()) {
        for (const entry of durable.outstanding.values()) clearTimer(entry);
      }
      durables.clear();
      log.length = 0;
      seen.clear();
    },
  };
}
