/** Where a store reports housekeeping that failed (a callback that threw, an expiry sweep, text indexing). */
export type StoreWarn = (details: Record<string, unknown>, message: string) => void;

/**
 * Without a `warn` option a store reports through `process.emitWarning` (stderr), so nothing is
 * lost in a program that gave it no logger; a service's store gets its logger's `warn`
 * (libs/runtime openServiceStore), so the line is JSON with the service named.
 */
export function warnOf(warn: StoreWarn | undefined): StoreWarn {
  // Refused when the store is made, not when it first has something to report.
  if (warn !== undefined && typeof warn !== 'function') throw new TypeError('warn must be a function');
  return warn ?? ((details, message) => process.emitWarning(`store: ${message}${details.error ? `: ${String(details.error)}` : ''}`));
}

/**
 * Calls a transaction's `onCommitted` (TransactionOptions) once its commit has happened. The
 * transaction is committed whatever the callback does: one that throws is warned about, never
 * reported as the transaction's failure, and never keeps other writes of a batch from resolving.
 */
export function notifyCommitted(onCommitted: (() => void) | undefined, warn: StoreWarn): void {
  if (!onCommitted) return;
  try {
    onCommitted();
  } catch (err) {
    warn({ error: (err as Error).message }, 'an onCommitted callback threw');
  }
}
