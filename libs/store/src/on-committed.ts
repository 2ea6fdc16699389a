/**
 * Calls a transaction's `onCommitted` (TransactionOptions) once its commit has happened. The
 * transaction is committed whatever the callback does: one that throws is warned about, never
 * reported as the transaction's failure, and never keeps other writes of a batch from resolving.
 */
export function notifyCommitted(onCommitted: (() => void) | undefined): void {
  if (!onCommitted) return;
  try {
    onCommitted();
  } catch (err) {
    process.emitWarning(`store: an onCommitted callback threw: ${(err as Error).message}`);
  }
}
