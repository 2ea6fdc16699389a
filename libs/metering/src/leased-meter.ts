/**
 * A usage meter that takes quota from the shared counter in leases: under load one store write
 * pays for up to `maxLease` uses instead of one write per use (the gateway meters every API
 * request this way).
 *
 * - The limit holds exactly as with the plain meter: a lease is itself a conditional increment
 *   of the shared counter, so all replicas together never take more than the limit. Near the
 *   limit a lease shrinks to what is left, then to single uses.
 * - A lease starts at one use and doubles while leases run out within `hotMs` of being taken (a
 *   busy workspace), halving again when traffic slows: a quiet workspace costs one write per use,
 *   as before, and nothing is left over to give back.
 * - What a lease has not used yet is counted as used in the store until it is given back: when
 *   the lease has been idle for `idleMs`, when the month changes, and at `close()`. A process
 *   that dies loses at most its unused leases: uses are then over-counted (by at most `maxLease`
 *   per workspace and process), never under-counted, and the limit is never exceeded.
 * - `used()` answers the shared count minus this process's unused lease.
 *
 * Calls inside a transaction (`session`) go straight to the shared counter.
 */
import { quotaPeriod, quotaResetsAt, type QuotaKind } from '@planning/plans';
import type { ConsumeRequest, MeterDecision, UsageMeter } from './usage-meter.js';

export interface LeasedMeterOptions {
  /** The largest lease, in uses (default 64). */
  maxLease?: number;
  /** A lease used up within this long after it was taken makes the next one twice as large (default 1,000 ms). */
  hotMs?: number;
  /** An unused lease untouched this long is given back (default 5,000 ms). */
  idleMs?: number;
  clock?: () => Date;
}

export interface LeasedMeter extends UsageMeter {
  /** Gives back every unused lease (call before the process stops). */
  close(): Promise<void>;
}

interface Lease {
  workspaceId: string;
  kind: QuotaKind;
  period: string;
  /** Uses taken from the shared counter and not handed out yet. */
  available: number;
  /** The shared count after the newest lease (includes `available`). */
  sharedUsed: number;
  /** The size of the next lease. */
  size: number;
  takenAt: number;
  touchedAt: number;
  /** The lease being taken, which concurrent callers wait for. */
  taking: Promise<MeterDecision> | undefined;
}

export function createLeasedMeter(shared: UsageMeter, options: LeasedMeterOptions = {}): LeasedMeter {
  const maxLease = options.maxLease ?? 64;
  const hotMs = options.hotMs ?? 1_000;
  const idleMs = options.idleMs ?? 5_000;
  const clock = options.clock ?? (() => new Date());
  const leases = new Map<string, Lease>();
  let closed = false;
  const keyOf = (workspaceId: string, kind: string, period: string) => `${workspaceId}\u0000${kind}\u0000${period}`;

  const giveBack = async (key: string, lease: Lease): Promise<void> => {
    if (leases.get(key) === lease) leases.delete(key);
    const amount = lease.available;
    lease.available = 0;
    if (amount > 0) await shared.refund({ workspaceId: lease.workspaceId, kind: lease.kind, period: lease.period, amount });
  };

  /** Gives back leases idle for `idleMs` and leases of months that have ended. */
  const sweep = async (): Promise<void> => {
    const now = Date.now();
    const period = quotaPeriod(clock());
    const due = [...leases].filter(([, l]) => l.taking === undefined && (now - l.touchedAt >= idleMs || l.period !== period));
    await Promise.all(due.map(([key, lease]) => giveBack(key, lease)));
  };
  let sweeping: Promise<void> | undefined;
  const timer = setInterval(() => {
    sweeping ??= sweep()
      .catch(() => undefined)
      .finally(() => (sweeping = undefined));
  }, Math.max(250, Math.floor(idleMs / 2)));
  timer.unref();

  const take = async (lease: Lease, request: ConsumeRequest, amount: number, now: Date): Promise<MeterDecision> => {
    const base = { workspaceId: request.workspaceId, kind: request.kind, limit: request.limit, now };
    const started = Date.now();
    if (lease.takenAt > 0) lease.size = started - lease.takenAt < hotMs ? Math.min(maxLease, lease.size * 2) : Math.max(1, Math.floor(lease.size / 2));
    const want = Math.max(amount, lease.size);
    let decision = await shared.tryConsume({ ...base, amount: want });
    let got = want;
    if (!decision.allowed && want > amount && decision.limit !== null) {
      // Not enough left for a whole lease: take what is left (at least this use), else only this use.
      const rest = decision.limit - decision.used;
      if (rest > amount) {
        decision = await shared.tryConsume({ ...base, amount: rest });
        got = rest;
      }
      if (!decision.allowed) {
        decision = await shared.tryConsume({ ...base, amount });
        got = amount;
      }
      lease.size = 1;
    }
    if (decision.allowed) {
      lease.available += got;
      lease.sharedUsed = decision.used;
      lease.takenAt = started;
    }
    return decision;
  };

  return {
    async tryConsume(request) {
      if (request.session || closed) return shared.tryConsume(request);
      const amount = request.amount ?? 1;
      if (!Number.isInteger(amount) || amount <= 0) throw new RangeError(`metering amount must be a positive integer, got ${amount}`);
      const now = request.now ?? clock();
      const period = quotaPeriod(now);
      const key = keyOf(request.workspaceId, request.kind, period);
      const current = (): Lease => {
        let found = leases.get(key);
        if (!found) {
          found = { workspaceId: request.workspaceId, kind: request.kind, period, available: 0, sharedUsed: 0, size: 1, takenAt: 0, touchedAt: 0, taking: undefined };
          leases.set(key, found);
        }
        found.touchedAt = Date.now();
        return found;
      };
      for (;;) {
        // (Again on every turn: a lease given back while this call waited is replaced.)
        const lease = current();
        if (lease.available >= amount) {
          lease.available -= amount;
          return { allowed: true, used: lease.sharedUsed - lease.available, limit: request.limit, period, resetsAt: quotaResetsAt(now).toISOString() };
        }
        if (lease.taking) {
          // Someone is taking a lease: wait for it, then try again (it may already be spent).
          const decision = await lease.taking;
          if (!decision.allowed && lease.available < amount) return { ...decision, used: decision.used - lease.available };
          continue;
        }
        const taking = take(lease, request, amount, now);
        lease.taking = taking;
        try {
          const decision = await taking;
          if (!decision.allowed) return { ...decision, used: decision.used - lease.available };
        } finally {
          lease.taking = undefined;
        }
      }
    },

    refund(request) {
      return shared.refund(request);
    },

    async used(workspaceId, kind, now = clock()) {
      const lease = leases.get(keyOf(workspaceId, kind, quotaPeriod(now)));
      return (await shared.used(workspaceId, kind, now)) - (lease?.available ?? 0);
    },

    async close() {
      closed = true;
      clearInterval(timer);
      await sweeping;
      await Promise.all([...leases].map(([key, lease]) => (lease.taking ?? Promise.resolve()).then(() => giveBack(key, lease))));
    },
  };
}
