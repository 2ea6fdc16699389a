/**
 * The one error type of the service and the one table that maps each error code to an HTTP
 * status, a gRPC status and a JSON-RPC error code. Domain code throws `ServiceError`; only the
 * edges (HTTP routes, gRPC handlers and clients, the MCP endpoint) translate it.
 */

import { redactSecrets } from './redact.js';

export { looksSecret, redactSecrets } from './redact.js';

export const ERROR_CODES = [
  'invalid-input',
  'unauthorized',
  'forbidden',
  'not-found',
  'work-already-claimed',
  'quota-exceeded',
  'rate-limited',
  'not-entitled',
  'method-not-allowed',
  'payload-too-large',
  'uri-too-long',
  'headers-too-large',
  'internal',
  'unavailable',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** gRPC status codes (numeric values from the gRPC specification). */
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
} as const;

export interface ErrorMapping {
  http: number;
  grpc: number;
  jsonRpc: number;
}

/**
 * The error table. JSON-RPC codes: -32602 (invalid params) and -32603 (internal error) come from
 * the JSON-RPC specification; the others sit in the implementation-defined server range.
 */
export const ERROR_TABLE: Readonly<Record<ErrorCode, ErrorMapping>> = {
  'invalid-input': { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT, jsonRpc: -32602 },
  unauthorized: { http: 401, grpc: GrpcStatus.UNAUTHENTICATED, jsonRpc: -32001 },
  forbidden: { http: 403, grpc: GrpcStatus.PERMISSION_DENIED, jsonRpc: -32003 },
  'not-found': { http: 404, grpc: GrpcStatus.NOT_FOUND, jsonRpc: -32004 },
  'work-already-claimed': { http: 409, grpc: GrpcStatus.ABORTED, jsonRpc: -32009 },
  'quota-exceeded': { http: 403, grpc: GrpcStatus.RESOURCE_EXHAUSTED, jsonRpc: -32005 },
  'rate-limited': { http: 429, grpc: GrpcStatus.RESOURCE_EXHAUSTED, jsonRpc: -32029 },
  'not-entitled': { http: 403, grpc: GrpcStatus.PERMISSION_DENIED, jsonRpc: -32006 },
  'method-not-allowed': { http: 405, grpc: GrpcStatus.UNIMPLEMENTED, jsonRpc: -32601 },
  'payload-too-large': { http: 413, grpc: GrpcStatus.INVALID_ARGUMENT, jsonRpc: -32602 },
  // Refused by the HTTP layer before any route runs (the request line or headers are too long).
  'uri-too-long': { http: 414, grpc: GrpcStatus.INVALID_ARGUMENT, jsonRpc: -32600 },
  'headers-too-large': { http: 431, grpc: GrpcStatus.INVALID_ARGUMENT, jsonRpc: -32600 },
  internal: { http: 500, grpc: GrpcStatus.INTERNAL, jsonRpc: -32603 },
  unavailable: { http: 503, grpc: GrpcStatus.UNAVAILABLE, jsonRpc: -32000 },
};

/** The reasons a 409 carries in `error.reason` (DECISIONS §5). */
export type ConflictReason =
  | 'active-claim'
  | 'agent-busy'
  | 'invalid-transition'
  | 'dependencies-open'
  | 'not-ready'
  | 'idempotency-in-flight'
  | 'stale-claim'
  | 'version-conflict'
  | 'evidence-missing'
  | 'approval-pending'
  | 'approval-required';

/** The redacted quota object of a 403 `quota-exceeded` (DECISIONS §2). */
export interface QuotaInfo {
  kind: string;
  limit: number;
  used: number;
  resetsAt: string;
}

export interface ErrorDetails {
  /** Machine-readable refinement of the code, e.g. `agent-busy` for a 409. */
  reason?: string;
  /** The request field that was wrong, for `invalid-input`. */
  field?: string;
  quota?: QuotaInfo;
  /** Seconds until a retry may succeed (`rate-limited`). */
  retryAfterSeconds?: number;
  /** Ids that failed a preflight (bulk update). Never titles or bodies. */
  failedIds?: string[];
  /** Acceptance checks the done policy still needs evidence for (`evidence-missing`). */
  missingCheckIds?: string[];
}

export interface ErrorBody {
  error: {
    code: ErrorCode;
    message: string;
    reason?: string;
    field?: string;
    quota?: QuotaInfo;
    failedIds?: string[];
    missingCheckIds?: string[];
  };
}

export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ServiceError';
    this.code = code;
    this.details = details;
  }

  get httpStatus(): number {
    return ERROR_TABLE[this.code].http;
  }

  get grpcStatus(): number {
    return ERROR_TABLE[this.code].grpc;
  }

  get jsonRpcCode(): number {
    return ERROR_TABLE[this.code].jsonRpc;
  }

  /** The documented envelope. Messages and field names may echo input, so credentials in them are redacted. */
  toBody(): ErrorBody {
    const body: ErrorBody = { error: { code: this.code, message: publicMessage(this.message) } };
    if (this.details.reason !== undefined) body.error.reason = this.details.reason;
    if (this.details.field !== undefined) body.error.field = redactSecrets(this.details.field);
    if (this.details.quota !== undefined) body.error.quota = this.details.quota;
    if (this.details.failedIds !== undefined) body.error.failedIds = this.details.failedIds;
    if (this.details.missingCheckIds !== undefined) body.error.missingCheckIds = this.details.missingCheckIds;
    return body;
  }
}

/**
 * A message as callers may see it: credentials redacted, and internal gRPC method names
 * (`planning.issues.v1.TaskService/GetTask`) replaced by the service they belong to.
 */
export function publicMessage(message: string): string {
  return redactSecrets(message).replace(/(^|\b)planning\.([a-z]+)\.v\d+\.[A-Za-z]+\/[A-Za-z]+/g, (_m, start: string, pkg: string) =>
    `${start}${start === '' ? 'The' : 'the'} ${SERVICE_OF_PACKAGE[pkg] ?? pkg} service`,
  );
}

/** Proto packages (`planning.<package>.v1`) by the service that serves them. */
const SERVICE_OF_PACKAGE: Record<string, string> = {
  issues: 'issues',
  claims: 'agents-claims',
  imports: 'imports-exports',
  exports: 'imports-exports',
  audit: 'audit',
  usage: 'usage',
};

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

export function isServiceError(value: unknown): value is ServiceError {
  return value instanceof ServiceError;
}

/**
 * Turns anything thrown into a ServiceError. Unknown errors become `internal` with a generic
 * message; the caller logs the original cause.
 */
export function toServiceError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  return new ServiceError('internal', 'Internal error', {}, { cause: err });
}

export const invalidInput = (field: string, message: string): ServiceError =>
  new ServiceError('invalid-input', message, { field });

export const notFound = (what: string): ServiceError => new ServiceError('not-found', `${what} not found`);

export const forbidden = (message = 'Forbidden'): ServiceError => new ServiceError('forbidden', message);

export const unauthorized = (message = 'Authentication required'): ServiceError =>
  new ServiceError('unauthorized', message);

export const conflict = (reason: ConflictReason, message: string): ServiceError =>
  new ServiceError('work-already-claimed', message, { reason });
