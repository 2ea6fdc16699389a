import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';

/** Header carriers trace context can be read from: a plain record or a `get`/`keys` object (NATS `MsgHdrs`, `Map`, fetch `Headers`). */
export type TraceCarrier =
  | Readonly<Record<string, string | string[] | undefined>>
  | {
      get(key: string): string | string[] | null | undefined;
      keys(): Iterable<string>;
    };

function isGetterCarrier(carrier: TraceCarrier): carrier is Extract<TraceCarrier, { keys(): Iterable<string> }> {
  return typeof (carrier as { get?: unknown }).get === 'function' && typeof (carrier as { keys?: unknown }).keys === 'function';
}

const carrierGetter: TextMapGetter<TraceCarrier> = {
  keys(carrier) {
    return isGetterCarrier(carrier) ? [...carrier.keys()] : Object.keys(carrier);
  },
  get(carrier, key) {
    if (isGetterCarrier(carrier)) {
      const value = carrier.get(key);
      // NATS MsgHdrs answers "" for a missing header.
      return value === '' || value === null ? undefined : value;
    }
    const record = carrier as Readonly<Record<string, string | string[] | undefined>>;
    if (record[key] !== undefined) return record[key];
    // HTTP-style records may keep the sender's capitalisation.
    const lower = key.toLowerCase();
    const match = Object.keys(record).find((k) => k.toLowerCase() === lower);
    return match === undefined ? undefined : record[match];
  },
};

/** The W3C trace headers (`traceparent`, `tracestate`, `baggage`) of the given context (default: the active one). */
export function injectTraceHeaders(ctx: Context = context.active()): Record<string, string> {
  const headers: Record<string, string> = {};
  propagation.inject(ctx, headers);
  return headers;
}

/**
 * Runs fn inside the trace context carried by headers. The context is extracted onto the root
 * context, not the active one: a message without trace headers starts its own trace instead of
 * joining whatever span happened to be active in the consumer loop.
 */
export function withExtractedContext<T>(headers: TraceCarrier | undefined, fn: () => T): T {
  const extracted = headers ? propagation.extract(ROOT_CONTEXT, headers, carrierGetter) : ROOT_CONTEXT;
  return context.with(extracted, fn);
}

const tracer = () => trace.getTracer('planning-bus');

/** What identifies a message for its producer and consumer spans. */
export interface MessageInfo {
  /** `messaging.system`: `nats`, or `in-process`. */
  system: string;
  /** The subject, e.g. `planning.issues.task.created` (`messaging.destination.name`). */
  subject: string;
  /** The event id, also the bus message id (`messaging.message.id`). */
  messageId: string;
}

/**
 * Publishes in a PRODUCER span `send <subject>`. Its parent is the context the message's headers
 * carry (an outbox stores the context of the request that recorded the event, and publishes
 * later), else the active one. `publish` gets the headers to send: the given ones with the
 * producer span's context in place of the stored one, so consumers continue from this span.
 */
export async function withProducerSpan<T>(
  message: MessageInfo,
  headers: Readonly<Record<string, string>> | undefined,
  publish: (headers: Record<string, string>) => Promise<T>,
): Promise<T> {
  const stored = headers && Object.keys(headers).some((k) => k.toLowerCase() === 'traceparent');
  const parent = stored ? propagation.extract(ROOT_CONTEXT, headers, carrierGetter) : context.active();
  const span = tracer().startSpan(
    `send ${message.subject}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': message.system,
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'publish',
        'messaging.destination.name': message.subject,
        'messaging.message.id': message.messageId,
      },
    },
    parent,
  );
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers ?? {})) {
    if (!['traceparent', 'tracestate'].includes(key.toLowerCase())) out[key] = value;
  }
  const spanContext = trace.setSpan(parent, span);
  propagation.inject(spanContext, out);
  return endSpanAfter(span, () => context.with(spanContext, () => publish(out)));
}

/** Runs fn, marks the span failed when it throws, and ends the span either way. */
async function endSpanAfter<T>(span: Span, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}

/**
 * Runs a message handler in a CONSUMER span `process <subject>` that continues the trace the
 * message carries (its producer span is the parent, and linked, as the messaging conventions
 * advise), and marks the span as failed when the handler throws.
 */
export function withConsumerSpan<T>(
  message: MessageInfo & { consumerGroup: string; deliveryCount?: number },
  headers: TraceCarrier | undefined,
  fn: () => Promise<T>,
): Promise<T> {
  const parent = headers ? propagation.extract(ROOT_CONTEXT, headers, carrierGetter) : ROOT_CONTEXT;
  const producer = trace.getSpanContext(parent);
  return context.with(parent, () =>
    tracer().startActiveSpan(
      `process ${message.subject}`,
      {
        kind: SpanKind.CONSUMER,
        links: producer ? [{ context: producer }] : [],
        attributes: {
          'messaging.system': message.system,
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'process',
          'messaging.destination.name': message.subject,
          'messaging.consumer.group.name': message.consumerGroup,
          'messaging.message.id': message.messageId,
          ...(message.deliveryCount !== undefined ? { 'messaging.message.delivery_count': message.deliveryCount } : {}),
        },
      },
      (span) => endSpanAfter(span, fn),
    ),
  );
}
