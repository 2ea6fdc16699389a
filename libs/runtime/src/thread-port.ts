/**
 * Calls between the two threads of an all-in-one process: the gateway's thread (HTTP, auth,
 * JSON) and the services' worker thread. A MessagePort carries unary calls to the services'
 * handlers (the same `LocalServices.invoke` the direct transport uses, so the same CallContext,
 * spans and error mapping), event publishes to the worker's bus, readiness and shutdown.
 * Structured clone is the isolation: neither thread can reach the other's objects. A call made
 * with a response view (libs/rpc views.ts) is answered with the view's text, rendered in the
 * services' thread: one flat string crosses, or, for a view that renders bytes (joined from bytes
 * it keeps), an ArrayBuffer transferred without a copy; nothing of the response is cloned or left
 * shared. (A view without bytes of its own posts text: a string posts cheaper than its UTF-8
 * bytes cost to encode here and transfer.) The gateway's thread transfers a page's buffer back
 * once its socket has written it (`RenderedResponse.recycleWhenSent`), and the services' thread
 * renders later pages into it (`BytePool`): without that, every page was a fresh ArrayBuffer
 * in both threads, and their external memory set off a full collection every few dozen pages.
 */
import type { MessagePort } from 'node:worker_threads';
import type { DescMethod, DescService, Message } from '@bufbuild/protobuf';
import { ROOT_CONTEXT, context, propagation, trace } from '@opentelemetry/api';
import type { EventBus, EventEnvelope, PublishResult } from '@planning/bus';
import { ERROR_TABLE, ServiceError, isErrorCode, type ErrorDetails } from '@planning/errors';
import { recordRpcCall } from '@planning/telemetry';
import {
  ANONYMOUS_PRINCIPAL,
  beginClientCall,
  BytePool,
  endClientSpan,
  grpcCodeName,
  pooledAnswer,
  type RenderedResponse,
  renderView,
  type LocalServices,
  type Principal,
  type RpcCallOptions,
  type ResponseView,
  type RpcClient,
} from '@planning/rpc';

type Carrier = Record<string, string>;

type Request =
  | { t: 'call'; id: number; service: string; method: string; request: Message; principal: Principal; deadline: number; trace: Carrier; view?: string }
  | { t: 'cancel'; id: number; why: 'deadline' | 'cancelled' }
  | { t: 'publish'; id: number; event: EventEnvelope; headers: Record<string, string> }
  | { t: 'ping'; id: number }
  | { t: 'ready'; id: number }
  | { t: 'recycle'; buffer: ArrayBuffer };

type Reply =
  | { t: 'ok'; id: number; value: unknown; rendered?: true }
  | { t: 'error'; id: number; code: string; message: string; details: ErrorDetails };

export interface ReadyReport {
  ok: boolean;
  notRunning: string[];
  details: Record<string, unknown>;
}

/** The worker's side: answers what the gateway's thread asks of its services and bus. */
export function serveThreadPort(
  port: MessagePort,
  target: {
    services: LocalServices;
    bus: () => EventBus | undefined;
    ready: () => Promise<ReadyReport>;
    logger: { error(obj: object, msg?: string): void };
    /** The response views this thread renders, by name (a call naming another gets the message). */
    views?: ReadonlyMap<string, ResponseView>;
  },
): void {
  const running = new Map<number, AbortController>();
  const pool = new BytePool();
  const alloc = (size: number): Uint8Array => pool.take(size);
  const reply = (message: Reply): void => port.postMessage(message);
  const fail = (id: number, err: unknown): void => {
    const error = err instanceof ServiceError ? err : new ServiceError('unavailable', err instanceof Error ? err.message : String(err));
    reply({ t: 'error', id, code: error.code, message: error.message, details: error.details });
  };
  port.on('message', (message: Request) => {
    switch (message.t) {
      case 'call': {
        const controller = new AbortController();
        running.set(message.id, controller);
        const view = message.view === undefined ? undefined : target.views?.get(message.view);
        void target.services
          .invoke({
            service: message.service,
            method: message.method,
            request: message.request,
            principal: message.principal,
            deadline: new Date(message.deadline),
            controller,
            parent: propagation.extract(ROOT_CONTEXT, message.trace),
            // Posting the message copies it (a view's text as well): nothing more to isolate.
            finish: (response): unknown => (view ? renderView(view, response, alloc) : response),
          })
          .then((outcome) => {
            running.delete(message.id);
            if (!outcome.ok) return fail(message.id, outcome.error);
            try {
              if (!view) reply({ t: 'ok', id: message.id, value: outcome.value });
              // A view's bytes are transferred (renderBytes gives them an ArrayBuffer of their own).
              else if (outcome.value instanceof Uint8Array) port.postMessage({ t: 'ok', id: message.id, value: outcome.value, rendered: true } satisfies Reply, [outcome.value.buffer as ArrayBuffer]);
              else reply({ t: 'ok', id: message.id, value: outcome.value, rendered: true });
            } catch (err) {
              // A result that cannot be copied across (a function, a symbol): the call's internal error.
              target.logger.error({ err, rpc: { service: message.service, method: message.method } }, 'rpc handler failed');
              fail(message.id, new ServiceError('internal', 'Internal error'));
            }
          });
        return;
      }
      case 'cancel':
        running
          .get(message.id)
          ?.abort(new ServiceError('unavailable', message.why === 'deadline' ? 'Deadline exceeded' : 'Call cancelled'));
        return;
      case 'publish': {
        const bus = target.bus();
        if (!bus) return fail(message.id, new ServiceError('unavailable', 'event bus not running'));
        bus.publish(message.event, message.headers).then((result) => reply({ t: 'ok', id: message.id, value: result }), (err: unknown) => fail(message.id, err));
        return;
      }
      case 'ping': {
        const bus = target.bus();
        if (!bus) return fail(message.id, new ServiceError('unavailable', 'event bus not running'));
        bus.ping().then(() => reply({ t: 'ok', id: message.id, value: null }), (err: unknown) => fail(message.id, err));
        return;
      }
      case 'ready':
        target.ready().then((report) => reply({ t: 'ok', id: message.id, value: report }), (err: unknown) => fail(message.id, err));
        return;
      case 'recycle':
        if (message.buffer instanceof ArrayBuffer) pool.give(message.buffer);
        return;
    }
  });
}

