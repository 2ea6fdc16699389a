import type { Metadata, StatusObject } from '@grpc/grpc-js';
import { ERROR_TABLE, ServiceError, isErrorCode, type ErrorDetails } from '@planning/errors';
import { grpcJs, grpcStatusName, GrpcStatus as GrpcCode } from './grpc.js';

/** Trailing metadata that carries a ServiceError across gRPC exactly. */
export const ERROR_CODE_HEADER = 'x-error-code';
export const ERROR_DETAILS_HEADER = 'x-error-details';

/** The status a handler's failure ends the call with. Only ServiceError messages reach the caller. */
export function serviceErrorToStatus(error: ServiceError): StatusObject {
  const metadata = new (grpcJs().Metadata)();
  metadata.set(ERROR_CODE_HEADER, error.code);
  metadata.set(ERROR_DETAILS_HEADER, asciiJson(error.details));
  return { code: ERROR_TABLE[error.code].grpc, details: error.message, metadata };
}

/** gRPC status names, for span attributes and logs. */
export function grpcCodeName(code: number): string {
  return grpcStatusName(code);
}

interface GrpcCallError {
  code?: number;
  details?: string;
  metadata?: Metadata;
}

/**
 * Turns a failed call back into the ServiceError the server threw, when the server is ours (it
 * sent x-error-code); otherwise classifies the transport failure. Transport details (addresses,
 * socket errors) stay in `cause`, never in the message, because messages reach API callers;
 * `what` (the method) is rewritten to its service's name when a message is answered
 * (`publicMessage` in @planning/errors).
 */
export function statusToServiceError(error: GrpcCallError, what: string): ServiceError {
  const code = firstString(error.metadata, ERROR_CODE_HEADER);
  if (isErrorCode(code)) {
    return new ServiceError(code, error.details ?? '', parseDetails(firstString(error.metadata, ERROR_DETAILS_HEADER)));
  }
  switch (error.code) {
    case GrpcCode.DEADLINE_EXCEEDED:
      return new ServiceError('unavailable', `${what} did not answer within the deadline; try again`, {}, { cause: error });
    case GrpcCode.UNAVAILABLE:
      return new ServiceError('unavailable', `${what} cannot be reached; try again shortly`, {}, { cause: error });
    case GrpcCode.CANCELLED:
      return new ServiceError('unavailable', `${what} call was cancelled; try again`, {}, { cause: error });
    default:
      return new ServiceError('internal', 'Internal error', {}, { cause: error });
  }
}

function firstString(metadata: Metadata | undefined, key: string): string | undefined {
  const value = metadata?.get(key)[0];
  return typeof value === 'string' ? value : undefined;
}

function parseDetails(raw: string | undefined): ErrorDetails {
  if (!raw) return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as ErrorDetails) : {};
  } catch {
    return {};
  }
}

/** JSON with every non-ASCII character escaped: plain (non -bin) metadata values must be printable ASCII. */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
