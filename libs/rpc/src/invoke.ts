/**
 * Running one handler the way every transport does: a SERVER span (child of the caller's
 * context), the principal checked before the handler runs, the handler's result turned into the
 * output message, and one error mapping (ServiceError passes, anything else is logged and becomes
 * `internal`). The gRPC server and the direct (in-process) transport both call this.
 */
import { create, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import type { Metadata } from '@grpc/grpc-js';
import { GrpcStatus } from './grpc.js';
import { SpanKind, SpanStatusCode, context, trace, type Context, type Span } from '@opentelemetry/api';
import { ERROR_TABLE, ServiceError } from '@planning/errors';
import { recordRpcCall, type Logger } from '@planning/telemetry';
import { grpcCodeName } from './errors.js';
import type { Principal } from './principal.js';
import { TRACER_NAME } from './trace-metadata.js';
import type { CallContext } from './types.js';

export type BoundHandler = (request: Message, ctx: CallContext) => Promise<unknown>;

/** gRPC codes that mean the server failed (OpenTelemetry gRPC conventions); others leave the server span status unset. */
const SERVER_FAULT_CODES: ReadonlySet<number> = new Set([
  GrpcStatus.UNKNOWN,
  GrpcStatus.DEADLINE_EXCEEDED,
  GrpcStatus.UNIMPLEMENTED,
  GrpcStatus.INTERNAL,
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.DATA_LOSS,
]);

export interface HandlerInvocation<T> {
  service: DescService;
  method: DescMethod;
  handler: BoundHandler;
  logger: Logger;
  /** `rpc.system` of the spans: `grpc`, or `direct` for in-process calls. */
  system: string;
  request: Message;
  /** The caller's principal; throws `unauthorized` when it cannot be trusted. */
  principal: () => Principal;
  deadline: Date | undefined;
  signal: AbortSignal;
  metadata: Metadata;
  /** The caller's trace context (the parent of the SERVER span). */
  parent: Context;
  /** Turns the output message into what the transport sends; a throw here is this call's internal error. */
  finish: (response: Message) => T;
}

export type HandlerOutcome<T> = { ok: true; value: T } | { ok: false; error: ServiceError };

export function invokeHandler<T>(call: HandlerInvocation<T>): Promise<HandlerOutcome<T>> {
  const { service, method, logger } = call;
  const started = performance.now();
  const span = trace.getTracer(TRACER_NAME).startSpan(
    `${service.typeName}/${method.name}`,
    { kind: SpanKind.SERVER, attributes: { 'rpc.system': call.system, 'rpc.service': service.typeName, 'rpc.method': method.name } },
    call.parent,
  );
  const traceContext = trace.setSpan(call.parent, span);
  return context.with(traceContext, async (): Promise<HandlerOutcome<T>> => {
    try {
      const principal = call.principal();
      const result = await call.handler(call.request, {
        principal,
        deadline: call.deadline,
        signal: call.signal,
        metadata: call.metadata,
        traceContext,
      });
      const value = call.finish(create(method.output, result as never));
      endSpan(span, GrpcStatus.OK);
      record(call, GrpcStatus.OK, started);
      return { ok: true, value };
    } catch (err) {
      let error: ServiceError;
      if (err instanceof ServiceError) {
        error = err;
        if (error.code === 'unauthorized') logger.warn({ rpc: rpcName(call), reason: error.message }, 'rpc call rejected');
      } else {
        // The cause stays in the log; the caller learns only that something went wrong.
        logger.error({ err, rpc: rpcName(call) }, 'rpc handler failed');
        span.recordException(err instanceof Error ? err : String(err));
        error = new ServiceError('internal', 'Internal error');
      }
      endSpan(span, ERROR_TABLE[error.code].grpc, error.code);
      record(call, ERROR_TABLE[error.code].grpc, started, error.code);
      return { ok: false, error };
    }
  });
}

function rpcName(call: { service: DescService; method: DescMethod }) {
  return { service: call.service.typeName, method: call.method.name };
}

/**
 * `rpc.server.call.duration`, as the span measures it, and a debug line per call (written in the
 * call's span: it carries the trace and span ids, as every line of a service handling a call).
 */
function record(
  call: { service: DescService; method: DescMethod; system: string; logger: Logger },
  code: number,
  started: number,
  errorType?: string,
): void {
  const seconds = (performance.now() - started) / 1000;
  const status = grpcCodeName(code);
  recordRpcCall('server', {
    system: call.system,
    method: `${call.service.typeName}/${call.method.name}`,
    statusCode: status,
    seconds,
    ...(errorType ? { errorType } : {}),
  });
  call.logger.debug({ rpc: rpcName(call), status, durationMs: Math.round(seconds * 10_000) / 10 }, 'rpc call handled');
}

function endSpan(span: Span, code: number, errorCode?: string): void {
  span.setAttribute('rpc.grpc.status_code', code);
  if (errorCode) span.setAttribute('error.type', errorCode);
  if (SERVER_FAULT_CODES.has(code)) span.setStatus({ code: SpanStatusCode.ERROR, message: grpcCodeName(code) });
  span.end();
}
