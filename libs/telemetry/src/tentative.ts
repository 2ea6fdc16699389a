/**
 * Traces kept only when the work they record turned out to matter. A periodic job (the claim
 * sweeper) runs every few seconds and usually finds nothing to do; a trace per run would bury the
 * runs that did something. `traceIfWorked` starts such a run as a tentative root span: its spans
 * in this process are held back until the root ends, then exported if the run did work (or
 * failed) and dropped otherwise. Calls and events it makes carry the trace context marked "not
 * sampled", so other processes record nothing for a run that may be dropped.
 */
import {
  ROOT_CONTEXT,
  SpanStatusCode,
  TraceFlags,
  context,
  createContextKey,
  trace,
  type Context,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';

const TENTATIVE = createContextKey('planning.tentative-trace');
/** Set on a tentative root span that is to be kept. */
const KEEP_ATTRIBUTE = 'planning.trace.kept';
/** Spans held per tentative trace; more are dropped (a run that large is kept without them). */
const MAX_HELD_SPANS = 512;
/** Undecided traces older than this are forgotten (their root never ended). */
const MAX_OPEN_MS = 10 * 60_000;
/** How many decisions are remembered for spans that end after their root. */
const MAX_DECISIONS = 1_000;

interface OpenTrace {
  rootSpanId: string;
  openedAt: number;
  held: ReadableSpan[];
}

const open = new Map<string, OpenTrace>();
const decided = new Map<string, boolean>();

function remember(traceId: string, keep: boolean): void {
  decided.set(traceId, keep);
  if (decided.size > MAX_DECISIONS) decided.delete(decided.keys().next().value as string);
}

/**
 * Wraps the exporting span processors: spans of tentative traces wait for their root's decision,
 * every other span passes straight through.
 */
export class TentativeSpanProcessor implements SpanProcessor {
  constructor(private readonly inner: readonly SpanProcessor[]) {}

  onStart(span: Span, parentContext: Context): void {
    for (const p of this.inner) p.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    const { traceId, spanId } = span.spanContext();
    const pending = open.get(traceId);
    if (!pending) {
      const decision = decided.get(traceId);
      if (decision !== false) this.forward(span);
      return;
    }
    if (spanId !== pending.rootSpanId) {
      if (pending.held.length < MAX_HELD_SPANS) pending.held.push(span);
      if (Date.now() - pending.openedAt > MAX_OPEN_MS) open.delete(traceId);
      return;
    }
    open.delete(traceId);
    const keep = span.attributes[KEEP_ATTRIBUTE] === true;
    remember(traceId, keep);
    if (!keep) return;
    for (const held of pending.held) this.forward(held);
    this.forward(span);
  }

  private forward(span: ReadableSpan): void {
    for (const p of this.inner) p.onEnd(span);
  }

  async forceFlush(): Promise<void> {
    await Promise.all(this.inner.map((p) => p.forceFlush()));
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.inner.map((p) => p.shutdown()));
  }
}

/** Is the context part of a tentative trace? */
export function isTentative(ctx: Context = context.active()): boolean {
  return ctx.getValue(TENTATIVE) === true;
}

/**
 * A propagator that writes a tentative trace's context as not sampled, so the receiving process
 * (a gRPC peer, an event consumer) records nothing for it.
 */
export function tentativeAwarePropagator(inner: TextMapPropagator): TextMapPropagator {
  return {
    inject(ctx: Context, carrier: unknown, setter: TextMapSetter<unknown>) {
      const spanContext = trace.getSpanContext(ctx);
      if (spanContext && isTentative(ctx)) {
        inner.inject(trace.setSpanContext(ctx, { ...spanContext, traceFlags: TraceFlags.NONE }), carrier, setter);
        return;
      }
      inner.inject(ctx, carrier, setter);
    },
    extract(ctx: Context, carrier: unknown, getter: TextMapGetter<unknown>) {
      return inner.extract(ctx, carrier, getter);
    },
    fields: () => inner.fields(),
  };
}

/**
 * Runs `fn` as the root span `name` of a tentative trace, kept only when `worked(result)` is true
 * or `fn` throws. Without a recording tracer it simply runs `fn`.
 */
export function traceIfWorked<T>(
  name: string,
  fn: () => Promise<T>,
  worked: (result: T) => boolean,
  attributes: Record<string, string | number | boolean> = {},
): Promise<T> {
  const parent = ROOT_CONTEXT.setValue(TENTATIVE, true);
  return trace.getTracer('planning').startActiveSpan(name, { root: true, attributes }, parent, async (span) => {
    if (span.isRecording()) {
      const { traceId, spanId } = span.spanContext();
      open.set(traceId, { rootSpanId: spanId, openedAt: Date.now(), held: [] });
    }
    try {
      const result = await fn();
      if (worked(result)) span.setAttribute(KEEP_ATTRIBUTE, true);
      return result;
    } catch (err) {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute(KEEP_ATTRIBUTE, true);
      throw err;
    } finally {
      span.end();
    }
  });
}
