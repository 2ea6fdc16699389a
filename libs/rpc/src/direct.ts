/**
 * The direct transport: in all-in-one, a typed client calls the handler of a service registered
 * in the same process. The handler, its CallContext (principal, deadline, abort signal, trace
 * span) and the error mapping are the gRPC path's (see invoke.ts); what is left out is the wire:
 * no HTTP/2, no binary codec, no principal signature. Messages stay isolated: the handler gets a
 * checked copy of the request and the caller a copy of the response, so neither end can change
 * an object the other holds. A call made with a response view gets the view's text instead of a
 * copy of the response (see views.ts): a string rendered from it shares nothing with it.
 */
import { create, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import { grpcJs } from './grpc.js';
import { SpanKind, SpanStatusCode, context, trace, type Context, type Span } from '@opentelemetry/api';
import { ERROR_TABLE, ServiceError } from '@planning/errors';
import { recordRpcCall, type Logger } from '@planning/telemetry';
import { grpcCodeName } from './errors.js';
import { invokeHandler, type BoundHandler, type HandlerOutcome } from './invoke.js';
import { checkedCopy, copyMessage } from './isolate.js';
import { ANONYMOUS_PRINCIPAL, copyPrincipal, type Principal } from './principal.js';
import { BytePool, pooledAnswer, renderView, type RenderedResponse, type ResponseView } from './views.js';
import { TRACER_NAME } from './trace-metadata.js';
import { resolveDeadline, type RpcCallOptions, type RpcClient, type ServiceImplementation } from './types.js';

/** One call of a registered method, as a transport hands it over. */
export interface LocalCall<T> {
  /** `planning.issues.v1.TaskService`. */
  service: string;
  /** The method's lowerCamelCase local name. */
  method: string;
  /** Already the callee's own copy. */
  request: Message;
  principal: Principal;
  deadline: Date | undefined;
  /** Aborting it aborts the handler's `ctx.signal`; `stop()` aborts it too when draining runs out. */
  controller: AbortController;
  /** The caller's trace context. */
  parent: Context;
  /** Turns the output message into what the caller receives (its own copy). */
  finish: (response: Message) => T;
}

/** The services this process serves, callable without a network. */
export interface LocalServices {
  /** Registers a service (the same implementation the gRPC server gets). Unary methods only. */
  addService<S extends DescService>(service: S, implementation: ServiceImplementation<S>): void;
  has(serviceTypeName: string): boolean;
  /** Runs one call; never rejects: failures come back as `{ ok: false, error }`. */
  invoke<T>(call: LocalCall<T>): Promise<HandlerOutcome<T>>;
  /** Refuses new calls, lets in-flight ones finish for `shutdownTimeoutMs`, then aborts them. */
  stop(): Promise<void>;
}

interface Entry {
  service: DescService;
  methods: Map<string, { method: DescMethod; handler: BoundHandler }>;
}

export function createLocalServices(options: { logger: Logger; shutdownTimeoutMs?: number }): LocalServices {
  const { logger } = options;
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 10_000;
  const entries = new Map<string, Entry>();
  const inflight = new Set<{ controller: AbortController; done: Promise<unknown> }>();
  let stopping: Promise<void> | undefined;

  return {
    addService(service, implementation) {
      if (entries.has(service.typeName)) throw new Error(`addService(${service.typeName}): service already added`);
      const methods = new Map<string, { method: DescMethod; handler: BoundHandler }>();
      for (const method of service.methods) {
        if (method.methodKind !== 'unary') {
          throw new Error(`addService(${service.typeName}): ${method.name} is ${method.methodKind}; only unary methods are supported`);
        }
        const handler = (implementation as Record<string, unknown>)[method.localName];
        if (typeof handler !== 'function') throw new Error(`addService(${service.typeName}): no handler for ${method.localName}`);
        methods.set(method.localName, { method, handler: (request, ctx) => (handler as BoundHandler).call(implementation, request, ctx) });
      }
      entries.set(service.typeName, { service, methods });
    },

    has: (name) => entries.has(name),

    invoke<T>(call: LocalCall<T>): Promise<HandlerOutcome<T>> {
      const entry = entries.get(call.service);
      const found = entry?.methods.get(call.method);
      if (!entry || !found || stopping) {
        const what = `${call.service}/${found?.method.name ?? call.method}`;
        return Promise.resolve({ ok: false, error: new ServiceError('unavailable', `${what}: service unavailable`) });
      }
      const done = invokeHandler({
        service: entry.service,
        method: found.method,
        handler: found.handler,
        logger,
        system: 'direct',
        request: call.request,
        principal: () => copyPrincipal(call.principal),
        deadline: call.deadline,
        signal: call.controller.signal,
        metadata: new (grpcJs().Metadata)(),
        parent: call.parent,
        finish: call.finish,
      });
      const tracked = { controller: call.controller, done };
      inflight.add(tracked);
      void done.finally(() => inflight.delete(tracked));
      return done;
    },

    stop() {
      stopping ??= (async () => {
        if (inflight.size === 0) return;
        let timer: NodeJS.Timeout | undefined;
        const drained = Promise.all([...inflight].map((c) => c.done)).then(() => true);
        const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), shutdownTimeoutMs)));
        const finished = await Promise.race([drained, timedOut]);
        clearTimeout(timer);
        if (!finished) {
          logger.warn({ shutdownTimeoutMs, inflight: inflight.size }, 'direct calls did not finish in time; cancelling them');
          for (const call of inflight) call.controller.abort(new ServiceError('unavailable', 'Server stopping'));
        }
      })();
      return stopping;
    },
  };
}

