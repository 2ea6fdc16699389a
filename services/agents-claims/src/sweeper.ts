import type { ClaimsCore, CoreLogger } from './claims-core.js';

export interface SweeperOptions {
  intervalMs: number;
  /** How often a sweep also reconciles claims with the tasks' mirrors (the first sweep always does). */
  reconcileIntervalMs: number;
  logger: CoreLogger;
}

export interface Sweeper {
  start(): void;
  /** Stops sweeping; resolves when a sweep in progress has finished. */
  stop(): Promise<void>;
  /** One sweep now (tests, and a process that wants to catch up at once). */
  sweepOnce(options?: { reconcile?: boolean }): Promise<void>;
}

/**
 * The sweeper every agents-claims process runs. Several may run at once (replicas): every change
 * a sweep makes is conditional, so two sweepers never end a claim twice or move a task twice.
 */
export function createSweeper(core: ClaimsCore, options: SweeperOptions): Sweeper {
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let current: Promise<void> | undefined;
  let lastReconcile = Number.NEGATIVE_INFINITY;

  const sweep = async (force?: boolean): Promise<void> => {
    const reconcile = force ?? Date.now() - lastReconcile >= options.reconcileIntervalMs;
    if (reconcile) lastReconcile = Date.now();
    try {
      const done = await core.sweep({ reconcile });
      if (Object.values(done).some((n) => n > 0)) options.logger.info(done, 'claims swept');
    } catch (err) {
      options.logger.warn({ err }, 'claim sweep failed; the next sweep retries');
    }
  };

  const schedule = (): void => {
    if (!running) return;
    timer = setTimeout(() => {
      current = sweep().finally(() => {
        current = undefined;
        schedule();
      });
    }, options.intervalMs);
    timer.unref?.();
  };

  return {
    start() {
      running = true;
      schedule();
    },
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      await current;
    },
    async sweepOnce(opts = {}) {
      await sweep(opts.reconcile ?? false);
    },
  };
}
