/** The retry policy both adapters apply when a transaction loses a write conflict. */

/** Attempts `withTransaction` makes before a conflict is given up and rethrown. */
export const MAX_TRANSACTION_ATTEMPTS = 20;

/** Jittered exponential backoff, capped so twenty attempts stay within a couple of seconds. */
export function conflictBackoffMs(attempt: number): number {
  return Math.random() * Math.min(100, 2 ** attempt);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
