/**
 * grpc-js, loaded on first use rather than when this package is imported. A thread that makes no
 * gRPC call and serves no gRPC (the gateway's thread beside the services' thread, which reaches
 * the services through a MessagePort) then never loads it; the status codes every transport
 * reports are the protocol's numbers (GrpcStatus, from @planning/errors).
 */
import { createRequire } from 'node:module';
import type * as Grpc from '@grpc/grpc-js';
import { GrpcStatus } from '@planning/errors';

const nodeRequire = createRequire(import.meta.url);
let loaded: typeof Grpc | undefined;

export function grpcJs(): typeof Grpc {
  loaded ??= nodeRequire('@grpc/grpc-js') as typeof Grpc;
  return loaded;
}

/** gRPC status codes: @planning/errors' table, checked here against grpc-js's own `status` enum. */
export { GrpcStatus };
const checked: Record<keyof typeof Grpc.status, Grpc.status> = GrpcStatus;
void checked;

const NAMES: Record<number, string> = Object.fromEntries(Object.entries(GrpcStatus).map(([name, code]) => [code, name]));

/** A status code's name (`NOT_FOUND`), or the number when it is none of the protocol's. */
export function grpcStatusName(code: number): string {
  return NAMES[code] ?? String(code);
}
