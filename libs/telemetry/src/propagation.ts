import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
  type Context,
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

/**
 * Runs a message handler in a CONSUMER span that continues the trace the message carries (the
 * producer's context travels in its headers), and marks the span as failed when fn throws.
 */
export async function withConsumerSpan<T>(
  name: string,
  headers: TraceCarrier | undefined,
  attributes: Record<string, string | number | boolean>,
  fn: () => Promise<T>,
): Promise<T> {
  return withExtractedContext(headers, () =>
    trace.getTracer('planning-bus').startActiveSpan(name, { kind: SpanKind.CONSUMER, attributes }, async (span) => {
      try {
        return await fn();
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw err;
      } finally {
        span.end();
      }
    }),
  );
}
