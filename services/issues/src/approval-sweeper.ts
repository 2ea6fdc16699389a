/**
 * Records expired approval requests: every `intervalMs`, pending requests past their `expiresAt`
 * become `expired`, with activity on the task and an `approval.expired` event. Several issues
 * processes may sweep at once: each change is conditional on the request still pending. A request
 * stops blocking at `expiresAt` whether or not this has run (every check compares with it).
 */
import type { TaskRecordRepository } from './store/task-records.js';

export interface ApprovalSweeper {
  start(): void;
  /** Stops; resolves when a sweep in progress has finished. */
  stop(): Promise<void>;
}

export function createApprovalSweeper(
  records: Pick<TaskRecordRepository, 'expireDue'>,
  options: { intervalMs: number; clock: () => Date; logger: { info(o: object, m?: string): void; warn(o: object, m?: string): void } },
): ApprovalSweeper {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = true;

  const sweep = async (): Promise<void> => {
    try {
      // Full batches mean a backlog: go on until it is cleared.
      for (;;) {
        const expired = await records.expireDue(options.clock(), 100);
        if (expired.length > 0) options.logger.info({ expired: expired.length }, 'approval requests expired');
        if (expired.length < 100 || stopped) break;
      }
    } catch (err) {
      options.logger.warn({ err }, 'approval expiry sweep failed; the next one retries');
    }
  };

  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = sweep().finally(() => {
        running = undefined;
        schedule();
      });
    }, options.intervalMs);
    timer.unref?.();
  };

  return {
    start() {
      stopped = false;
      schedule();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
