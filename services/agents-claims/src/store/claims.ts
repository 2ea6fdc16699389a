import type { MeterDecision, UsageMeter } from '@planning/metering';
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

/** The claim went away (ended by another process) before this step could apply. */
export class ClaimGoneError extends Error {
  constructor(id: string) {
    super(`claim ${id} is no longer active`);
    this.name = 'ClaimGoneError';
  }
}

export type InsertOutcome = { ok: true } | { ok: false; conflict: 'issue' | 'agent' };

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
  /** Metering transactions in flight per workspace, chained (see `meter`). */
  private readonly metering = new Map<string, Promise<unknown>>();

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

  /** The race: the unique indexes let one active claim per task and per agent in. */
  async insert(record: ClaimRecord): Promise<InsertOutcome> {
    try {
      await this.claims.insertOne(record);
      return { ok: true };
    } catch (err) {
      if (isDuplicateKeyError(err, ACTIVE_ISSUE_INDEX)) return { ok: false, conflict: 'issue' };
      if (isDuplicateKeyError(err, ACTIVE_AGENT_INDEX)) return { ok: false, conflict: 'agent' };
      throw err;
    }
  }

  /**
   * Meters the claim's agent run: the month's counter and the claim's note of it change in one
   * transaction, so a crash leaves either both or neither. Throws ClaimGoneError (nothing counted)
   * when the claim ended meanwhile.
   */
  async meter(claim: ClaimRecord, meter: UsageMeter, limit: number | null, now: Date): Promise<MeterDecision> {
    // Every claim of a workspace writes the same counter: concurrent transactions on it would
    // mostly lose the write conflict and retry. One at a time per workspace in this process keeps
    // them from colliding; replicas still may, and the transaction's retry handles that.
    const previous = this.metering.get(claim.workspaceId) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(() => this.meterNow(claim, meter, limit, now));
    this.metering.set(claim.workspaceId, run);
    try {
      return await run;
    } finally {
      if (this.metering.get(claim.workspaceId) === run) this.metering.delete(claim.workspaceId);
    }
  }

  private async meterNow(claim: ClaimRecord, meter: UsageMeter, limit: number | null, now: Date): Promise<MeterDecision> {
    return this.store.withTransaction(async (session) => {
      const decision = await meter.tryConsume({ workspaceId: claim.workspaceId, kind: 'agent-runs', limit, now, session });
      if (!decision.allowed) return decision;
      const noted = await this.claims.updateOne(
        { _id: claim._id, state: 'active', started: false, meteredPeriod: { $exists: false } },
        { $set: { meteredPeriod: decision.period } },
        { session },
      );
      if (noted.matchedCount === 0) throw new ClaimGoneError(claim._id);
      return decision;
    });
  }

  /** Removes a claim that was refused before anyone saw it (quota): it never held anything. */
  async discard(id: string): Promise<void> {
    await this.claims.deleteOne({ _id: id, state: 'active', started: false, meteredPeriod: { $exists: false } });
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
    return this.outbox.transaction(async (session) => {
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
