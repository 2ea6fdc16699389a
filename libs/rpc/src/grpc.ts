/**
 * grpc-js, loaded on first use rather than when this package is imported. A thread that makes no
 * gRPC call and serves no gRPC (the gateway's thread beside the services' thread, which reaches
 * the services through a MessagePort) then never loads it; the status codes every transport
 * reports are the protocol's numbers, below.
 */
import { createRequire } from 'node:module';
import type * as Grpc from '@grpc/grpc-js';

const nodeRequire = createRequire(import.meta.url);
let loaded: typeof Grpc | undefined;

export function grpcJs(): typeof Grpc {
  loaded ??= nodeRequire('@grpc/grpc-js') as typeof Grpc;
  return loaded;
}

/** gRPC status codes (the numbers of the gRPC protocol, the same as grpc-js's `status`). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const satisfies Record<keyof typeof Grpc.status, Grpc.status>;

const NAMES: Record<number, string> = Object.fromEntries(Object.entries(GrpcStatus).map(([name, code]) => [code, name]));

/** A status code's name (`NOT_FOUND`), or the number when it is none of the protocol's. */
export function grpcStatusName(code: number): string {
  return NAMES[code] ?? String(code);
}
