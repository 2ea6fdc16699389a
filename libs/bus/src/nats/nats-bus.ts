import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type ConsumerConfig,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StreamInfo,
} from '@nats-io/jetstream';
import { errors as natsErrors, headers as natsHeaders, nanos, type MsgHdrs, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { ServiceError, invalidInput, isServiceError } from '@planning/errors';
import {
  DEFAULT_DUPLICATE_WINDOW_MS,
  DEFAULT_SUBJECTS,
  closedError,
  copyHeaders,
  isValidFilter,
  resolveConsumerOptions,
  sleep,
  validateEnvelope,
  type ResolvedConsumerOptions,
} from '../options.js';
import type { Consumer, ConsumerOptions, Delivery, DeliveryHandler, EventBus, EventEnvelope, PublishResult } from '../port.js';
import { passesClientFilters, planFilters, type FilterPlan } from './filter-plan.js';
import { miscountsRedeliveryToStalePull } from './server-version.js';

export interface NatsBusOptions {
  servers: string | string[];
  /** JetStream stream name. Default `PLANNING`. */
  stream?: string;
  /** Subjects the stream stores (merged into an existing stream's subjects). Default `planning.>`. */
  subjects?: string[];
  /** The stream's duplicate window for `Nats-Msg-Id`. Default 2 minutes. */
  duplicateWindowMs?: number;
  /** The stream's max age; 0 keeps messages until other limits drop them. Default 7 days. */
  maxAgeMs?: number;
  /** Connection name, shown in the server's monitoring. */
  name?: string;
  /** Time allowed for the first connection. Default 10 s. */
  connectTimeoutMs?: number;
  /** Timeout of one JetStream API call or publish ack. Default 5 s. */
  requestTimeoutMs?: number;
  /**
   * How long `publish()` and `consume()` keep trying through a disconnection or a server restart
   * before they fail with `unavailable`. Retrying a publish is safe: the message id makes a
   * repeated publish a no-op. Default 15 s.
   */
  retryTimeoutMs?: number;
  /**
   * How long one pull request waits on the server; also paces the idle heartbeats that detect a
   * lost consumer and the retry after a reconnect. Default 10 s, minimum 1 s.
   */
  pullExpiresMs?: number;
  /** Errors the bus recovers from itself (a consume loop restarting, an ack that could not be sent). Default: `console.warn`. */
  onError?: (err: unknown, context: string) => void;
}

/** The NATS JetStream bus; `connection` is exposed for diagnostics and failure-injection tests. */
export interface NatsEventBus extends EventBus {
  readonly kind: 'nats';
  readonly connection: NatsConnection;
  readonly stream: string;
}

const DEFAULT_MAX_AGE_MS = 7 * 24 * 60 * 60_000;

function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

function unavailable(message: string, cause: unknown): ServiceError {
  return isServiceError(cause) ? cause : new ServiceError('unavailable', message, {}, { cause });
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Headers as the port sees them: NATS' own (`Nats-Msg-Id`, ...) stay inside the adapter. */
/** A failure that may go away once the connection or JetStream is back (a timeout, no responders). */
function isTransient(err: unknown): boolean {
  return !(
    err instanceof JetStreamApiError ||
    err instanceof natsErrors.ClosedConnectionError ||
    err instanceof natsErrors.DrainingConnectionError ||
    err instanceof natsErrors.InvalidArgumentError ||
    err instanceof natsErrors.InvalidSubjectError ||
    err instanceof natsErrors.PermissionViolationError ||
    err instanceof natsErrors.AuthorizationError
  );
}

function plainHeaders(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h) return out;
  for (const key of h.keys()) {
    if (/^nats-/i.test(key)) continue;
    out[key] = h.get(key);
  }
  return out;
}

function sameFilters(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  const x = a ?? [];
  const y = b ?? [];
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/**
 * Connects to NATS, creates or updates the stream, and returns a bus over JetStream: publishes
 * carry the event id as `Nats-Msg-Id`, consumers are durable pull consumers with explicit ack.
 */
export async function createNatsBus(options: NatsBusOptions): Promise<NatsEventBus> {
  const streamName = options.stream ?? 'PLANNING';
  const subjects = [...(options.subjects ?? DEFAULT_SUBJECTS)];
  const duplicateWindowMs = options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
  const maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
  const requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
  const retryTimeoutMs = options.retryTimeoutMs ?? 15_000;
  const pullExpiresMs = Math.max(1_000, options.pullExpiresMs ?? 10_000);
  const onError =
    options.onError ?? ((err: unknown, context: string) => console.warn(`[bus:nats] ${context}:`, err));
  if (!/^[A-Za-z0-9_-]+$/.test(streamName)) throw invalidInput('stream', `invalid stream name '${streamName}'`);
  for (const subject of subjects) {
    if (!isValidFilter(subject)) throw invalidInput('subjects', `invalid subject '${subject}'`);
  }

  // Reconnect forever, backing off from 100 ms to 2 s (with jitter) over consecutive failed dials.
  let failedDials = 0;
  let connected = true;
  let onReconnect: Array<() => void> = [];
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: options.servers,
      name: options.name,
      timeout: options.connectTimeoutMs ?? 10_000,
      maxReconnectAttempts: -1,
      reconnectDelayHandler: () => {
        const base = Math.min(2_000, 100 * 2 ** Math.max(0, failedDials - 1));
        return base + Math.random() * base * 0.2;
      },
      // Notice a silently dead server within ~30 s rather than the default ~4 min.
      pingInterval: 10_000,
      maxPingOut: 3,
    });
  } catch (err) {
    throw unavailable(`cannot connect to NATS at ${String(options.servers)}`, err);
  }
  const wakeReconnectWaiters = (): void => {
    const waiters = onReconnect;
    onReconnect = [];
    for (const wake of waiters) wake();
  };
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') connected = false;
      else if (status.type === 'reconnecting') failedDials++;
      else if (status.type === 'reconnect') {
        connected = true;
        failedDials = 0;
        wakeReconnectWaiters();
      }
    }
  })()
    .catch(() => undefined)
    .finally(wakeReconnectWaiters);
  /** The client drops what is written while disconnected, so a publish waits for the connection. */
  function whenConnected(ms: number, signal?: AbortSignal): Promise<void> {
    if (connected || nc.isClosed() || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
      onReconnect.push(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Runs `attempt` until it succeeds, fails for good, or `budgetMs` has passed, waiting for the
   * connection between tries (requests written while disconnected are dropped by the client).
   */
  async function retrying<T>(budgetMs: number, attempt: (timeoutMs: number) => Promise<T>): Promise<T> {
    const deadline = Date.now() + budgetMs;
    for (let tries = 0; ; tries++) {
      await whenConnected(Math.max(0, deadline - Date.now()));
      try {
        return await attempt(Math.max(250, Math.min(requestTimeoutMs, deadline - Date.now())));
      } catch (err) {
        if (!isTransient(err) || closed || Date.now() >= deadline) throw err;
        await sleep(Math.min(1_000, 50 * 2 ** tries));
      }
    }
  }

  let jsm: JetStreamManager;
  let js: JetStreamClient;
  try {
    jsm = await jetstreamManager(nc, { timeout: requestTimeoutMs });
    js = jetstream(nc, { timeout: requestTimeoutMs });
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw unavailable('JetStream is not available on the NATS server (start nats-server with -js)', err);
  }

  async function ensureStream(): Promise<StreamInfo> {
    const duplicate_window = nanos(duplicateWindowMs);
    const max_age = nanos(maxAgeMs);
    let info: StreamInfo | undefined;
    try {
      info = await jsm.streams.info(streamName);
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    }
    if (!info) {
      try {
        return await jsm.streams.add({
          name: streamName,
          subjects,
          storage: StorageType.File,
          retention: RetentionPolicy.Limits,
          discard: DiscardPolicy.Old,
          duplicate_window,
          max_age,
        });
      } catch (err) {
        // Another process may have created it at the same moment; fall through to the update.
        info = await jsm.streams.info(streamName).catch(() => {
          throw err;
        });
      }
    }
    const current = info.config;
    const merged = [...new Set([...(current.subjects ?? []), ...subjects])];
    if (
      merged.length !== (current.subjects ?? []).length ||
      current.duplicate_window !== duplicate_window ||
      current.max_age !== max_age
    ) {
      info = await jsm.streams.update(streamName, { ...current, subjects: merged, duplicate_window, max_age });
    }
    return info;
  }

  let streamSubjects: string[];
  try {
    streamSubjects = (await ensureStream()).config.subjects ?? subjects;
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw unavailable(`cannot create or update the JetStream stream ${streamName}`, err);
  }

  async function ensureConsumer(o: ResolvedConsumerOptions, plan: FilterPlan): Promise<void> {
    const wanted: Partial<ConsumerConfig> = {
      durable_name: o.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(o.ackWaitMs),
      max_deliver: o.maxDeliver,
    };
    if (plan.filter_subjects) wanted.filter_subjects = plan.filter_subjects;
    else wanted.filter_subject = plan.filter_subject;
    let current: ConsumerConfig | undefined;
    try {
      current = (await jsm.consumers.info(streamName, o.durable)).config;
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    }
    if (!current) {
      try {
        await jsm.consumers.add(streamName, wanted);
        return;
      } catch (err) {
        // Created concurrently by another instance of the same durable: update it instead.
        current = (
          await jsm.consumers.info(streamName, o.durable).catch(() => {
            throw err;
          })
        ).config;
      }
    }
    const currentFilters = current.filter_subjects ?? (current.filter_subject ? [current.filter_subject] : []);
    const wantedFilters = plan.filter_subjects ?? (plan.filter_subject ? [plan.filter_subject] : []);
    const sameFilterKind = Boolean(current.filter_subjects?.length) === Boolean(plan.filter_subjects);
    if (
      current.ack_wait === wanted.ack_wait &&
      current.max_deliver === wanted.max_deliver &&
      sameFilterKind &&
      sameFilters(currentFilters, wantedFilters)
    ) {
      return;
    }
    // The last consumer's settings win. The update merges into the current config, so the
    // filter field not in use is cleared explicitly (a consumer may not have both).
    await jsm.consumers.update(streamName, o.durable, {
      ack_wait: wanted.ack_wait,
      max_deliver: wanted.max_deliver,
      filter_subject: plan.filter_subject,
      filter_subjects: plan.filter_subjects,
    });
  }

  let closed = false;
  const runs = new Set<NatsConsumerRun>();

  interface ActiveDelivery {
    msg: JsMsg;
    released: boolean;
    done: Promise<void>;
  }

  class NatsConsumerRun {
    private stopping = false;
    private readonly abort = new AbortController();
    private readonly active = new Set<ActiveDelivery>();
    private wake: (() => void) | undefined;
    private messages: ConsumerMessages | undefined;
    private loopDone: Promise<void> = Promise.resolve();
    private stopped: Promise<void> | undefined;

    constructor(
      private readonly o: ResolvedConsumerOptions,
      private readonly plan: FilterPlan,
      private readonly handler: DeliveryHandler,
    ) {}

    start(): void {
      this.loopDone = this.loop();
    }

    /** Pulls until stopped; a failed pull loop (server gone, consumer deleted) is rebuilt with backoff. */
    private async loop(): Promise<void> {
      let failures = 0;
      while (!this.stopping && !nc.isClosed()) {
        try {
          await whenConnected(pullExpiresMs, this.abort.signal);
          if (this.stopping) break;
          const consumer = await js.consumers.get(streamName, this.o.durable);
          // A small pull batch keeps few messages waiting in the client while their ack wait runs.
          const messages = await consumer.consume({ max_messages: this.o.concurrency, expires: pullExpiresMs });
          this.messages = messages;
          if (this.stopping) void messages.close();
          this.watch(messages);
          failures = 0;
          for await (const msg of messages) await this.receive(msg);
        } catch (err) {
          if (this.stopping || nc.isClosed()) break;
          onError(err, `consumer ${this.o.durable}: pull loop failed, retrying`);
          if (isApiError(err, JetStreamApiCodes.ConsumerNotFound) || isApiError(err, JetStreamApiCodes.StreamNotFound)) {
            await this.recreate();
          }
        } finally {
          this.messages = undefined;
        }
        if (this.stopping || nc.isClosed()) break;
        await sleep(Math.min(5_000, 100 * 2 ** failures++), this.abort.signal);
      }
    }

    /** The client library retries a vanished consumer forever but never recreates it; this does. */
    private watch(messages: ConsumerMessages): void {
      void (async () => {
        for await (const status of messages.status()) {
          if (status.type === 'consumer_not_found' || status.type === 'stream_not_found' || status.type === 'consumer_deleted') {
            await this.recreate();
          }
        }
      })().catch(() => undefined);
    }

    private async recreate(): Promise<void> {
      if (this.stopping || closed) return;
      try {
        await ensureStream();
        await ensureConsumer(this.o, this.plan);
      } catch (err) {
        onError(err, `consumer ${this.o.durable}: recreating the consumer failed`);
      }
    }

    private async receive(msg: JsMsg): Promise<void> {
      if (this.stopping) return this.giveBack(msg);
      if (!passesClientFilters(this.plan, msg.subject)) {
        // Only reachable on servers without `filter_subjects`: not ours, so settle it at once.
        msg.ack();
        return;
      }
      while (this.active.size >= this.o.concurrency && !this.stopping) {
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
      if (this.stopping) return this.giveBack(msg);
      this.dispatch(msg);
    }

    /**
     * Hands an unfinished message back to the durable. Servers before 2.10.15 would offer it to
     * this consumer's pull requests, still open on the server, and then miscount the redelivery;
     * delaying it until those requests have expired keeps `deliveryCount` right.
     */
    private giveBack(msg: JsMsg): void {
      const delay = miscountsRedeliveryToStalePull(nc.info?.version) ? pullExpiresMs + 250 : 0;
      try {
        if (delay > 0) msg.nak(delay);
        else msg.nak();
      } catch {
        // The connection is gone; the server redelivers after the ack wait.
      }
    }

    private dispatch(msg: JsMsg): void {
      let event: EventEnvelope;
      try {
        event = JSON.parse(new TextDecoder().decode(msg.data)) as EventEnvelope;
      } catch (err) {
        // Not an envelope: redelivering cannot help, so terminate it.
        onError(err, `consumer ${this.o.durable}: message ${msg.seq} on ${msg.subject} is not JSON; terminated`);
        msg.term();
        return;
      }
      const delivery: Delivery = { event, headers: plainHeaders(msg.headers), deliveryCount: msg.info.deliveryCount };
      const active: ActiveDelivery = { msg, released: false, done: Promise.resolve() };
      this.active.add(active);
      active.done = (async () => {
        let ok = true;
        try {
          await this.handler(delivery);
        } catch {
          ok = false;
        }
        this.active.delete(active);
        this.wake?.();
        if (active.released) return;
        try {
          if (ok) msg.ack();
          else if (this.o.nakDelayMs > 0) msg.nak(this.o.nakDelayMs);
          else msg.nak();
        } catch (err) {
          onError(err, `consumer ${this.o.durable}: could not ${ok ? 'ack' : 'nak'} message ${msg.seq}`);
        }
      })();
    }

    stop(): Promise<void> {
      this.stopped ??= this.doStop();
      return this.stopped;
    }

    private async doStop(): Promise<void> {
      this.stopping = true;
      this.abort.abort();
      this.wake?.();
      // Closing ends the iterator after the messages already buffered, which the loop gives back.
      await this.messages?.close().catch(() => undefined);
      await this.loopDone;
      if (this.active.size > 0 && this.o.stopGraceMs > 0) {
        await withTimeout(Promise.all([...this.active].map((a) => a.done)), this.o.stopGraceMs, 'stop').catch(
          () => undefined,
        );
      }
      for (const active of this.active) {
        active.released = true;
        this.giveBack(active.msg);
      }
      this.active.clear();
      runs.delete(this);
      // Acks and naks are fire-and-forget publishes; make sure they reached the server.
      if (!nc.isClosed()) await withTimeout(nc.flush(), requestTimeoutMs, 'flush').catch(() => undefined);
    }
  }

  return {
    kind: 'nats',
    connection: nc,
    stream: streamName,

    async publish(event: EventEnvelope, headers?: Record<string, string>): Promise<PublishResult> {
      if (closed) throw closedError('nats');
      validateEnvelope(event, subjects);
      const h = natsHeaders();
      for (const [key, value] of Object.entries(copyHeaders(headers))) h.set(key, value);
      const payload = JSON.stringify(event);
      try {
        // Retrying is safe: the message id makes a repeated publish a no-op (reported as a duplicate).
        const ack = await retrying(retryTimeoutMs, (timeout) =>
          js.publish(event.subject, payload, {
            msgID: event.id,
            headers: h,
            timeout,
            // JetStream answers "no responders" for a moment after a server restart.
            retries: 3,
          }),
        );
        return { duplicate: ack.duplicate };
      } catch (err) {
        if (err instanceof JetStreamApiError) {
          throw new ServiceError('internal', `JetStream refused the publish to ${event.subject}`, {}, { cause: err });
        }
        throw unavailable(`publishing ${event.subject} to NATS failed`, err);
      }
    },

    async consume(consumerOptions: ConsumerOptions, handler: DeliveryHandler): Promise<Consumer> {
      if (closed) throw closedError('nats');
      const o = resolveConsumerOptions(consumerOptions);
      const plan = planFilters(o.filterSubjects, nc.info?.version, streamSubjects);
      try {
        await retrying(retryTimeoutMs, () => ensureConsumer(o, plan));
      } catch (err) {
        throw unavailable(`cannot create or update the JetStream consumer ${o.durable}`, err);
      }
      const run = new NatsConsumerRun(o, plan, handler);
      runs.add(run);
      run.start();
      return { stop: () => run.stop() };
    },

    async ping(): Promise<void> {
      if (closed) throw closedError('nats');
      try {
        await withTimeout(nc.flush(), requestTimeoutMs, 'NATS flush');
        await jsm.streams.info(streamName);
      } catch (err) {
        throw unavailable('NATS JetStream is not reachable', err);
      }
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await Promise.all([...runs].map((run) => run.stop()));
      if (nc.isClosed()) return;
      try {
        await withTimeout(nc.drain(), requestTimeoutMs, 'NATS drain');
      } catch {
        // Draining needs the server; without it, just close.
      }
      if (!nc.isClosed()) await nc.close().catch(() => undefined);
    },
  };
}
