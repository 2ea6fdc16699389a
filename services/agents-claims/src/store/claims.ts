import type { MeterDecision, UsageMeter } from '@planning/metering';
import { quotaPeriod } from '@planning/plans';
import { recordClaimsExpired } from '@planning/telemetry';
import type { Outbox } from '@planning/outbox';
import { isDuplicateKeyError, type Collection, type DocumentStore, type Filter, type StoredDocument } from '@planning/store';
import type { StoredState } from '../domain/claims.js';

export interface ClaimRecord extends StoredDocument {
  workspaceId: string;
  issueId: string;
  agentId: string;
  /** The API key that claimed. */
  keyId: string;
  state: StoredState;
  /** True once the task is in progress under the claim (the claim was answered). */
  started: boolean;
  /** 0 until started; then the task's token for this claim. */
  fencingToken: number;
  leaseSeconds: number;
  /** The claim is expired from this instant on, swept or not. */
  expiresAt: Date;
  /** The start (the task's move to in-progress) must have happened by then. */
  startBy: Date;
  createdAt: Date;
  startedAt?: Date;
  renewedAt?: Date;
  /** How many times the claim was renewed; each renewal tells the task's mirror its number. */
  renewals?: number;
  endedAt?: Date;
  endReason?: string;
  /** The month (`YYYY-MM`) whose agent-run count this claim took; absent until metered. */
  meteredPeriod?: string;
  refunded?: boolean;
  /**
   * Set when the claim ended here and the issues service still has to hear of it. Once it has,
   * the task also holds a tombstone of the claim until `startBy`: a start of a claim that ended
   * before it started is refused there, so nothing is left to wait for.
   */
  syncPending?: true;
  /** Housekeeping: ended claims disappear after this. */
  purgeAt?: Date;
}

/** Ended claims are kept this long (history, reconciliation), then swept. */
const HISTORY_MS = 30 * 86_400_000;

export const ACTIVE_ISSUE_INDEX = 'active_issue';
export const ACTIVE_AGENT_INDEX = 'active_agent';

export type MeteredInsert =
  | { ok: true; decision: MeterDecision }
  | { ok: false; conflict: 'issue' | 'agent' }
  | { ok: false; denied: MeterDecision; conflict?: undefined };

/** A duplicate key on one of the active-claim indexes: another active claim won the race. */
function conflictOn(err: unknown): 'issue' | 'agent' | undefined {
  if (isDuplicateKeyError(err, ACTIVE_ISSUE_INDEX)) return 'issue';
  if (isDuplicateKeyError(err, ACTIVE_AGENT_INDEX)) return 'agent';
  return undefined;
}

/** Claims metered in one turn, at most (one transaction; see `insertMetered`). */
const METERING_TURN = 64;

interface MeteringRequest {
  record: ClaimRecord;
  meter: UsageMeter;
  limit: number | null;
  now: Date;
  resolve: (outcome: MeteredInsert) => void;
  reject: (err: unknown) => void;
}

interface MeteringTurns {
  waiting: MeteringRequest[];
  /** A turn is running or about to. */
  running: boolean;
}

/** A claim of the turn met an active claim committed meanwhile: its answer, and the turn runs again without it. */
class TurnConflict extends Error {
  constructor(
    readonly index: number,
    readonly on: 'issue' | 'agent',
  ) {
    super(`an active claim on this ${on} exists`);
    this.name = 'TurnConflict';
  }
}

export interface EndRequest {
  state: Exclude<StoredState, 'active'>;
  reason: string;
  now: Date;
  actor: { type: string; id: string };
  /** Further conditions on the active claim (e.g. `expiresAt <= now` for the sweeper). */
  where?: Filter;
  /** The issues service must still be told (the task returns to ready if still under the claim). */
  sync: boolean;
  /** Give back the agent run if the claim was never answered (never started). */
  meter?: UsageMeter;
}

const VERB: Readonly<Record<Exclude<StoredState, 'active'>, string>> = {
  released: 'claim.released',
  completed: 'claim.completed',
  expired: 'claim.expired',
  aborted: 'claim.aborted',
};

/**
 * Claims. The store enforces "one active claim per task and per agent" with two partial unique
 * indexes (state `active`), so one insert decides a race whatever the number of processes.
 * Every later change is conditional on the state it expects (an active claim, a lease not yet
 * past) and written with its event through the outbox.
 */
export class ClaimRepository {
  /** Claims waiting for their workspace's metering turn (see `insertMetered`). */
  private readonly metering = new Map<string, MeteringTurns>();