/**
 * What every in-process client does before a call leaves it: refuse a cancelled call, make the
 * callee's checked copy of the request (what a gRPC client would refuse is `invalid-input`), fix
 * the deadline and open the CLIENT span (`rpc.system`: the transport).
 */
export function beginClientCall(
  service: DescService,
  method: DescMethod,
  request: unknown,
  options: RpcCallOptions,
  defaultDeadlineMs: number,
  system: string,
): { ok: true; input: Message; deadline: Date; span: Span } | { ok: false; error: ServiceError } {
  const what = `${service.typeName}/${method.name}`;
  if (options.signal?.aborted) return { ok: false, error: new ServiceError('unavailable', `${what}: call cancelled`) };
  let input: Message;
  try {
    input = checkedCopy(method.input, create(method.input, request as never));
  } catch (err) {
    return { ok: false, error: new ServiceError('invalid-input', 'A value in the request is out of range for its field', {}, { cause: err }) };
  }
  const span = trace.getTracer(TRACER_NAME).startSpan(what, {
    kind: SpanKind.CLIENT,
    attributes: { 'rpc.system': system, 'rpc.service': service.typeName, 'rpc.method': method.name },
  });
  return { ok: true, input, deadline: resolveDeadline(options, defaultDeadlineMs), span };
}

/** Ends a CLIENT span the way the gRPC client does: the status code, and on failure the error. */
export function endClientSpan(span: Span, error?: ServiceError): void {
  if (error) {
    const code = ERROR_TABLE[error.code].grpc;
    span.setAttribute('rpc.grpc.status_code', code);
    span.setAttribute('error.type', error.code);
    span.setStatus({ code: SpanStatusCode.ERROR, message: grpcCodeName(code) });
  } else {
    span.setAttribute('rpc.grpc.status_code', 0);
  }
  span.end();
}

export interface DirectClientOptions {
  services: LocalServices;
  /** Deadline of a call that names none. Default 10 000 ms. */
  defaultDeadlineMs?: number;
  /** Principal of a call that names none. Default: the anonymous principal (no rights). */
  defaultPrincipal?: Principal;
}