export interface ThreadPortClient {
  /** A typed client whose calls run in the services' thread. */
  client<S extends DescService>(service: S, options?: { defaultDeadlineMs?: number }): RpcClient<S>;
  /** The services' bus, for publishing (the gateway only publishes, through its outbox). */
  bus: EventBus;
  ready(): Promise<ReadyReport>;
  /** Fails every pending call (the services' thread is gone). */
  close(reason: string): void;
}

/** The gateway's side of the port. */
export function createThreadPortClient(port: MessagePort): ThreadPortClient {
  let nextId = 1;
  let closedReason: string | undefined;
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: ServiceError): void }>();

  port.on('message', (message: Reply) => {
    const waiting = pending.get(message.id);
    if (!waiting) return;
    pending.delete(message.id);
    if (message.t === 'ok') waiting.resolve(message.rendered ? rendered(message.value as string | Uint8Array) : message.value);
    else waiting.reject(new ServiceError(isErrorCode(message.code) ? message.code : 'internal', message.message, message.details));
  });

  /** A rendered answer; bytes in a buffer the services' thread pools go back to it when recycled. */
  const rendered = (body: string | Uint8Array): RenderedResponse =>
    pooledAnswer(body, (buffer) => {
      if (closedReason) return;
      try {
        port.postMessage({ t: 'recycle', buffer } satisfies Request, [buffer]);
      } catch {
        // The port closed meanwhile: the buffer stays here, for the garbage collector.
      }
    });

  const ask = <T>(message: Record<string, unknown> & { t: Request['t'] }): { id: number; done: Promise<T> } => {
    const id = nextId++;
    if (closedReason) return { id, done: Promise.reject(new ServiceError('unavailable', closedReason)) };
    const done = new Promise<T>((resolve, reject) => pending.set(id, { resolve: resolve as (v: unknown) => void, reject }));
    port.postMessage({ ...message, id });
    return { id, done };
  };

  const call = (service: DescService, method: DescMethod, request: unknown, options: RpcCallOptions, defaultDeadlineMs: number, defaultPrincipal: Principal): Promise<Message> => {
    const what = `${service.typeName}/${method.name}`;
    const { signal } = options;
    const begun = beginClientCall(service, method, request, options, defaultDeadlineMs, 'thread');
    if (!begun.ok) return Promise.reject(begun.error);
    const { input, deadline, span } = begun;
    const started = performance.now();
    const carrier: Carrier = {};
    propagation.inject(trace.setSpan(context.active(), span), carrier);
    const { id, done } = ask<Message>({
      t: 'call',
      service: service.typeName,
      method: method.localName,
      request: input,
      principal: options.principal ?? defaultPrincipal,
      deadline: deadline.getTime(),
      trace: carrier,
      ...(options.view ? { view: options.view.name } : {}),
    });
    return new Promise<Message>((resolve, reject) => {
      let settled = false;
      const settle = (error?: ServiceError, value?: Message): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        endClientSpan(span, error);
        recordRpcCall('client', {
          system: 'thread',
          method: what,
          statusCode: grpcCodeName(error ? ERROR_TABLE[error.code].grpc : 0),
          seconds: (performance.now() - started) / 1000,
          ...(error ? { errorType: error.code } : {}),
        });
        if (error) reject(error);
        else resolve(value!);
      };
      const giveUp = (why: 'deadline' | 'cancelled'): void => {
        if (settled) return;
        port.postMessage({ t: 'cancel', id, why });
        pending.delete(id);
        settle(new ServiceError('unavailable', `${what}: ${why === 'deadline' ? 'deadline exceeded' : 'call cancelled'}`));
      };
      const onAbort = (): void => giveUp('cancelled');
      const timer = setTimeout(() => giveUp('deadline'), Math.max(0, deadline.getTime() - Date.now()));
      signal?.addEventListener('abort', onAbort, { once: true });
      done.then(
        (value) => settle(undefined, value),
        (error: ServiceError) => settle(error),
      );
    });
  };

  const bus: EventBus = {
    kind: 'thread',
    publish: (event, headers = {}) => ask<PublishResult>({ t: 'publish', event, headers }).done,
    consume() {
      return Promise.reject(new Error('consumers run in the services thread; this thread only publishes'));
    },
    ping: () => ask<void>({ t: 'ping' }).done,
    close: async () => undefined,
  };

  return {
    client<S extends DescService>(service: S, options: { defaultDeadlineMs?: number } = {}): RpcClient<S> {
      const defaultDeadlineMs = options.defaultDeadlineMs ?? 10_000;
      const stub: Record<string, unknown> = { close() {} };
      for (const method of service.methods) {
        stub[method.localName] = (request: unknown, callOptions?: RpcCallOptions) =>
          call(service, method, request, callOptions ?? {}, defaultDeadlineMs, ANONYMOUS_PRINCIPAL);
      }
      return stub as RpcClient<S>;
    },
    bus,
    ready: () => ask<ReadyReport>({ t: 'ready' }).done,
    close(reason) {
      closedReason = reason;
      for (const waiting of pending.values()) waiting.reject(new ServiceError('unavailable', reason));
      pending.clear();
    },
  };
}
