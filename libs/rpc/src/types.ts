import type { DescMessage, DescService, MessageInitShape, MessageShape } from '@bufbuild/protobuf';
import type { Metadata } from '@grpc/grpc-js';
import type { Context } from '@opentelemetry/api';
import type { ResponseView } from './views.js';
import type { Principal } from './principal.js';

/** What a handler knows about the call besides the request. */
export interface CallContext {
  /** The verified caller. */
  principal: Principal;
  /** When the caller stops waiting; pass it on to outgoing calls (see `callOptionsFrom`). */
  deadline: Date | undefined;
  /** Aborts when the caller cancels, the deadline passes or the server is force-stopped. */
  signal: AbortSignal;
  /** The incoming metadata, as received. */
  metadata: Metadata;
  /** The OpenTelemetry context of the server span (already active while the handler runs). */
  traceContext: Context;
}

interface MethodTypes {
  input: DescMessage;
  output: DescMessage;
}

export type UnaryHandler<M extends MethodTypes> = (
  request: MessageShape<M['input']>,
  ctx: CallContext,
) => Promise<MessageInitShape<M['output']>>;

/** One handler per RPC of the service, keyed by the method's lowerCamelCase local name. */
export type ServiceImplementation<S extends DescService> = {
  [K in keyof S['method']]: UnaryHandler<S['method'][K]>;
};

export interface RpcCallOptions {
  /** Who the call is made for; defaults to the client's `defaultPrincipal`. */
  principal?: Principal;
  /** Deadline relative to now. */
  deadlineMs?: number;
  /** Absolute deadline, e.g. an incoming call's; the earlier of this and `deadlineMs` applies. */
  deadline?: Date | undefined;
  /** Cancels the call; it then fails with `unavailable`. */
  signal?: AbortSignal;
  /**
   * Asks for the response rendered by this view (see views.ts): a transport that can run it where
   * the response is made resolves with a `RenderedResponse`, any other with the message.
   */
  view?: ResponseView<never>;
}

/** One method per RPC, named by the method's lowerCamelCase local name, plus `close()`. */
export type RpcClient<S extends DescService> = {
  [K in keyof S['method']]: (
    request: MessageInitShape<S['method'][K]['input']>,
    options?: RpcCallOptions,
  ) => Promise<MessageShape<S['method'][K]['output']>>;
} & {
  /** Releases this client's share of the channel; later calls fail with `unavailable`. */
  close(): void;
};

/** Call options that carry an incoming call's principal, remaining deadline and cancellation onward. */
export function callOptionsFrom(ctx: CallContext, overrides: RpcCallOptions = {}): RpcCallOptions {
  return { principal: ctx.principal, deadline: ctx.deadline, signal: ctx.signal, ...overrides };
}

/** The earlier of the explicit deadlines; the default only when the caller gives none. */
export function resolveDeadline(options: RpcCallOptions, defaultDeadlineMs: number): Date {
  const now = Date.now();
  const candidates: number[] = [];
  if (options.deadlineMs !== undefined) candidates.push(now + options.deadlineMs);
  if (options.deadline !== undefined) candidates.push(options.deadline.getTime());
  return new Date(candidates.length > 0 ? Math.min(...candidates) : now + defaultDeadlineMs);
}

/** The largest gRPC message either side sends or accepts (import previews carry up to 10 MB of payload). */
export const MAX_MESSAGE_BYTES = 16 * 1_048_576;
