import { conflict, ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import type { Outbox } from '@planning/outbox';
import { isDuplicateKeyError, type DocumentStore, type Filter, type StoreSession } from '@planning/store';
import { endedBeforeStart, isUnexpired, liveEndedClaims, queueKeyOf, startRefusal, withEndedClaim, type ClaimMirror, type EndedClaim, type EndOutcome } from '../domain/claims.js';
import { applyPatch } from '../domain/tasks.js';
import { ANY_AGENT, fieldsOf, queueAgentOf, type Actor, type CommentRecord, type TaskRecord } from './task-documents.js';
import type { TaskRecordRepository } from './task-records.js';
import type { ChangeKind, TaskRepository } from './tasks.js';

/** Frozen: the store compiles it once (a frozen projection cannot change under its copier). */
const PROJECTION = Object.freeze({ searchText: 0 } as const);

const END_KINDS: Readonly<Record<EndOutcome, ChangeKind>> = {
  released: 'claim-released',
  expired: 'claim-expired',
  aborted: 'claim-aborted',
};

export interface StartInput {
  issueId: string;
  claimId: string;
  agentId: string;
  expiresAt: string;
  /** No start after this instant (RFC 3339). */
  startBy: string;
  actor: Actor;
  /** Read inside every attempt of the transaction: a retried attempt must not start late. */
  clock: () => Date;
}

export interface ReadyPage {
  tasks: { task: TaskRecord; rank: number }[];
  total: number;
  blocked: number;
  /** Tasks of the queue without open dependencies among the given starting claims' tasks. */
  starting: number;
  /** The queue key and rank of the page's last task, when there may be more. */
  next?: { after: string; rank: number };
}

/** The issues store's record of one-time data migrations done (`_id`: the migration's name). */
const MIGRATIONS = 'issues_migrations';
const QUEUE_KEYS = 'queue-keys';

/**
 * Tasks stored before the queue key (or the queue's agent) existed get theirs (the ready queue
 * walks them). Idempotent: each update is conditional on the key still missing, so replicas
 * starting together agree. Once done it is recorded, and later starts skip it: finding the tasks
 * without keys reads every task (about 120 ms at 100,000 tasks, more from a cold disk), and every
 * task written since the queue key existed has both. (A release from before the queue key,
 * writing beside this one after the record was made, would leave tasks out of the ready queue
 * until they are next written; no such release runs beside this one.)
 */
async function backfillQueueKeys(tasks: TaskRepository, store: DocumentStore): Promise<void> {
  const migrations = store.collection<{ _id: string; doneAt: string }>(MIGRATIONS);
  if (await migrations.findOne({ _id: QUEUE_KEYS })) return;
  await fillQueueKeys(tasks);
  try {
    await migrations.insertOne({ _id: QUEUE_KEYS, doneAt: new Date().toISOString() });
  } catch (err) {
    // Another replica recorded it first.
    if (!isDuplicateKeyError(err)) throw err;
  }
}

async function fillQueueKeys(tasks: TaskRepository): Promise<void> {
  for (;;) {
    const missing = await tasks.tasks.find(
      { $or: [{ queueKey: { $exists: false } }, { queueAgent: { $exists: false } }] },
      { limit: 500, projection: { _id: 1, priority: 1, dueDate: 1, createdAt: 1, agent: 1, queueKey: 1, queueAgent: 1 } },
    );
    if (missing.length === 0) return;
    for (const t of missing) {
      if (t.queueKey === undefined) {
        const key = queueKeyOf({ id: t._id, priority: t.priority, createdAt: t.createdAt, ...(t.dueDate !== undefined ? { dueDate: t.dueDate } : {}) });
        await tasks.tasks.updateOne({ _id: t._id, queueKey: { $exists: false } }, { $set: { queueKey: key } });
      }
      if (t.queueAgent === undefined) {
        // Conditional on the assignment read: a change meanwhile wrote the key itself.
        const assigned = t.agent.assignedAgentId;
        await tasks.tasks.updateOne(
          { _id: t._id, queueAgent: { $exists: false }, 'agent.assignedAgentId': assigned === undefined ? { $exists: false } : assigned },
          { $set: { queueAgent: queueAgentOf(t) } },
        );
      }
    }
  }
}

/** A new task id can never start with this; claim ids sort above it. */
const NO_CLAIM = '';

/**
 * The issues side of claims: a task in progress under a claim carries its mirror, written in the
 * same change as the status (through `TaskRepository.write`, so activity, events and the
 * dependency graph stay right). Every change here is conditional on what it read inside one
 * transaction, so concurrent starts, ends and sweeps of the same claim decide once.
 */
export class ClaimSupportRepository {
  private constructor(
    private readonly tasks: TaskRepository,
    private readonly records: TaskRecordRepository,
    private readonly outbox: Outbox,
  ) {}

  static async open(outbox: Outbox, tasks: TaskRepository, records: TaskRecordRepository, store: DocumentStore): Promise<ClaimSupportRepository> {
    await tasks.tasks.createIndexes([
      // An agent's ready queue: ordered walks of one workspace's ready tasks for the agent and for
      // anyone, each stopping after a page; and index-only counts of the queue and its blocked part.
      { name: 'ws_status_agent_queue', keys: { workspaceId: 1, status: 1, queueAgent: 1, queueKey: 1 } },
      { name: 'ws_status_agent_open', keys: { workspaceId: 1, status: 1, queueAgent: 1, openDependencyCount: 1 } },
      // The task an agent holds (at most one in progress under its claim).
      { name: 'claim_agent', keys: { 'claim.agentId': 1, workspaceId: 1, status: 1 } },
      // Expired claims, for the sweeper; claims by id, for reconciling with the claims store.
      { name: 'claim_expiry', keys: { 'claim.expiresAt': 1 } },
      { name: 'claim_id', keys: { 'claim.claimId': 1 } },
    ]);
    await backfillQueueKeys(tasks, store);
    return new ClaimSupportRepository(tasks, records, outbox);
  }

  get(issueId: string, session?: StoreSession): Promise<TaskRecord | null> {
    return this.tasks.get(issueId, session);
  }

  /** ready -> in-progress under the claim, with the next fencing token. Idempotent for the same claim. */
  async start(input: StartInput): Promise<TaskRecord> {
    return this.outbox.transaction(async (session) => {
      const now = input.clock();
      const current = await this.tasks.get(input.issueId, session);
      if (!current) throw new ServiceError('not-found', 'Issue not found');
      if (current.claim?.claimId === input.claimId) return current;
      if (now.toISOString() > input.startBy) {
        throw conflict('stale-claim', 'The claim did not start in time; it is being ended. Claim the issue again');
      }
      if (input.expiresAt <= now.toISOString()) {
        throw conflict('stale-claim', 'The claim expired before its work started; claim the issue again');
      }
      // The claim ended here before its start arrived (the claiming request gave up): it never
      // starts. The end wrote this document, so a start racing it conflicts and reads it again.
      if (endedBeforeStart(current.endedClaims, input.claimId)) {
        throw conflict('stale-claim', 'The claim was ended before its work started; claim the issue again');
      }
      const refusal = startRefusal(
        {
          status: current.status,
          openDependencyCount: current.openDependencyCount,
          ...(current.agent.assignedAgentId !== undefined ? { assignedAgentId: current.agent.assignedAgentId } : {}),
          ...(current.claim ? { claim: current.claim } : {}),
        },
        input.agentId,
        now,
      );
      if (refusal) throw refusal;
      const { next, changes } = applyPatch(fieldsOf(current), { status: 'in-progress' }, 'claim', () => newId('chk'));
      const claim: ClaimMirror = {
        claimId: input.claimId,
        agentId: input.agentId,
        fencingToken: (current.lastFencingToken ?? 0) + 1,
        expiresAt: input.expiresAt,
      };
      const ctx = { actor: input.actor, now, moveActor: 'claim' as const };
      // Tombstones past their time go with the start (one write of the document).
      const live = liveEndedClaims(current.endedClaims, now);
      return (await this.tasks.write(current, next, changes, ctx, session, 'claimed', { start: claim, ...(sameEndedClaims(live, current.endedClaims) ? {} : { endedClaims: live }) })).task;
    });
  }

  /**
   * Stores the task's tombstones as `list` when they differ from what it has (an entry added, or
   * entries past their `until` pruned). Not a change of the task: no version, no activity.
   */
  private async setEndedClaims(task: TaskRecord, list: EndedClaim[], session: StoreSession): Promise<TaskRecord> {
    if (sameEndedClaims(list, task.endedClaims)) return task;
    const { endedClaims: _old, ...rest } = task;
    if (list.length === 0) {
      await this.tasks.tasks.updateOne({ _id: task._id }, { $unset: { endedClaims: '' } }, { session });
      return rest as TaskRecord;
    }
    await this.tasks.tasks.updateOne({ _id: task._id }, { $set: { endedClaims: list } }, { session });
    return { ...rest, endedClaims: list } as TaskRecord;
  }

  /**
   * Sets the mirror's expiry to the claim's, from renewal number `renewal`, while the task is in
   * progress under this unexpired claim. The expiry is the claim's (it may move back: a lowered
   * lease), taken only from a renewal newer than the mirror's, so a late renewal changes nothing.
   */
  async renew(issueId: string, claimId: string, expiresAt: string, renewal: number, now: Date): Promise<TaskRecord> {
    const underClaim = { _id: issueId, status: 'in-progress', 'claim.claimId': claimId, 'claim.expiresAt': { $gt: now.toISOString() } };
    const renewed = await this.tasks.tasks.findOneAndUpdate(
      { ...underClaim, 'claim.renewal': { $not: { $gte: renewal } } },
      { $set: { 'claim.expiresAt': expiresAt, 'claim.renewal': renewal } },
      { projection: PROJECTION, returnDocument: 'after' },
    );
    if (renewed) return renewed;
    // A newer renewal got there first: the claim is still on the task, nothing to do.
    const current = await this.tasks.tasks.findOne(underClaim, { projection: PROJECTION });
    if (current) return current;
    if (!(await this.tasks.get(issueId))) throw new ServiceError('not-found', 'Issue not found');
    throw conflict('stale-claim', 'The claim is no longer active on this issue (expired, released, completed or replaced)');
  }

  /**
   * Ends the claim on the task: in progress under it, the task returns to ready. Anything else
   * (the task moved on, or is under another claim) is left alone; so is a claim that is not
   * expired yet when `onlyIfExpired` (the sweeper, racing a renewal).
   *
   * With `startBy` not yet passed, the task also records a tombstone of the claim in the same
   * transaction (whatever its state), so a start of the claim still on its way is refused: the
   * start and this end both write the task document, so whichever commits second conflicts,
   * reads again and sees the other (the start ended on the spot, or the tombstone refusing it).
   */
  async end(
    issueId: string,
    claimId: string,
    outcome: EndOutcome,
    actor: Actor,
    now: Date,
    options: { onlyIfExpired?: boolean; startBy?: string } = {},
  ): Promise<{ ended: boolean; task: TaskRecord | null }> {
    return this.outbox.transaction(async (session) => {
      const current = await this.tasks.get(issueId, session);
      if (!current) return { ended: false, task: null };
      const tombstones = withEndedClaim(current.endedClaims, claimId, options.startBy, now) ?? liveEndedClaims(current.endedClaims, now);
      const claim = current.claim;
      if (current.status !== 'in-progress' || claim?.claimId !== claimId || (options.onlyIfExpired && isUnexpired(claim, now))) {
        return { ended: false, task: await this.setEndedClaims(current, tombstones, session) };
      }
      const { next, changes } = applyPatch(fieldsOf(current), { status: 'ready' }, 'system', () => newId('chk'));
      const ctx = { actor, now, moveActor: 'system' as const };
      // The tombstones go with the end (one write of the document).
      const ending = { end: outcome, ...(sameEndedClaims(tombstones, current.endedClaims) ? {} : { endedClaims: tombstones }) };
      const result = await this.tasks.write(current, next, changes, ctx, session, END_KINDS[outcome], ending);
      return { ended: true, task: result.task };
    });
  }

  /** A status note by the holder (a comment) and a renewed mirror, in one change. */
  async postStatus(
    issueId: string,
    claimId: string,
    body: string,
    expiresAt: string,
    renewal: number,
    actor: Actor,
    now: Date,
  ): Promise<{ comment: CommentRecord; task: TaskRecord }> {
    return this.outbox.transaction(async (session) => {
      const current = await this.tasks.get(issueId, session);
      if (!current) throw new ServiceError('not-found', 'Issue not found');
      const claim = current.claim;
      if (current.status !== 'in-progress' || claim?.claimId !== claimId || !isUnexpired(claim, now)) {
        throw conflict('stale-claim', 'The claim is no longer active on this issue (expired, released, completed or replaced)');
      }
      const record: CommentRecord = {
        _id: newId('cmt'),
        workspaceId: current.workspaceId,
        issueId,
        authorId: actor.id,
        authorType: actor.type,
        body,
        createdAt: now.toISOString(),
      };
      await this.records.comments.insertOne(record, { session });
      await this.tasks.touch(current, 'status-posted', { actor, now }, session, {}, [{ field: 'comments', to: record._id }]);
      if ((claim.renewal ?? 0) < renewal) {
        await this.tasks.tasks.updateOne({ _id: issueId }, { $set: { 'claim.expiresAt': expiresAt, 'claim.renewal': renewal } }, { session });
      }
      await this.outbox.add(
        {
          type: 'comment.added',
          workspaceId: current.workspaceId,
          actor,
          data: { subject: { type: 'comment', id: record._id }, issueId, statusPost: true },
        },
        { session },
      );
      const task = await this.tasks.get(issueId, session);
      return { comment: record, task: task ?? current };
    });
  }

  /** Tasks in progress under a claim whose mirrored expiry passed go back to ready (at most `limit`). */
  async releaseExpired(now: Date, limit: number, actor: Actor): Promise<{ task: TaskRecord; claim: ClaimMirror }[]> {
    const due = await this.tasks.tasks.find(
      { 'claim.expiresAt': { $lte: now.toISOString() } },
      { sort: { 'claim.expiresAt': 1 }, limit, projection: PROJECTION },
    );
    const released: { task: TaskRecord; claim: ClaimMirror }[] = [];
    for (const task of due) {
      const claim = task.claim;
      if (!claim) continue;
      // Several sweepers may find the same task: the conditional end decides once.
      const result = await this.end(task._id, claim.claimId, 'expired', actor, now, { onlyIfExpired: true });
      if (result.ended && result.task) released.push({ task: result.task, claim });
    }
    return released;
  }

  /** Tasks carrying a claim mirror, by claim id after `after`. */
  async listClaimed(after: string | undefined, limit: number): Promise<{ tasks: TaskRecord[]; nextAfter?: string }> {
    const rows = await this.tasks.tasks.find(
      { 'claim.claimId': { $gt: after ?? NO_CLAIM } },
      { sort: { 'claim.claimId': 1 }, limit: limit + 1, projection: PROJECTION },
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { tasks: page, ...(rows.length > limit && last?.claim ? { nextAfter: last.claim.claimId } : {}) };
  }

  /**
   * One page of a workspace's ready queue for an agent: ready tasks assigned to it or to nobody,
   * in queue order, after the queue key `after`; with the counts over every page. The page is two
   * ordered index walks (the agent's tasks, everyone's) of at most a page each, merged; the counts
   * read the queue's index entries only (no task documents); `starting` reads the named tasks.
   */
  async listReady(
    workspaceId: string,
    agentId: string,
    limit: number,
    after?: { key: string; rank: number },
    startingIds: readonly string[] = [],
  ): Promise<ReadyPage> {
    const queues = [ANY_AGENT, agentId];
    const queue: Filter = { workspaceId, status: 'ready', queueAgent: { $in: queues } };
    const walk = (owner: string) =>
      this.tasks.tasks.find(
        { workspaceId, status: 'ready', queueAgent: owner, ...(after ? { queueKey: { $gt: after.key } } : {}) },
        { sort: { queueKey: 1 }, limit: limit + 1, projection: PROJECTION },
      );
    // Equalities only, so the index decides each count alone: blocked = all − unblocked.
    const [anyone, own, total, unblocked, starting] = await Promise.all([
      walk(ANY_AGENT),
      walk(agentId),
      this.tasks.tasks.countDocuments(queue),
      this.tasks.tasks.countDocuments({ ...queue, openDependencyCount: 0 }),
      startingIds.length === 0
        ? Promise.resolve(0)
        : this.tasks.tasks.countDocuments({ _id: { $in: [...startingIds] }, ...queue, openDependencyCount: 0 }),
    ]);
    const rows = [...anyone, ...own].sort((a, b) => (a.queueKey < b.queueKey ? -1 : a.queueKey > b.queueKey ? 1 : 0)).slice(0, limit + 1);
    const base = after?.rank ?? 0;
    const page = rows.slice(0, limit).map((task, i) => ({ task, rank: base + i + 1 }));
    const last = page[page.length - 1];
    return {
      tasks: page,
      total,
      blocked: total - unblocked,
      starting,
      ...(rows.length > limit && last ? { next: { after: last.task.queueKey, rank: last.rank } } : {}),
    };
  }

  /** The task in progress under a claim of this agent, if any. */
  async heldBy(workspaceId: string, agentId: string): Promise<TaskRecord | null> {
    return this.tasks.tasks.findOne({ 'claim.agentId': agentId, workspaceId, status: 'in-progress' }, { projection: PROJECTION });
  }
}

/** Whether two tombstone lists are the same entries in the same order (absent: none). */
function sameEndedClaims(list: readonly EndedClaim[], had: readonly EndedClaim[] | undefined): boolean {
  const before = had ?? [];
  return list.length === before.length && list.every((e, i) => e.claimId === before[i]?.claimId && e.until === before[i]?.until);
}
