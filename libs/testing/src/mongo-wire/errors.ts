/**
 * Command errors as MongoDB replies them (`ok: 0`, `code`, `codeName`, `errmsg`, `errorLabels`),
 * and the translation of the embedded engine's errors into them.
 */
import type { Document } from 'bson';
import { DuplicateKeyError, TransactionConflictError } from '@planning/store';

/** The MongoDB error codes this server replies with (names as MongoDB's `codeName`). */
export const Codes = {
  InternalError: 1,
  BadValue: 2,
  FailedToParse: 9,
  Unauthorized: 13,
  TypeMismatch: 14,
  NamespaceNotFound: 26,
  IndexNotFound: 27,
  CursorNotFound: 43,
  NamespaceExists: 48,
  CommandNotFound: 59,
  CannotCreateIndex: 67,
  InvalidOptions: 72,
  InvalidNamespace: 73,
  IndexOptionsConflict: 85,
  IndexKeySpecsConflict: 86,
  WriteConflict: 112,
  ConflictingOperationInProgress: 117,
  TransactionTooOld: 225,
  NotImplemented: 238,
  NoSuchTransaction: 251,
  TransactionCommitted: 256,
  OperationNotSupportedInTransaction: 263,
  UnsupportedOpQueryCommand: 352,
  DuplicateKey: 11000,
  UnknownField: 40415,
} as const;

export type CodeName = keyof typeof Codes;

export const TRANSIENT_TRANSACTION_ERROR = 'TransientTransactionError';

export class CommandError extends Error {
  readonly code: number;
  constructor(
    readonly codeName: CodeName,
    message: string,
    /** Extra reply fields (`keyPattern`, `keyValue` for duplicate keys). */
    readonly extra: Document = {},
    readonly labels: readonly string[] = [],
  ) {
    super(message);
    this.name = 'CommandError';
    this.code = Codes[codeName];
  }

  withLabel(label: string): CommandError {
    if (this.labels.includes(label)) return this;
    return new CommandError(this.codeName, this.message, this.extra, [...this.labels, label]);
  }

  /** The top-level failure reply. */
  toReply(): Document {
    const reply: Document = { ok: 0, errmsg: this.message, code: this.code, codeName: this.codeName, ...this.extra };
    if (this.labels.length > 0) reply.errorLabels = [...this.labels];
    return reply;
  }

  /** One entry of a write command's `writeErrors`. */
  toWriteError(index: number): Document {
    return { index, code: this.code, codeName: this.codeName, errmsg: this.message, ...this.extra };
  }
}

export function notSupported(what: string): CommandError {
  return new CommandError('NotImplemented', `${what} is not supported by mongo-wire (the embedded store behind MongoDB's protocol, not MongoDB)`);
}

function formatKeyValue(keyValue: Document): string {
  const parts = Object.entries(keyValue).map(([k, v]) => {
    const shown = v instanceof Date ? `new Date(${v.getTime()})` : v === undefined ? 'null' : JSON.stringify(v);
    return `${k}: ${shown}`;
  });
  return parts.length > 0 ? `{ ${parts.join(', ')} }` : '{}';
}

/** MongoDB's E11000 error, naming the namespace and the index the way drivers and our adapter parse it. */
export function duplicateKeyError(ns: string, index: string, keyPattern?: Document, keyValue?: Document): CommandError {
  const extra: Document = {};
  if (keyPattern) extra.keyPattern = keyPattern;
  if (keyValue) extra.keyValue = keyValue;
  const dup = keyValue ? ` dup key: ${formatKeyValue(keyValue)}` : ' dup key: { : ? }';
  return new CommandError('DuplicateKey', `E11000 duplicate key error collection: ${ns} index: ${index}${dup}`, extra);
}

export function writeConflict(message: string): CommandError {
  return new CommandError('WriteConflict', `WriteConflict error: this operation conflicted with another operation. ${message}`, {}, [TRANSIENT_TRANSACTION_ERROR]);
}

/**
 * Any error thrown while running a command, as a CommandError. The engine validates filters,
 * updates and documents with TypeError/Error and a message naming the problem: those become
 * BadValue with that message. Duplicate keys need the namespace and key: `dupKey` supplies them.
 */
export function toCommandError(err: unknown, dupKey?: (e: DuplicateKeyError) => CommandError): CommandError {
  if (err instanceof CommandError) return err;
  if (err instanceof DuplicateKeyError) return dupKey ? dupKey(err) : duplicateKeyError('?', err.index);
  if (err instanceof TransactionConflictError) return writeConflict(err.message);
  if (err instanceof Error) return new CommandError('BadValue', err.message);
  return new CommandError('InternalError', String(err));
}