/** A typed client whose calls run the local handler of `service` (see the file comment). */
export function createDirectClient<S extends DescService>(service: S, options: DirectClientOptions): RpcClient<S> {
  const defaultDeadlineMs = options.defaultDeadlineMs ?? 10_000;
  if (!Number.isFinite(defaultDeadlineMs) || defaultDeadlineMs <= 0) {
    throw new Error(`createDirectClient(${service.typeName}): defaultDeadlineMs must be a positive number`);
  }
  const defaultPrincipal = options.defaultPrincipal ?? ANONYMOUS_PRINCIPAL;
  const { services } = options;
  let closed = false;
  const stub: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind !== 'unary') {
      throw new Error(`createDirectClient(${service.typeName}): ${method.name} is ${method.methodKind}; only unary methods are supported`);
    }
    if (method.localName === 'close') throw new Error(`createDirectClient(${service.typeName}): a method named close would hide close()`);
    stub[method.localName] = (request: unknown, callOptions?: RpcCallOptions) => call(method, request, callOptions ?? {});
  }
  stub.close = () => {
    closed = true;
  };

  function call(method: DescMethod, request: unknown, callOptions: RpcCallOptions): Promise<Message> {
    const what = `${service.typeName}/${method.name}`;
    if (closed) return Promise.reject(new ServiceError('unavailable', `${what}: client closed`));
    const { signal } = callOptions;
    const begun = beginClientCall(service, method, request, callOptions, defaultDeadlineMs, 'direct');
    if (!begun.ok) return Promise.reject(begun.error);
    const { input, deadline, span } = begun;
    const controller = new AbortController();
    const started = performance.now();
    const record = (code: number, errorType?: string): void =>
      recordRpcCall('client', {
        system: 'direct',
        method: what,
        statusCode: grpcCodeName(code),
        seconds: (performance.now() - started) / 1000,
        ...(errorType ? { errorType } : {}),
      });

    return new Promise<Message>((resolve, reject) => {
      let settled = false;
      const fail = (error: ServiceError): void => {
        if (settled) return;
        settled = true;
        cleanup();
        endClientSpan(span, error);
        record(ERROR_TABLE[error.code].grpc, error.code);
        reject(error);
      };
      const onAbort = (): void => {
        controller.abort(new ServiceError('unavailable', 'Call cancelled'));
        fail(new ServiceError('unavailable', `${what}: call cancelled`));
      };
      const timer = setTimeout(() => {
        controller.abort(new ServiceError('unavailable', 'Deadline exceeded'));
        fail(new ServiceError('unavailable', `${what}: deadline exceeded`));
      }, Math.max(0, deadline.getTime() - Date.now()));
      const cleanup = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      signal?.addEventListener('abort', onAbort, { once: true });

      void services
        .invoke<Message | RenderedResponse>({
          service: service.typeName,
          method: method.localName,
          request: input,
          principal: callOptions.principal ?? defaultPrincipal,
          deadline,
          controller,
          parent: trace.setSpan(context.active(), span),
          finish: callOptions.view ? renderWith(callOptions.view as unknown as ResponseView) : (response: Message) => copyMessage(response),
        })
        .then((outcome) => {
          if (!outcome.ok) {
            // The caller's own error object, as a gRPC client would rebuild it from the trailers.
            const { error } = outcome;
            fail(new ServiceError(error.code, error.message, copyMessage(error.details)));
            return;
          }
          if (settled) return;
          settled = true;
          cleanup();
          endClientSpan(span);
          record(0);
          resolve(outcome.value as Message);
        });
    });
  }

  return stub as RpcClient<S>;
}

/**
 * This thread's buffers for large rendered answers (the all-in-one layout in one thread, where the
 * gateway calls the services directly): given back once the response has been written, as over
 * the thread port. A buffer given back is first moved to a new ArrayBuffer object (a transfer to
 * this same thread): every view of it the answer made reads as empty from then on, so something
 * that kept one would find nothing, never a later answer's bytes.
 */
const renderPool = new BytePool();

function renderWith(view: ResponseView): (response: Message) => RenderedResponse {
  return (response) =>
    pooledAnswer(
      renderView(view, response, (size) => renderPool.take(size)),
      (buffer) => renderPool.give(structuredClone(buffer, { transfer: [buffer] })),
    );
}
