import { create, fromBinary, toBinary, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { grpcJs, GrpcStatus } from './grpc.js';
import { SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import { ServiceError } from '@planning/errors';
import { recordRpcCall } from '@planning/telemetry';
import { grpcCodeName, statusToServiceError } from './errors.js';
import {
  ANONYMOUS_PRINCIPAL,
  PRINCIPAL_HEADER,
  PRINCIPAL_SIGNATURE_HEADER,
  type Principal,
  type PrincipalSigner,
} from './principal.js';
import { TRACER_NAME, metadataSetter } from './trace-metadata.js';
import { MAX_MESSAGE_BYTES, resolveDeadline, type RpcCallOptions, type RpcClient } from './types.js';

export interface RpcClientOptions {
  /** `host:port` of the server. */
  address: string;
  /** Deadline of a call that names none. Default 10 000 ms. */
  defaultDeadlineMs?: number;
  principalSigner: PrincipalSigner;
  /** Principal of a call that names none. Default: the anonymous principal (no rights). */
  defaultPrincipal?: Principal;
}

interface PooledChannel {
  channel: grpc.Channel;
  client: grpc.Client;
  refs: number;
}

// One channel per address for the whole process: clients of several services on one server share
// its HTTP/2 connection, and creating a client is cheap.
const channels = new Map<string, PooledChannel>();

function acquireChannel(address: string): PooledChannel {
  let pooled = channels.get(address);
  if (!pooled) {
    // Peers restart (deploys, crashes): reconnect quickly instead of backing off for minutes,
    // and keep idle channels alive through proxies and NAT. Calls spread over every address the
    // name resolves to (round_robin): behind a headless Kubernetes Service that is every pod,
    // and servers close connections after a while (max_connection_age) so clients re-resolve
    // and find new pods.
    const target = /^[a-z][a-z0-9+.-]*:\/\//i.test(address) || address.startsWith('dns:') ? address : `dns:///${address}`;
    const channel = new (grpcJs().Channel)(target, grpcJs().credentials.createInsecure(), {
      'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.min_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2_000,
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
      // Import previews carry payloads up to 10 MB (DECISIONS §8).
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    });
    // Never close this Client: with channelOverride its close() would close the shared channel.
    const client = new (grpcJs().Client)(target, grpcJs().credentials.createInsecure(), { channelOverride: channel });
    pooled = { channel, client, refs: 0 };
    channels.set(address, pooled);
  }
  pooled.refs += 1;
  return pooled;
}

function releaseChannel(address: string): void {
  const pooled = channels.get(address);
  if (!pooled) return;
  pooled.refs -= 1;
  if (pooled.refs <= 0) {
    channels.delete(address);
    pooled.channel.close();
  }
}

/**
 * A typed client for one service. Every call carries a signed principal, W3C trace context and a
 * deadline; failures come back as ServiceError (see README: error mapping).
 */
export function createRpcClient<S extends DescService>(service: S, options: RpcClientOptions): RpcClient<S> {
  const defaultDeadlineMs = options.defaultDeadlineMs ?? 10_000;
  if (!Number.isFinite(defaultDeadlineMs) || defaultDeadlineMs <= 0) {
    throw new Error(`createRpcClient(${service.typeName}): defaultDeadlineMs must be a positive number`);
  }
  const defaultPrincipal = options.defaultPrincipal ?? ANONYMOUS_PRINCIPAL;
  const { principalSigner } = options;
  const pooled = acquireChannel(options.address);
  let closed = false;

  const stub: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind !== 'unary') {
      throw new Error(`createRpcClient(${service.typeName}): ${method.name} is ${method.methodKind}; only unary methods are supported`);
    }
    if (method.localName === 'close') {
      throw new Error(`createRpcClient(${service.typeName}): a method named close would hide close()`);
    }
    stub[method.localName] = (request: unknown, callOptions?: RpcCallOptions) => call(method, request, callOptions ?? {});
  }
  stub.close = () => {
    if (closed) return;
    closed = true;
    releaseChannel(options.address);
  };

  function call(method: DescMethod, request: unknown, callOptions: RpcCallOptions): Promise<Message> {
    const what = `${service.typeName}/${method.name}`;
    if (closed) return Promise.reject(new ServiceError('unavailable', `${what}: client closed`));
    const { signal } = callOptions;
    if (signal?.aborted) return Promise.reject(new ServiceError('unavailable', `${what}: call cancelled`));

    const message = create(method.input, request as never);
    // Encoded before the call: a value its field cannot hold (a number beyond int32, say) is the
    // caller's input problem, not the INTERNAL status grpc-js would make of a failed serializer.
    let encoded: Buffer;
    try {
      encoded = Buffer.from(toBinary(method.input, message));
    } catch (err) {
      return Promise.reject(
        new ServiceError('invalid-input', 'A value in the request is out of range for its field', {}, { cause: err }),
      );
    }
    const metadata = new (grpcJs().Metadata)();
    const signed = principalSigner.sign(callOptions.principal ?? defaultPrincipal);
    metadata.set(PRINCIPAL_HEADER, signed.principal);
    metadata.set(PRINCIPAL_SIGNATURE_HEADER, signed.signature);

    const span = trace.getTracer(TRACER_NAME).startSpan(what, {
      kind: SpanKind.CLIENT,
      attributes: { 'rpc.system': 'grpc', 'rpc.service': service.typeName, 'rpc.method': method.name },
    });
    propagation.inject(trace.setSpan(context.active(), span), metadata, metadataSetter);
    const started = performance.now();
    const record = (code: number, errorType?: string): void =>
      recordRpcCall('client', {
        method: what,
        statusCode: grpcCodeName(code),
        seconds: (performance.now() - started) / 1000,
        ...(errorType ? { errorType } : {}),
      });

    return new Promise<Message>((resolve, reject) => {
      const onAbort = (): void => pending.cancel();
      const pending = pooled.client.makeUnaryRequest<Buffer, Message>(
        `/${service.typeName}/${method.name}`,
        (bytes) => bytes,
        (bytes) => fromBinary(method.output, bytes),
        encoded,
        metadata,
        { deadline: resolveDeadline(callOptions, defaultDeadlineMs) },
        (err, response) => {
          signal?.removeEventListener('abort', onAbort);
          if (err || !response) {
            const error = statusToServiceError(err ?? { code: GrpcStatus.INTERNAL }, what);
            const code = err?.code ?? GrpcStatus.INTERNAL;
            span.setAttribute('rpc.grpc.status_code', code);
            span.setAttribute('error.type', error.code);
            span.setStatus({ code: SpanStatusCode.ERROR, message: grpcCodeName(code) });
            span.end();
            record(code, error.code);
            reject(error);
            return;
          }
          span.setAttribute('rpc.grpc.status_code', GrpcStatus.OK);
          span.end();
          record(GrpcStatus.OK);
          resolve(response);
        },
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  return stub as RpcClient<S>;
}