  private constructor(
    readonly claims: Collection<ClaimRecord>,
    private readonly store: DocumentStore,
    private readonly outbox: Outbox,
  ) {}

  static async open(store: DocumentStore, outbox: Outbox): Promise<ClaimRepository> {
    const claims = store.collection<ClaimRecord>('claims');
    await claims.createIndexes([
      { name: ACTIVE_ISSUE_INDEX, keys: { issueId: 1 }, unique: true, partialFilterExpression: { state: 'active' } },
      { name: ACTIVE_AGENT_INDEX, keys: { workspaceId: 1, agentId: 1 }, unique: true, partialFilterExpression: { state: 'active' } },
      { name: 'state_expiry', keys: { state: 1, expiresAt: 1 } },
      { name: 'state_start', keys: { state: 1, started: 1, startBy: 1 } },
      { name: 'sync_pending', keys: { syncPending: 1 } },
      { name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } },
      { name: 'issue_id', keys: { issueId: 1, _id: 1 } },
      { name: 'purge_ttl', keys: { purgeAt: 1 }, expireAfterSeconds: 0 },
    ]);
    return new ClaimRepository(claims, store, outbox);
  }

  get(id: string): Promise<ClaimRecord | null> {
    return this.claims.findOne({ _id: id });
  }

  activeForIssue(issueId: string): Promise<ClaimRecord | null> {
    return this.claims.findOne({ issueId, state: 'active' });
  }

  /** Claims currently active (the `planning.claims.active` gauge). */
  countActive(): Promise<number> {
    return this.claims.countDocuments({ state: 'active' });
  }

  activeForAgent(workspaceId: string, agentId: string): Promise<ClaimRecord | null> {
    return this.claims.findOne({ workspaceId, agentId, state: 'active' });
  }

  /**
   * The race and the claim's agent run in one transaction (one commit): the insert against the
   * unique indexes first (a conflict is the answer, before the quota), then the month's counter,
   * conditional on the plan's limit; the claim is stored with the period it took. Denied, nothing
   * is stored (the claim never existed). A crash leaves both or neither.
   *
   * Every claim of a workspace writes the same counter, so concurrent transactions on it would
   * mostly lose the write conflict and retry. In this process the claims of a workspace are
   * metered in turns (`meterTurn`): while one turn's transaction runs, the claims that arrive wait,
   * and the next turn takes all of them in one transaction, each claim decided in arrival order
   * exactly as one transaction of its own would decide it. Replicas still may collide; the
   * transaction's retry handles that.
   */
  insertMetered(record: ClaimRecord, meter: UsageMeter, limit: number | null, now: Date): Promise<MeteredInsert> {
    return new Promise<MeteredInsert>((resolve, reject) => {
      let turns = this.metering.get(record.workspaceId);
      if (!turns) {
        turns = { waiting: [], running: false };
        this.metering.set(record.workspaceId, turns);
      }
      turns.waiting.push({ record, meter, limit, now, resolve, reject });
      if (!turns.running) {
        turns.running = true;
        // The claims the same run of code makes (a batch of requests resumed together) share the first turn.
        const started = turns;
        queueMicrotask(() => this.meterTurn(record.workspaceId, started));
      }
    });
  }

  /**
   * One turn: the waiting claims (at most METERING_TURN) in one transaction. The next turn starts
   * once this one has committed (`onCommitted`), not once the commit is on disk: it reads the
   * counter as committed, and the commits reach the disk in order, so turns share flushes.
   */
  private meterTurn(workspaceId: string, turns: MeteringTurns): void {
    const batch = turns.waiting.splice(0, METERING_TURN);
    if (batch.length === 0) {
      turns.running = false;
      if (this.metering.get(workspaceId) === turns) this.metering.delete(workspaceId);
      return;
    }
    let next = false;
    const proceed = () => {
      if (next) return;
      next = true;
      this.meterTurn(workspaceId, turns);
    };
    this.meterBatch(batch, proceed)
      .then(
        (outcomes) => batch.forEach((request, i) => request.resolve(outcomes[i] as MeteredInsert)),
        (err: unknown) => batch.forEach((request) => request.reject(err)),
      )
      .finally(proceed);
  }

  /**
   * The turn's transaction. A claim whose insert meets an active claim committed meanwhile is
   * answered with that conflict and the transaction runs again without it (on MongoDB a failed
   * write aborts the whole transaction); a claim meeting one of the turn's own is answered so
   * without an insert. Denied claims store nothing.
   */
  private async meterBatch(batch: MeteringRequest[], committed: () => void): Promise<MeteredInsert[]> {
    const settled = new Map<number, MeteredInsert>();
    for (;;) {
      try {
        const decided = await this.store.withTransaction(async (session) => {
          const outcomes = new Map(settled);
          const issues = new Set<string>();
          const agents = new Set<string>();
          for (const [i, { record, meter, limit, now }] of batch.entries()) {
            if (outcomes.has(i)) continue;
            // One workspace per turn: the agent's id alone names it.
            if (issues.has(record.issueId) || agents.has(record.agentId)) {
              outcomes.set(i, { ok: false, conflict: issues.has(record.issueId) ? 'issue' : 'agent' });
              continue;
            }
            const metered: ClaimRecord = { ...record, meteredPeriod: quotaPeriod(now) };
            try {
              await this.claims.insertOne(metered, { session });
            } catch (err) {
              const on = conflictOn(err);
              throw on ? new TurnConflict(i, on) : err;
            }
            const decision = await meter.tryConsume({ workspaceId: record.workspaceId, kind: 'agent-runs', limit, now, session });
            if (decision.period !== metered.meteredPeriod) throw new Error(`metered period ${decision.period} is not the claim's ${metered.meteredPeriod}`);
            if (!decision.allowed) {
              // Refused: the transaction's insert of the claim is undone; the counter is unchanged.
              await this.claims.deleteOne({ _id: metered._id }, { session });
              outcomes.set(i, { ok: false, denied: decision });
              continue;
            }
            issues.add(record.issueId);
            agents.add(record.agentId);
            outcomes.set(i, { ok: true, decision });
          }
          return outcomes;
        }, { onCommitted: committed });
        return batch.map((_, i) => decided.get(i) as MeteredInsert);
      } catch (err) {
        if (!(err instanceof TurnConflict)) throw err;
        settled.set(err.index, { ok: false, conflict: err.on });
      }
    }
  }

  /** The task is in progress under the claim: record its token and announce the claim. */
  async markStarted(id: string, fencingToken: number, now: Date, actor: { type: string; id: string }): Promise<ClaimRecord | null> {
    return this.outbox.transaction(async (session) => {
      const started = await this.claims.findOneAndUpdate(
        { _id: id, state: 'active', started: false },
        { $set: { started: true, fencingToken, startedAt: now } },
        { session, returnDocument: 'after' },
      );
      if (!started) return null;
      await this.outbox.add(
        {
          type: 'claim.created',
          workspaceId: started.workspaceId,
          actor,
          data: { subject: { type: 'claim', id }, issueId: started.issueId, agentId: started.agentId },
        },
        { session },
      );
      return started;
    });
  }

  /**
   * Moves an active, started, unexpired claim's expiry and counts the renewal (its number goes to
   * the task's mirror); null when the claim is not (any more). The event is written by
   * `noteRenewed` once the task's mirror has the new expiry too.
   */
  renew(id: string, expiresAt: Date, leaseSeconds: number, now: Date): Promise<ClaimRecord | null> {
    return this.claims.findOneAndUpdate(
      { _id: id, state: 'active', started: true, expiresAt: { $gt: now } },
      { $set: { expiresAt, leaseSeconds, renewedAt: now }, $inc: { renewals: 1 } },
      { returnDocument: 'after' },
    );
  }

  /** `claim.renewed`, for a renewal both stores applied (nothing if the claim ended meanwhile). */
  async noteRenewed(renewed: ClaimRecord, actor: { type: string; id: string }, via: 'heartbeat' | 'status-post'): Promise<void> {
    const id = renewed._id;
    await this.outbox.transaction(async (session) => {
      if (!(await this.claims.findOne({ _id: id, state: 'active' }, { session }))) return;
      await this.outbox.add(
        {
          type: 'claim.renewed',
          workspaceId: renewed.workspaceId,
          actor,
          data: { subject: { type: 'claim', id }, issueId: renewed.issueId, agentId: renewed.agentId, reason: via },
        },
        { session },
      );
    });
  }

  /**
   * Ends an active claim (conditionally: `where` adds to "still active"). Returns the ended claim,
   * or null when another process ended it first (or the conditions do not hold). The event of a
   * claim that was answered (started) is written with the change; a never-answered claim that was
   * metered gets its agent run back in the same transaction.
   */
  async end(id: string, request: EndRequest): Promise<ClaimRecord | null> {
    const ended = await this.outbox.transaction(async (session) => {
      const current = await this.claims.findOne({ _id: id, state: 'active', ...request.where }, { session });
      if (!current) return null;
      const refund = request.meter !== undefined && !current.started && current.meteredPeriod !== undefined && !current.refunded;
      const ended = await this.claims.findOneAndUpdate(
        { _id: id, state: 'active' },
        {
          $set: {
            state: request.state,
            endedAt: request.now,
            endReason: request.reason,
            purgeAt: new Date(request.now.getTime() + HISTORY_MS),
            ...(request.sync ? { syncPending: true } : {}),
            ...(refund ? { refunded: true } : {}),
          },
        },
        { session, returnDocument: 'after' },
      );
      if (!ended) return null;
      if (refund && request.meter && current.meteredPeriod) {
        await request.meter.refund({ workspaceId: current.workspaceId, kind: 'agent-runs', period: current.meteredPeriod, session });
      }
      if (current.started) {
        await this.outbox.add(
          {
            type: VERB[request.state],
            workspaceId: ended.workspaceId,
            actor: request.actor,
            data: { subject: { type: 'claim', id }, issueId: ended.issueId, agentId: ended.agentId, reason: request.reason },
          },
          { session },
        );
      }
      return ended;
    });
    // Every lease that passed is counted once, by whichever path ended its claim (the sweeper, the
    // agent's own next call, the task's event): only one conditional end of a claim succeeds.
    if (ended?.state === 'expired') recordClaimsExpired(1);
    return ended;
  }

  /** The end reached the task (and, for a claim that never started, its tombstone holds off a late start). */
  async clearSync(id: string): Promise<void> {
    await this.claims.updateOne({ _id: id, syncPending: true }, { $unset: { syncPending: '' } });
  }

  /** Active claims whose lease passed. */
  dueExpired(now: Date, limit: number): Promise<ClaimRecord[]> {
    return this.claims.find({ state: 'active', expiresAt: { $lte: now } }, { sort: { expiresAt: 1 }, limit });
  }

  /** Claims whose start should have finished by `cutoff`. */
  dueStarts(cutoff: Date, limit: number): Promise<ClaimRecord[]> {
    return this.claims.find({ state: 'active', started: false, startBy: { $lte: cutoff } }, { sort: { startBy: 1 }, limit });
  }

  /** Ends the issues service has not heard of yet. */
  pendingSync(limit: number): Promise<ClaimRecord[]> {
    return this.claims.find({ syncPending: true }, { limit });
  }

  /** Active, answered claims last changed before `before`, after claim id `after` (reconciliation). */
  settledActive(before: Date, after: string | undefined, limit: number): Promise<ClaimRecord[]> {
    return this.claims.find(
      { state: 'active', started: true, startedAt: { $lte: before }, ...(after ? { _id: { $gt: after } } : {}) },
      { sort: { _id: 1 }, limit },
    );
  }

  /**
   * The latest answered claim of a task (started and not aborted: its agent was told it holds it),
   * or of one agent on it. Ids grow with time, and a task's claims follow one another.
   */
  async latestAnswered(issueId: string, agentId?: string): Promise<ClaimRecord | null> {
    const rows = await this.claims.find(
      { issueId, started: true, state: { $ne: 'aborted' }, ...(agentId !== undefined ? { agentId } : {}) },
      { sort: { _id: -1 }, limit: 1 },
    );
    return rows[0] ?? null;
  }

  getMany(ids: readonly string[]): Promise<ClaimRecord[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.claims.find({ _id: { $in: [...ids] } });
  }

  /** Active claims on any of `issueIds`. */
  activeOn(issueIds: readonly string[]): Promise<ClaimRecord[]> {
    if (issueIds.length === 0) return Promise.resolve([]);
    return this.claims.find({ issueId: { $in: [...issueIds] }, state: 'active' });
  }

  /** The tasks of a workspace's claims still starting (at most `limit`). */
  async startingIssueIds(workspaceId: string, limit: number): Promise<string[]> {
    const rows = await this.claims.find({ workspaceId, state: 'active', started: false }, { limit, projection: { issueId: 1 } });
    return rows.map((r) => r.issueId);
  }

  /** A page of a workspace's claims, newest first. */
  list(filter: Filter, limit: number, before?: string): Promise<ClaimRecord[]> {
    return this.claims.find({ ...filter, ...(before ? { _id: { $lt: before } } : {}) }, { sort: { _id: -1 }, limit });
  }
}
