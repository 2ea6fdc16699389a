import { createHash } from 'node:crypto';
import type { Outbox } from '@planning/outbox';
import { createInProcessLimiter, type RateLimiter } from '@planning/rate-limit';

/** A denial to audit. Ids and kebab-case reasons only: never a token, password, cookie or secret. */
export interface Denial {
  /** `auth.login.denied`, `auth.token.denied` or `access.denied`. */
  type: string;
  workspaceId?: string;
  actor: { type: string; id: string };
  subject: { type: string; id: string };
  reason: string;
}

export interface DenialAuditorOptions {
  outbox: Outbox;
  logger: { warn(obj: object, msg?: string): void; error(obj: object, msg?: string): void };
  perSourcePerMinute: number;
  perMinute: number;
  clock?: () => number;
}

export interface DenialAuditor {
  /**
   * Records a denial through the outbox unless its source (client address and actor) or the
   * replica as a whole is over its budget: then the denial is counted instead, and the counts
   * are written as one `audit.denials-suppressed` event per minute.
   */
  record(denial: Denial, clientAddress: string): Promise<void>;
  /** Writes the pending suppression summary now (tests, shutdown). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Bounds audit volume: a flood of bad tokens or passwords must not write unbounded events (nor
 * fill the outbox and the audit store). Budgets are token buckets per replica.
 */
export function createDenialAuditor(options: DenialAuditorOptions): DenialAuditor {
  const limiter: RateLimiter = createInProcessLimiter({ ...(options.clock ? { clock: options.clock } : {}), maxKeys: 10_000 });
  const perSource = { capacity: options.perSourcePerMinute, refillPerMinute: options.perSourcePerMinute };
  const overall = { capacity: options.perMinute, refillPerMinute: options.perMinute };
  const suppressed = new Map<string, number>();

  const flush = async (): Promise<void> => {
    if (suppressed.size === 0) return;
    const counts = Object.fromEntries(suppressed);
    const total = [...suppressed.values()].reduce((a, b) => a + b, 0);
    suppressed.clear();
    options.logger.warn({ suppressed: counts, total }, 'audit: denial events over budget were counted, not written');
    try {
      await options.outbox.add({
        type: 'audit.denials-suppressed',
        actor: { type: 'system', id: 'gateway' },
        data: { subject: { type: 'gateway', id: 'gateway' }, outcome: 'denied', reason: 'denials-suppressed', suppressed: total },
      });
    } catch (err) {
      options.logger.error({ err }, 'audit: could not record the suppression summary');
    }
  };
  const timer = setInterval(() => void flush(), 60_000);
  timer.unref();

  return {
    async record(denial, clientAddress) {
      const source = createHash('sha256').update(`${clientAddress}\u0000${denial.actor.id}`).digest('base64url');
      const bySource = await limiter.consume(`src:${source}`, perSource);
      const byReplica = bySource.allowed ? await limiter.consume('all', overall) : bySource;
      if (!bySource.allowed || !byReplica.allowed) {
        suppressed.set(denial.reason, (suppressed.get(denial.reason) ?? 0) + 1);
        return;
      }
      await options.outbox.add({
        type: denial.type,
        ...(denial.workspaceId ? { workspaceId: denial.workspaceId } : {}),
        actor: denial.actor,
        data: { subject: denial.subject, outcome: 'denied', reason: denial.reason },
      });
    },
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
      await limiter.close();
    },
  };
}
