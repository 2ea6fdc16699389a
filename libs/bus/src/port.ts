/**
 * The event bus port: publish with a message id, durable consumers, ack/nak, redelivery.
 * Delivery is at least once; consumers are idempotent by event id.
 */

/** An event as it travels on the bus. Payloads carry ids and changed field names, never titles or bodies. */
export interface EventEnvelope<TData extends Record<string, unknown> = Record<string, unknown>> {
  /** Unique event id; also the bus message id, so a republish is deduplicated. */
  id: string;
  /** Short type, e.g. `workspace.created`. */
  type: string;
  /** Bus subject, `planning.<service>.<entity>.<verb>`. */
  subject: string;
  /** The service that wrote the event. */
  source: string;
  occurredAt: string;
  workspaceId?: string;
  actor?: { type: string; id: string };
  data: TData;
}

export interface PublishResult {
  /** True when the bus had already seen this message id (the publish was a no-op). */
  duplicate: boolean;
}

export interface Delivery {
  event: EventEnvelope;
  /** Headers that travelled with the message (trace context among them). */
  headers: Record<string, string>;
  /** 1 on the first delivery, 2 on the first redelivery, ... */
  deliveryCount: number;
}

export interface ConsumerOptions {
  /** Durable consumer name: a consumer that stops and comes back resumes where it left off. */
  durable: string;
  /** Subjects this consumer receives; NATS-style wildcards (`*`, `>`) allowed. */
  filterSubjects: readonly string[];
  /** A delivery not acknowledged within this time is redelivered. Default 30 s. */
  ackWaitMs?: number;
  /** Delay before a nak'ed message is redelivered. Default 1 s. */
  nakDelayMs?: number;
  /** Give up on a message after this many deliveries (-1: never). Default -1. */
  maxDeliver?: number;
  /**
   * How many deliveries this consumer's handler runs at once, so one slow message does not hold
   * up the rest. Default 4. Use 1 to see one publisher's messages in publish order.
   */
  concurrency?: number;
  /**
   * How long `stop()` waits for running handlers to finish before giving their messages back to
   * the durable (the handlers' later results are then ignored). Default 5 s.
   */
  stopGraceMs?: number;
}

/** The defaults of {@link ConsumerOptions}, shared by every adapter. */
export const CONSUMER_DEFAULTS = {
  ackWaitMs: 30_000,
  nakDelayMs: 1_000,
  maxDeliver: -1,
  concurrency: 4,
  stopGraceMs: 5_000,
} as const;

/**
 * A message handler: resolving acknowledges the message, throwing naks it (it comes back after
 * `nakDelayMs`).
 */
export type DeliveryHandler = (delivery: Delivery) => Promise<void>;

export interface Consumer {
  /**
   * Stops receiving. Waits up to `stopGraceMs` for running handlers; unacknowledged messages are
   * redelivered to the next consumer of the durable. Safe to call twice.
   */
  stop(): Promise<void>;
}

export interface EventBus {
  /** The adapter's technology (`in-process`, `nats`). */
  readonly kind: string;
  /** Publishes with `event.id` as the message id. Resolves once the bus has stored the message. */
  publish(event: EventEnvelope, headers?: Record<string, string>): Promise<PublishResult>;
  consume(options: ConsumerOptions, handler: DeliveryHandler): Promise<Consumer>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Does `subject` match a NATS-style filter (`planning.*.workspace.>`)? */
export function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    const token = f[i];
    if (token === '>') return s.length > i;
    if (i >= s.length) return false;
    if (token !== '*' && token !== s[i]) return false;
  }
  return f.length === s.length;
}
