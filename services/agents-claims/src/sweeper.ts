import { recordSweep, traceIfWorked } from '@planning/telemetry';
import type { ClaimsCore, CoreLogger } from './claims-core.js';
import { SweepFailedError } from './core/upkeep.js';

export interface SweeperOptions {
  intervalMs: number;
  /** How often claims are reconciled with the tasks' mirrors (in a loop of its own; the first time one sweep interval after start). */
  reconcileIntervalMs: number;
  logger: CoreLogger;
}

export interface Sweeper {
  start(): void;
  /** Stops sweeping and reconciling; resolves when a sweep or reconciliation in progress has finished. */
  stop(): Promise<void>;
  /** One sweep now (tests, and a process that wants to catch up at once); with `reconcile`, a reconciliation after it. */
  sweepOnce(options?: { reconcile?: boolean }): Promise<void>;
}

type SweepCore = Pick<ClaimsCore, 'sweep' | 'reconcileAll'>;

/**
 * The sweeper every agents-claims process runs. Several may run at once (replicas): every change
 * a sweep makes is conditional, so two sweepers never end a claim twice or move a task twice.
 * Two loops: the sweep (expiries, repairs, pending ends) every `intervalMs`, and reconciliation
 * (a walk of every claimed task, one issues call per claim) every `reconcileIntervalMs`. They run
 * apart so that reconciling many claims never holds up expiries past the 10-second bound.
 */
export function createSweeper(core: SweepCore, options: SweeperOptions): Sweeper {
  let running = false;
  const timers = new Set<NodeJS.Timeout>();
  const inProgress = new Set<Promise<void>>();

  // Every few seconds, and usually with nothing to do: a run's trace is kept only when it changed
  // something or failed (traceIfWorked), while its duration and result are always measured.
  const sweep = async (): Promise<void> => {
    const started = performance.now();
    try {
      const didWork = (d: object) => Object.values(d).some((n) => typeof n === 'number' && n > 0);
      const done = await traceIfWorked(
        'claims.sweep',
        async () => {
          // Logged inside the run's span, so the line carries the trace id of the kept trace. A
          // sweep with a failed step still reports what its other steps did.
          const result = await core.sweep({ reconcile: false }).catch((err: unknown) => {
            if (err instanceof SweepFailedError && didWork(err.done)) options.logger.info({ ...err.done, failedSteps: err.failedSteps }, 'claims swept');
            throw err;
          });
          if (didWork(result)) options.logger.info(result, 'claims swept');
          return result;
        },
        didWork,
      );
      recordSweep(didWork(done) ? 'worked' : 'idle', (performance.now() - started) / 1000);
      // (Expired claims are counted where their claims end: see ClaimRepository.end.)
    } catch (err) {
      recordSweep('failed', (performance.now() - started) / 1000);
      options.logger.warn({ err }, 'claim sweep failed; the next sweep retries');
    }
  };

  const reconcile = async (): Promise<void> => {
    try {
      await traceIfWorked(
        'claims.reconcile',
        async () => {
          const reconciled = await core.reconcileAll();
          if (reconciled > 0) options.logger.info({ reconciled }, 'claims reconciled');
          return reconciled;
        },
        (n) => n > 0,
      );
    } catch (err) {
      options.logger.warn({ err }, 'claim reconciliation failed; the next one retries');
    }
  };

  /** Runs `fn` after `delayMs`, then again `intervalMs` after each run ends, while running. */
  const loop = (fn: () => Promise<void>, delayMs: number, intervalMs: number): void => {
    if (!running) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      const run = fn().finally(() => {
        inProgress.delete(run);
        loop(fn, intervalMs, intervalMs);
      });
      inProgress.add(run);
    }, delayMs);
    timer.unref?.();
    timers.add(timer);
  };

  return {
    start() {
      running = true;
      loop(sweep, options.intervalMs, options.intervalMs);
      // The first reconciliation one sweep interval after start (as the first sweep), then on its own interval.
      loop(reconcile, options.intervalMs, options.reconcileIntervalMs);
    },
    async stop() {
      running = false;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await Promise.all([...inProgress]);
    },
    async sweepOnce(opts = {}) {
      await sweep();
      if (opts.reconcile) await reconcile();
    },
  };
}
