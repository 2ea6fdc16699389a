import { fromBinary, toBinary, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { grpcJs } from './grpc.js';
import { ROOT_CONTEXT, propagation } from '@opentelemetry/api';
import { ServiceError } from '@planning/errors';
import type { Logger } from '@planning/telemetry';
import type { HealthImplementation, ServingStatus } from 'grpc-health-check';
import { serviceErrorToStatus } from './errors.js';
import { invokeHandler, type BoundHandler } from './invoke.js';
import { PRINCIPAL_HEADER, PRINCIPAL_SIGNATURE_HEADER, type PrincipalVerifier } from './principal.js';
import { metadataGetter } from './trace-metadata.js';
import { MAX_MESSAGE_BYTES, type ServiceImplementation } from './types.js';

export interface RpcServerOptions {
  host: string;
  /** 0 picks a free port; `start()` returns the one bound. */
  port: number;
  logger: Logger;
  principalVerifier: PrincipalVerifier;
  /** How long `stop()` waits for in-flight calls before cancelling them. Default 10 s. */
  shutdownTimeoutMs?: number;
  /** Register gRPC server reflection. Default true. */
  reflection?: boolean;
}

export interface RpcServer {
  /** Registers a service from its generated descriptor. Only before `start()`; unary methods only. */
  addService<S extends DescService>(service: S, implementation: ServiceImplementation<S>): void;
  /** Binds and starts serving; every added service (and the server as a whole, `""`) turns SERVING. */
  start(): Promise<{ port: number }>;
  /** Marks everything NOT_SERVING, ends health watches, drains in-flight calls, then force-closes. */
  stop(): Promise<void>;
  /** `host:port` as bound (IPv6 hosts in brackets). Only after `start()`. */
  address(): string;
  /** Sets one service's health status (`""` is the whole server). */
  setServing(serviceName: string, serving: boolean): void;
}

type State = 'new' | 'starting' | 'started' | 'stopping' | 'stopped';

export function createRpcServer(options: RpcServerOptions): RpcServer {
  const { logger, principalVerifier } = options;
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 10_000;
  // Connections are closed after a few minutes (gracefully) so round_robin clients re-resolve
  // DNS and spread over pods that were added since they connected.
  const server = new (grpcJs().Server)({
    'grpc.max_connection_age_ms': 5 * 60_000,
    'grpc.max_connection_age_grace_ms': 30_000,
    // Import previews carry payloads up to 10 MB (DECISIONS §8).
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  });
  const services: DescService[] = [];
  let state: State = 'new';
  let boundPort: number | undefined;
  let stopping: Promise<void> | undefined;

  // The health service and reflection (grpc-health-check, @grpc/reflection and the protobuf.js
  // they load) are read when the server starts: a process that only makes calls (the gateway's
  // thread of an all-in-one process) never holds them.
  let health: HealthImplementation | undefined;
  const statuses = new Map<string, ServingStatus>([['', 'NOT_SERVING']]);
  const setStatus = (name: string, status: ServingStatus): void => {
    statuses.set(name, status);
    health?.setStatus(name, status);
  };
  // Health Watch streams never end on their own and would hold a graceful shutdown until the
  // timeout, so they are tracked and ended once NOT_SERVING has been sent.
  const watches = new Set<grpc.ServerWritableStream<unknown, unknown>>();
  const addHealth = (implementation: HealthImplementation): void => implementation.addToServer({
    addService(definition: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation) {
      const watch = implementation.watch as grpc.handleServerStreamingCall<unknown, unknown>;
      server.addService(definition, {
        ...implementation,
        watch(call: grpc.ServerWritableStream<unknown, unknown>) {
          watches.add(call);
          const forget = (): void => void watches.delete(call);
          call.once('cancelled', forget);
          call.once('finish', forget);
          watch(call);
        },
      });
    },
  } as grpc.Server);

  function handleUnary(service: DescService, method: DescMethod, handler: BoundHandler) {
    return (call: grpc.ServerUnaryCall<Message, Uint8Array>, callback: grpc.sendUnaryData<Uint8Array>): void => {
      const controller = new AbortController();
      const rawDeadline = call.getDeadline();
      const deadline = rawDeadline instanceof Date ? rawDeadline : Number.isFinite(rawDeadline) ? new Date(rawDeadline) : undefined;
      const deadlineTimer = deadline
        ? setTimeout(() => controller.abort(new ServiceError('unavailable', 'Deadline exceeded')), Math.max(0, deadline.getTime() - Date.now()))
        : undefined;
      const onCancelled = (): void => controller.abort(new ServiceError('unavailable', 'Call cancelled'));
      call.once('cancelled', onCancelled);

      void invokeHandler({
        service,
        method,
        handler,
        logger,
        system: 'grpc',
        request: call.request,
        principal: () =>
          principalVerifier.verify({
            principal: firstString(call.metadata, PRINCIPAL_HEADER),
            signature: firstString(call.metadata, PRINCIPAL_SIGNATURE_HEADER),
          }),
        deadline,
        signal: controller.signal,
        metadata: call.metadata,
        parent: propagation.extract(ROOT_CONTEXT, call.metadata, metadataGetter),
        // Encoded here rather than by grpc-js so an unencodable result is this call's internal error.
        finish: (response) => toBinary(method.output, response),
      }).then((outcome) => {
        if (deadlineTimer) clearTimeout(deadlineTimer);
        call.off('cancelled', onCancelled);
        if (outcome.ok) callback(null, outcome.value);
        else callback(serviceErrorToStatus(outcome.error));
      });
    };
  }

  return {
    addService(service, implementation) {
      if (state !== 'new') throw new Error(`addService(${service.typeName}): services must be added before start()`);
      if (services.some((s) => s.typeName === service.typeName)) {
        throw new Error(`addService(${service.typeName}): service already added`);
      }
      const definition: Record<string, grpc.MethodDefinition<Message, Uint8Array>> = {};
      const handlers: grpc.UntypedServiceImplementation = {};
      for (const method of service.methods) {
        if (method.methodKind !== 'unary') {
          throw new Error(
            `addService(${service.typeName}): ${method.name} is ${method.methodKind}; only unary methods are supported`,
          );
        }
        const handler = (implementation as Record<string, unknown>)[method.localName];
        if (typeof handler !== 'function') {
          throw new Error(`addService(${service.typeName}): no handler for ${method.localName}`);
        }
        definition[method.localName] = {
          path: `/${service.typeName}/${method.name}`,
          requestStream: false,
          responseStream: false,
          requestSerialize: (message: Message) => Buffer.from(toBinary(method.input, message)),
          requestDeserialize: (bytes: Buffer) => fromBinary(method.input, bytes),
          responseSerialize: (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
          // Only clients deserialize responses; the server never calls this.
          responseDeserialize: (bytes: Buffer) => bytes,
          originalName: method.localName,
        };
        const bound: BoundHandler = (request, ctx) => (handler as BoundHandler).call(implementation, request, ctx);
        handlers[method.localName] = handleUnary(service, method, bound);
      }
      server.addService(definition, handlers);
      services.push(service);
      setStatus(service.typeName, 'NOT_SERVING');
    },

    async start() {
      if (state !== 'new') throw new Error('start(): the server was already started');
      state = 'starting';
      try {
        const [{ HealthImplementation: Health }, reflection] = await Promise.all([
          import('grpc-health-check'),
          options.reflection ?? true ? import('./reflection.js') : undefined,
        ]);
        health = new Health(Object.fromEntries(statuses));
        addHealth(health);
        reflection?.addReflection(server, services);
        boundPort = await new Promise<number>((resolve, reject) => {
          server.bindAsync(hostPort(options.host, options.port), grpcJs().ServerCredentials.createInsecure(), (err, port) =>
            err ? reject(err) : resolve(port),
          );
        });
      } catch (err) {
        state = 'stopped';
        throw err;
      }
      state = 'started';
      for (const name of statuses.keys()) setStatus(name, 'SERVING');
      return { port: boundPort };
    },

    stop() {
      if (stopping) return stopping;
      if (state === 'new') {
        state = 'stopped';
        return (stopping = Promise.resolve());
      }
      state = 'stopping';
      for (const name of statuses.keys()) setStatus(name, 'NOT_SERVING');
      for (const call of watches) call.end();
      watches.clear();
      stopping = new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          logger.warn({ shutdownTimeoutMs }, 'rpc server drain timed out; cancelling in-flight calls');
          server.forceShutdown();
          resolve();
        }, shutdownTimeoutMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }).then(() => {
        state = 'stopped';
      });
      return stopping;
    },

    address() {
      if (boundPort === undefined) throw new Error('address(): the server is not started');
      return hostPort(options.host, boundPort);
    },

    setServing(serviceName, serving) {
      // After stop the watches are ended; writing to them would fail.
      if (state === 'stopping' || state === 'stopped') return;
      setStatus(serviceName, serving ? 'SERVING' : 'NOT_SERVING');
    },
  };
}

function hostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

function firstString(metadata: grpc.Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return typeof value === 'string' ? value : undefined;
}
