import { conflict, invalidInput, ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import type { Outbox } from '@planning/outbox';
import type { Collection, DocumentStore, Filter, StoredDocument, StoreSession } from '@planning/store';
import { claimEndOf, fenceRefusal, type ClaimEnd, type ClaimMirror, type EndedClaim, type WriteFence } from '../domain/claims.js';
import { assertNoDependencyCycle, assertNoParentCycle } from '../domain/dependencies.js';
import { encodeSearchCursor } from '../domain/ranking.js';
import { doneMoveRefusal, type DoneFacts, type DonePolicy, type StoredDonePolicy } from '../domain/done-policy.js';
import { CLOSED_STATUSES, type MoveActor, type TaskStatus } from '../domain/task-status.js';
import {
  applyPatch,
  changedFieldNames,
  newChecks,
  type FieldChange,
  type TaskFields,
  type TaskPatch,
  type ValidNewTask,
} from '../domain/tasks.js';
import type { PlanningRepository, WorkspaceScope } from './planning.js';
import { derivedFields, fieldsOf, type ActivityRecord, type Actor, type TaskRecord } from './task-documents.js';
import { searchQuery, TASK_INDEXES, type TaskSearch } from './task-search.js';

/** Who writes, when, and with which limits. */
export interface WriteContext {
  actor: Actor;
  now: Date;
  /** Agents (API tokens) start work only by claiming it. */
  moveActor: MoveActor;
  /** The calling agent: a task assigned to another agent is not its to change. */
  agentId?: string;
  /**
   * The fences agents-claims gave this write, per task (rpc/write-fences.ts): present for agents
   * and for anyone presenting a fencing token; absent for people and services.
   */
  fences?: ReadonlyMap<string, WriteFence | ServiceError>;
  /** A member setting the done policy and pending approvals aside for a status move (audited). */
  override?: { reason: string };
}

/** What a write does to the claim a task is under, besides what its status move implies. */
export interface ClaimWrite {
  /** The task starts under this claim (its token becomes the task's latest). */
  start?: ClaimMirror;
  /** How the claim the task is under ends (default: from the status move, see `claimEndOf`). */
  end?: ClaimEnd;
  /**
   * The task's claim tombstones after this write (claim-support's start and end), written with
   * it rather than by a second write of the document; none left removes the field.
   */
  endedClaims?: EndedClaim[];
}

/** Activity kinds of task changes. */
export type ChangeKind = 'updated' | 'contract-updated' | 'bulk-updated' | 'claimed' | 'claim-released' | 'claim-expired' | 'claim-aborted';

export interface CreateContext extends WriteContext {
  /** The workspace plan's stored-task quota (null: unlimited). */
  storedTaskLimit: number | null;
  quotaResetsAt: string;
}

/** Checks the repository needs from other parts of the service, inside the write's transaction. */
export interface TaskReferenceChecks {
  agentExists(workspaceId: string, agentId: string, session?: StoreSession): Promise<boolean>;
  /** The done policy in force for a task of `projectId` (the project's, else the workspace's). */
  /** `workspaceRead`: the task's workspace as this request already read it (outside a transaction). */
  donePolicy(workspaceId: string, projectId: string, session?: StoreSession, workspaceRead?: StoredDonePolicy & { _id: string }): Promise<DonePolicy>;
}

export interface TaskChange {
  task: TaskRecord;
  changes: FieldChange[];
  /** The activity the change recorded (none for a change that changed nothing). */
  activity?: ActivityRecord;
}

export type BulkOutcome =
  | { ok: true; current: TaskRecord; next: TaskRecord; changes: FieldChange[] }
  | { ok: false; id: string; error: ServiceError };

/** Frozen: the store compiles it once (a frozen projection cannot change under its copier). */
const PROJECTION = Object.freeze({ searchText: 0 } as const);

/** One per workspace under a stored-task cap: the document its task creations all write. */
interface CreateGuard extends StoredDocument {
  _id: string;
  creates: number;
}

/** Optional fields of a task that are unset (absent) rather than null. */
const OPTIONAL_FIELDS = ['milestoneId', 'initiativeId', 'parentId', 'dueDate', 'estimate'] as const;

/** Counters and search fields the repository maintains beside a task's own fields. */
type Maintained = Pick<
  TaskRecord,
  'openDependencyCount' | 'dependentCount' | 'timeLoggedMinutes' | 'evidenceCount' | 'createdAt' | 'createdBy'
>;

/**
 * Tasks and their activity. Every change of a task, its activity and its events are written in
 * one outbox transaction; dependency bookkeeping (open-dependency counts of dependents, dependent
 * counts of dependencies) happens in the same transaction, so the graph can never disagree with
 * the tasks' statuses.
 */
export class TaskRepository {
  private constructor(
    readonly tasks: Collection<TaskRecord>,
    readonly activity: Collection<ActivityRecord>,
    private readonly createGuards: Collection<CreateGuard>,
    private readonly outbox: Outbox,
    private readonly planning: PlanningRepository,
    private readonly checks: TaskReferenceChecks,
    private readonly evidence: Collection<{ _id: string; issueId: string; checkId?: string; createdAt: string }>,
  ) {}

  static async open(
    store: DocumentStore,
    outbox: Outbox,
    planning: PlanningRepository,
    checks: TaskReferenceChecks,
  ): Promise<TaskRepository> {
    const tasks = store.collection<TaskRecord>('tasks');
    const activity = store.collection<ActivityRecord>('activity');
    await tasks.createIndexes(TASK_INDEXES);
    await activity.createIndexes([{ name: 'issue_id', keys: { issueId: 1, _id: 1 } }]);
    return new TaskRepository(tasks, activity, store.collection<CreateGuard>('task_create_guards'), outbox, planning, checks, store.collection('evidence'));
  }

  get(id: string, session?: StoreSession): Promise<TaskRecord | null> {
    return this.tasks.findOne({ _id: id }, { projection: PROJECTION, ...(session ? { session } : {}) });
  }

  getMany(ids: readonly string[], session?: StoreSession): Promise<TaskRecord[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.tasks.find({ _id: { $in: [...ids] } }, { projection: PROJECTION, ...(session ? { session } : {}) });
  }

  /** Tasks waiting for any of `ids` (at most `limit`). */
  dependentsOf(ids: readonly string[], limit = 1_000, session?: StoreSession): Promise<TaskRecord[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.tasks.find(
      { dependencies: ids.length === 1 ? ids[0] : { $in: [...ids] } },
      { projection: PROJECTION, limit, sort: { _id: 1 }, ...(session ? { session } : {}) },
    );
  }

  countInWorkspace(workspaceId: string, session?: StoreSession): Promise<number> {
    return this.tasks.countDocuments({ workspaceId }, session ? { session } : undefined);
  }

  // ---- create --------------------------------------------------------------------------------

  async create(workspaceId: string, input: ValidNewTask, ctx: CreateContext): Promise<TaskRecord> {
    return this.outbox.transaction((session) => this.createInSession(workspaceId, input, ctx, session));
  }

  /**
   * Refuses (403 `quota-exceeded`) when `count` more tasks would pass the plan's stored-task
   * quota, inside the caller's transaction (imports check a whole chunk at once).
   */
  async assertRoomFor(
    workspaceId: string,
    count: number,
    ctx: Pick<CreateContext, 'storedTaskLimit' | 'quotaResetsAt'>,
    session: StoreSession,
  ): Promise<void> {
    if (ctx.storedTaskLimit === null || count <= 0) return;
    // Count-then-insert alone lets concurrent creates all see room under the cap (snapshot
    // reads, inserts of different documents never conflict). Writing the workspace's guard
    // document first makes them conflict: one commits, the others retry and count again.
    await this.createGuards.updateOne({ _id: workspaceId }, { $inc: { creates: count } }, { upsert: true, session });
    const used = await this.countInWorkspace(workspaceId, session);
    if (used + count > ctx.storedTaskLimit) {
      throw new ServiceError('quota-exceeded', `The workspace's plan stores at most ${ctx.storedTaskLimit} tasks`, {
        quota: { kind: 'stored-tasks', limit: ctx.storedTaskLimit, used, resetsAt: ctx.quotaResetsAt },
      });
    }
  }

  /**
   * `create` inside the caller's transaction (imports write a chunk of rows in one), with the id
   * the caller chose (imports derive it from the row, so a replayed write cannot add a second
   * task) and extra stored fields (`externalId`).
   */
  async createInSession(
    workspaceId: string,
    input: ValidNewTask,
    ctx: CreateContext,
    session: StoreSession,
    options: { id?: string; extra?: Record<string, unknown> } = {},
  ): Promise<TaskRecord> {
    await this.assertRoomFor(workspaceId, 1, ctx, session);
    const id = options.id ?? newId('iss');
    const fields: TaskFields = {
      workspaceId,
      projectId: input.projectId,
      title: input.title,
      description: input.description,
      status: input.status,
      priority: input.priority,
      labels: input.labels,
      dependencies: input.dependencies,
      acceptanceChecks: newChecks(input.acceptanceChecks, () => newId('chk')),
      agent: {
        ...(input.assignedAgentId !== undefined ? { assignedAgentId: input.assignedAgentId } : {}),
        instructions: input.instructions,
      },
    };
    for (const key of OPTIONAL_FIELDS) if (input[key] !== undefined) (fields as unknown as Record<string, unknown>)[key] = input[key];
    await this.checkReferences(id, fields, undefined, ctx, session);
    const deps = await this.getMany(fields.dependencies, session);
    const at = ctx.now.toISOString();
    const record = this.compose(id, fields, {
      openDependencyCount: deps.filter((d) => d.status !== 'done').length,
      dependentCount: 0,
      timeLoggedMinutes: 0,
      evidenceCount: 0,
      createdAt: at,
      createdBy: ctx.actor.id,
    }, 1, at);
    if (options.extra) Object.assign(record, options.extra);
    await this.tasks.insertOne(record, { session });
    for (const dep of fields.dependencies) await this.tasks.updateOne({ _id: dep }, { $inc: { dependentCount: 1 } }, { session });
    await this.addActivity(record, 'created', [], ctx, session);
    await this.outbox.add(
      {
        type: 'task.created',
        workspaceId,
        actor: ctx.actor,
        data: { subject: { type: 'task', id }, issueId: id, projectId: fields.projectId, status: fields.status },
      },
      { session },
    );
    const { searchText: _omit, ...shown } = record;
    return shown as TaskRecord;
  }

  // ---- update --------------------------------------------------------------------------------

  /**
   * Applies a validated patch. A patch that changes nothing writes nothing. `expectedVersion`
   * makes the change conditional on the version the caller saw (409 `version-conflict`).
   */
  async update(
    id: string,
    patch: TaskPatch,
    ctx: WriteContext & { expectedVersion?: number; kind?: 'updated' | 'contract-updated' },
  ): Promise<TaskChange> {
    return this.outbox.transaction(async (session) => {
      const current = await this.get(id, session);
      if (!current) throw new ServiceError('not-found', 'Issue not found');
      this.assertWritable(current, ctx);
      if (ctx.expectedVersion !== undefined && ctx.expectedVersion !== current.version) {
        throw conflict('version-conflict', `The issue is at version ${current.version}, not ${ctx.expectedVersion}; read it again`);
      }
      const { next, changes } = applyPatch(fieldsOf(current), patch, ctx.moveActor, () => newId('chk'));
      if (changes.length === 0) return { task: current, changes };
      await this.checkReferences(id, next, current, ctx, session);
      const overridden = await this.gateMove(current, next.status, ctx, session);
      const change = await this.write(current, next, changes, ctx, session, ctx.kind ?? 'updated');
      if (overridden) await this.recordOverride(change.task, current.status, overridden, ctx, session);
      return change;
    });
  }

  // ---- the done policy -----------------------------------------------------------------------

  /** What the done policy reads on a task (from the task; from the evidence collection for tasks from before it was kept). */
  async doneFacts(task: TaskRecord, session?: StoreSession): Promise<DoneFacts> {
    let evidenced = task.evidencedCheckIds;
    let lastEvidenceAt = task.lastEvidenceAt;
    if (evidenced === undefined && task.evidenceCount > 0) {
      const rows = await this.evidence.find({ issueId: task._id }, { sort: { _id: 1 }, ...(session ? { session } : {}) });
      evidenced = [...new Set(rows.flatMap((r) => (r.checkId ? [r.checkId] : [])))];
      lastEvidenceAt = rows.reduce<string | undefined>((max, r) => (max === undefined || r.createdAt > max ? r.createdAt : max), undefined);
    }
    return {
      checkIds: task.acceptanceChecks.map((c) => c.id),
      evidencedCheckIds: evidenced ?? [],
      evidenceCount: task.evidenceCount,
      ...(lastEvidenceAt ? { lastEvidenceAt } : {}),
      approvals: task.approvalGates ?? [],
    };
  }

  /** The done policy in force for a task (`workspaceRead`: its workspace, already read by this request). */
  donePolicy(task: Pick<TaskRecord, 'workspaceId' | 'projectId'>, session?: StoreSession, workspaceRead?: StoredDonePolicy & { _id: string }): Promise<DonePolicy> {
    return this.checks.donePolicy(task.workspaceId, task.projectId, session, workspaceRead);
  }

  /**
   * The done policy and pending approvals on a move of `task` to `to`, for people and agents
   * (services moving tasks, such as imports, are not gated). Throws the refusal, or returns it when
   * a member's override sets it aside (the caller records the override with the change).
   */
  private async gateMove(task: TaskRecord, to: TaskStatus, ctx: WriteContext, session?: StoreSession): Promise<ServiceError | undefined> {
    if (to === task.status || (to !== 'done' && to !== 'in-review') || ctx.moveActor === 'system') return undefined;
    const refusal = doneMoveRefusal(to, await this.doneFacts(task, session), await this.donePolicy(task, session), ctx.now);
    if (!refusal) return undefined;
    if (!ctx.override) throw refusal;
    return refusal;
  }

  /** An override, audited: activity on the task (with the reason) and an event (ids and the reason code only). */
  private async recordOverride(task: TaskRecord, from: TaskStatus, refusal: ServiceError, ctx: WriteContext, session: StoreSession): Promise<void> {
    const reason = ctx.override?.reason ?? '';
    await this.addActivity(task, 'done-policy-overridden', [
      { field: 'status', from, to: task.status },
      { field: 'override', to: { reason, setAside: refusal.details.reason ?? 'done-policy', missingCheckIds: refusal.details.missingCheckIds ?? [] } },
    ], ctx, session);
    await this.outbox.add(
      {
        type: 'task.done-policy-overridden',
        workspaceId: task.workspaceId,
        actor: ctx.actor,
        data: { subject: { type: 'task', id: task._id }, issueId: task._id, to: task.status, reason: refusal.details.reason ?? 'done-policy' },
      },
      { session },
    );
  }

  /**
   * Refuses a change by an agent to a task assigned to another agent, and a write whose fence
   * (decided by agents-claims) the task no longer matches: the check that makes the fence hold,
   * inside the write's transaction.
   */
  assertWritable(task: TaskRecord, ctx: Pick<WriteContext, 'agentId' | 'fences' | 'now'>): void {
    const assigned = task.agent.assignedAgentId;
    if (ctx.agentId !== undefined && assigned !== undefined && assigned !== ctx.agentId) {
      throw new ServiceError('forbidden', 'The issue is assigned to another agent', { reason: 'assigned-to-another-agent' });
    }
    if (!ctx.fences) return;
    const fence = ctx.fences.get(task._id);
    // Every fenced write asks for each task it writes; a task without an answer is a bug, never a pass.
    if (!fence) throw new ServiceError('internal', 'Internal error');
    if (fence instanceof ServiceError) throw fence;
    const refusal = fenceRefusal(task, { fence, now: ctx.now, ...(ctx.agentId !== undefined ? { agentId: ctx.agentId } : {}) });
    if (refusal) throw refusal;
  }

  // ---- bulk update ---------------------------------------------------------------------------

  /**
   * Works out what a patch does to each target without writing: for each id, the next state or
   * the reason it cannot change. References (milestone of the task's project, agent) are checked
   * here too, so an apply that passes this preflight only fails on a concurrent change.
   */
  async planBulk(ids: readonly string[], patch: TaskPatch, ctx: WriteContext): Promise<BulkOutcome[]> {
    const found = new Map((await this.getMany(ids)).map((t) => [t._id, t]));
    const outcomes: BulkOutcome[] = [];
    for (const id of ids) {
      const current = found.get(id);
      if (!current) {
        outcomes.push({ ok: false, id, error: new ServiceError('not-found', 'Issue not found') });
        continue;
      }
      try {
        this.assertWritable(current, ctx);
        const { next, changes } = applyPatch(fieldsOf(current), patch, ctx.moveActor, () => newId('chk'));
        if (changes.length > 0) await this.checkReferences(id, next, current, ctx, undefined);
        if (changes.length > 0) await this.gateMove(current, next.status, ctx);
        const maintained = this.maintained(current);
        const preview = changes.length > 0 ? this.compose(id, next, maintained, current.version + 1, ctx.now.toISOString()) : current;
        outcomes.push({ ok: true, current, next: preview, changes });
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        outcomes.push({ ok: false, id, error: err });
      }
    }
    return outcomes;
  }

  /**
   * Applies a preflighted bulk change in one transaction: every target must still be at the
   * version the preflight read, otherwise nothing is written (409 `version-conflict` naming the
   * tasks that changed). Tasks the patch does not change are left alone.
   */
  async applyBulk(
    planned: readonly Extract<BulkOutcome, { ok: true }>[],
    patch: TaskPatch,
    ctx: WriteContext,
  ): Promise<TaskChange[]> {
    return this.outbox.transaction(async (session) => {
      const targets = planned.filter((p) => p.changes.length > 0);
      const fresh = new Map((await this.getMany(targets.map((p) => p.current._id), session)).map((t) => [t._id, t]));
      const moved = targets.filter((p) => fresh.get(p.current._id)?.version !== p.current.version).map((p) => p.current._id);
      if (moved.length > 0) {
        throw new ServiceError('work-already-claimed', `${moved.length} issue(s) changed while the bulk update ran; nothing was changed`, {
          reason: 'version-conflict',
          failedIds: moved,
        });
      }
      const out: TaskChange[] = [];
      for (const p of targets) {
        const current = fresh.get(p.current._id) as TaskRecord;
        // The fence again on the task as it is now (a claim may have expired since the preflight).
        this.assertWritable(current, ctx);
        const { next, changes } = applyPatch(fieldsOf(current), patch, ctx.moveActor, () => newId('chk'));
        // The policy again on the task as it is now (evidence or approvals may have changed).
        const overridden = await this.gateMove(current, next.status, ctx, session);
        const change = await this.write(current, next, changes, ctx, session, 'bulk-updated');
        if (overridden) await this.recordOverride(change.task, current.status, overridden, ctx, session);
        out.push(change);
      }
      return out;
    });
  }

  // ---- writes shared by every change -----------------------------------------------------------

  private maintained(task: TaskRecord): Maintained {
    return {
      openDependencyCount: task.openDependencyCount,
      dependentCount: task.dependentCount,
      timeLoggedMinutes: task.timeLoggedMinutes,
      evidenceCount: task.evidenceCount,
      createdAt: task.createdAt,
      createdBy: task.createdBy,
    };
  }

  /** A complete stored task from its fields, the maintained counters and the write's time. */
  private compose(id: string, fields: TaskFields, maintained: Maintained, version: number, at: string): TaskRecord {
    const base = { _id: id, ...fields, ...maintained, version, updatedAt: at, lastActivityAt: at };
    return { ...base, ...derivedFields(base) } as TaskRecord;
  }

  /**
   * Writes a task's new fields (conditional on the version read), keeps the dependency graph's
   * counters right, and records activity and events. A task leaving in-progress leaves its claim
   * in the same write (the status event says how the claim ended, for the agents-claims service);
   * `claim.start` puts the task under a new claim.
   */
  async write(
    current: TaskRecord,
    next: TaskFields,
    changes: FieldChange[],
    ctx: WriteContext,
    session: StoreSession,
    kind: ChangeKind,
    claim: ClaimWrite = {},
  ): Promise<TaskChange> {
    const id = current._id;
    const at = ctx.now.toISOString();
    const ending = current.claim !== undefined && current.status === 'in-progress' && next.status !== 'in-progress' ? current.claim : undefined;
    if (ending) changes = [...changes, { field: 'claim', from: ending.claimId, to: null }];
    if (claim.start) changes = [...changes, { field: 'claim', from: null, to: claim.start.claimId }];
    const fields = changedFieldNames(changes);
    // Counters other writes maintain (time, evidence, dependents, open dependencies) are never
    // overwritten here: a bulk change may have moved them earlier in this same transaction.
    // Not sent: fields without a value ($unset below), and values that are the very ones of the
    // version read (applyPatch leaves unchanged fields as they were; the write is conditional on
    // that version, so the stored document holds them already). Built field by field: a copy of
    // every field with the unchanged ones deleted again cost a dictionary-mode object per write.
    const read = current as unknown as Record<string, unknown>;
    const own: Record<string, unknown> = {};
    const put = (key: string, value: unknown): void => {
      if (value !== undefined && value !== read[key]) own[key] = value;
      else if (key in own) delete own[key];
    };
    for (const key in next) put(key, (next as unknown as Record<string, unknown>)[key]);
    put('version', current.version + 1);
    put('updatedAt', at);
    put('lastActivityAt', at);
    const derived = derivedFields({ _id: id, ...next, createdAt: current.createdAt, updatedAt: at });
    for (const key in derived) put(key, derived[key as keyof typeof derived]);
    if (fields.includes('dependencies')) {
      const added = next.dependencies.filter((d) => !current.dependencies.includes(d));
      const removed = current.dependencies.filter((d) => !next.dependencies.includes(d));
      for (const dep of added) await this.tasks.updateOne({ _id: dep }, { $inc: { dependentCount: 1 } }, { session });
      for (const dep of removed) await this.tasks.updateOne({ _id: dep }, { $inc: { dependentCount: -1 } }, { session });
      const deps = await this.getMany(next.dependencies, session);
      put('openDependencyCount', deps.filter((d) => d.status !== 'done').length);
    }
    if (claim.start) {
      put('claim', claim.start);
      put('lastFencingToken', claim.start.fencingToken);
    }
    if (ending) put('lastClaimEnd', { claimId: ending.claimId, end: claim.end ?? claimEndOf(next.status) });
    if (claim.endedClaims !== undefined && claim.endedClaims.length > 0) put('endedClaims', claim.endedClaims);
    const unset: Record<string, string> = Object.fromEntries(OPTIONAL_FIELDS.filter((k) => next[k] === undefined).map((k) => [k, '']));
    if (ending && !claim.start) unset.claim = '';
    if (claim.endedClaims !== undefined && claim.endedClaims.length === 0 && current.endedClaims !== undefined) unset.endedClaims = '';
    const record = await this.tasks.findOneAndUpdate(
      { _id: id, version: current.version },
      { $set: own, ...(Object.keys(unset).length > 0 ? { $unset: unset } : {}) },
      { session, projection: PROJECTION },
    );
    if (!record) {
      throw new ServiceError('work-already-claimed', `Issue ${id} changed meanwhile; nothing was changed`, { reason: 'version-conflict', failedIds: [id] });
    }
    if (current.status !== next.status && (current.status === 'done' || next.status === 'done')) {
      // Dependents count open dependencies: finishing (or reopening) this task changes theirs.
      const delta = next.status === 'done' ? -1 : 1;
      for (const dependent of await this.dependentsOf([id], Number.MAX_SAFE_INTEGER, session)) {
        await this.tasks.updateOne({ _id: dependent._id }, { $inc: { openDependencyCount: delta } }, { session });
      }
    }
    const activity = await this.addActivity(record, kind, changes, ctx, session);
    const subject = { type: 'task', id };
    await this.outbox.add(
      {
        type: kind === 'contract-updated' ? 'task.contract-updated' : 'task.updated',
        workspaceId: record.workspaceId,
        actor: ctx.actor,
        data: { subject, issueId: id, changedFields: fields, ...(kind === 'bulk-updated' ? { bulk: true } : {}) },
      },
      { session },
    );
    if (current.status !== next.status) {
      // Ids only: the agents-claims service ends the claim a status move ended (by claim id).
      const claimFacts = ending
        ? { claimId: ending.claimId, agentId: ending.agentId, claimEnd: claim.end ?? claimEndOf(next.status) }
        : claim.start
          ? { claimId: claim.start.claimId, agentId: claim.start.agentId, claimStart: true }
          : {};
      await this.outbox.add(
        {
          type: 'task.status-changed',
          workspaceId: record.workspaceId,
          actor: ctx.actor,
          data: { subject, issueId: id, from: current.status, to: next.status, ...claimFacts },
        },
        { session },
      );
    }
    return { task: record, changes, activity };
  }

  /**
   * References a task's fields make must exist in its workspace: project, milestone (of the
   * task's project), initiative, parent (no cycles), dependencies (no cycles) and the agent.
   * Only references that changed (all of them for a new task) are checked.
   */
  private async checkReferences(
    id: string,
    next: TaskFields,
    current: TaskRecord | undefined,
    ctx: WriteContext,
    session: StoreSession | undefined,
  ): Promise<void> {
    const ws = next.workspaceId;
    const hidden = (what: string, field: string): ServiceError =>
      ctx.moveActor === 'agent'
        ? new ServiceError('not-found', `${what} not found`)
        : new ServiceError('invalid-input', `'${field}' must name a ${what.toLowerCase()} of the issue's workspace`, { field });
    if (!current || current.projectId !== next.projectId) {
      const project = await this.planning.findProject(next.projectId, session);
      if (!project) throw new ServiceError('not-found', 'Project not found');
      if (project.workspaceId !== ws) throw hidden('Project', 'projectId');
    }
    if (next.milestoneId !== undefined && (!current || current.milestoneId !== next.milestoneId || current.projectId !== next.projectId)) {
      const milestone = await this.planning.findMilestone(next.milestoneId, session);
      if (!milestone) throw new ServiceError('not-found', 'Milestone not found');
      if (milestone.workspaceId !== ws) throw hidden('Milestone', 'milestoneId');
      if (milestone.projectId !== next.projectId) throw invalidInput('milestoneId', "'milestoneId' must name a milestone of the issue's project");
    }
    if (next.initiativeId !== undefined && (!current || current.initiativeId !== next.initiativeId)) {
      const initiative = await this.planning.findInitiative(next.initiativeId, session);
      if (!initiative) throw new ServiceError('not-found', 'Initiative not found');
      if (initiative.workspaceId !== ws) throw hidden('Initiative', 'initiativeId');
    }
    if (next.parentId !== undefined && (!current || current.parentId !== next.parentId)) {
      const parent = await this.get(next.parentId, session);
      if (!parent) throw new ServiceError('not-found', 'Parent issue not found');
      if (parent.workspaceId !== ws) throw hidden('Parent issue', 'parentId');
      await assertNoParentCycle(id, next.parentId, async (pid) => (await this.get(pid, session))?.parentId);
    }
    const assigned = next.agent.assignedAgentId;
    if (assigned !== undefined && (!current || current.agent.assignedAgentId !== assigned)) {
      if (!(await this.checks.agentExists(ws, assigned, session))) throw new ServiceError('not-found', `Agent '${assigned}' not found in this workspace`);
    }
    const sameDeps = current && current.dependencies.length === next.dependencies.length && next.dependencies.every((d) => current.dependencies.includes(d));
    if (next.dependencies.length > 0 && !sameDeps) {
      const deps = await this.getMany(next.dependencies, session);
      const missing = next.dependencies.filter((d) => !deps.some((t) => t._id === d));
      if (missing.length > 0) throw new ServiceError('not-found', `Dependency not found: ${missing.join(', ')}`);
      if (deps.some((d) => d.workspaceId !== ws)) throw hidden('Task', 'dependencies');
      if (current) {
        await assertNoDependencyCycle(id, next.dependencies, async (ids) =>
          (await this.getMany(ids, session)).map((t) => ({ id: t._id, dependencies: t.dependencies })),
        );
      } else if (next.dependencies.includes(id)) {
        throw invalidInput('dependencies', 'A task cannot depend on itself');
      }
    }
  }

  // ---- activity ------------------------------------------------------------------------------

  async addActivity(
    task: Pick<TaskRecord, '_id' | 'workspaceId'>,
    kind: string,
    changes: FieldChange[],
    ctx: Pick<WriteContext, 'actor' | 'now'>,
    session: StoreSession,
  ): Promise<ActivityRecord> {
    const record: ActivityRecord = {
      _id: newId('act'),
      workspaceId: task.workspaceId,
      issueId: task._id,
      actor: ctx.actor,
      kind,
      changes,
      at: ctx.now.toISOString(),
    };
    await this.activity.insertOne(record, { session });
    return record;
  }

  /**
   * Records something that happened on a task without changing its fields (a comment, time,
   * evidence, an approval): activity, the task's `lastActivityAt` and counters, in the caller's
   * transaction. The task's version is untouched: its own fields did not change.
   */
  async touch(
    task: TaskRecord,
    kind: string,
    ctx: Pick<WriteContext, 'actor' | 'now'>,
    session: StoreSession,
    inc: Partial<Pick<TaskRecord, 'timeLoggedMinutes' | 'evidenceCount'>> = {},
    changes: FieldChange[] = [],
  ): Promise<void> {
    const at = ctx.now.toISOString();
    const update: Filter = { $max: { lastActivityAt: at } };
    if (Object.keys(inc).length > 0) update.$inc = inc;
    await this.tasks.updateOne({ _id: task._id }, update, { session });
    await this.addActivity(task, kind, changes, ctx, session);
  }

  /** Marks an acceptance check done (evidence proving it), as a change of the task. */
  async completeCheck(task: TaskRecord, checkId: string, ctx: WriteContext, session: StoreSession): Promise<void> {
    const current = await this.get(task._id, session);
    if (!current) throw new ServiceError('not-found', 'Issue not found');
    const checks = current.acceptanceChecks.map((c) => (c.id === checkId ? { ...c, done: true } : c));
    if (checks.every((c, i) => c.done === current.acceptanceChecks[i]?.done)) return;
    const next = { ...fieldsOf(current), acceptanceChecks: checks };
    await this.write(current, next, [{ field: 'acceptanceChecks' }], ctx, session, 'updated');
  }

  listActivity(issueId: string, options: { limit: number; after?: string; latest?: boolean }): Promise<ActivityRecord[]> {
    const filter: Filter = { issueId };
    if (options.after) filter._id = { $gt: options.after };
    return this.activity.find(filter, { sort: { _id: options.latest ? -1 : 1 }, limit: options.limit });
  }

  countActivity(issueId: string): Promise<number> {
    return this.activity.countDocuments({ issueId });
  }

  // ---- search --------------------------------------------------------------------------------

  /** One page of a search, with the cursor of the next page when there is one (the records frozen: read only). */
  async search(search: TaskSearch, limit: number): Promise<{ tasks: TaskRecord[]; nextCursor?: string }> {
    if (!search.scope.all && search.scope.ids.length === 0) return { tasks: [] };
    const { filter, sort } = searchQuery(search);
    // Readonly: the store's frozen copies (one per stored version), which views are memoised by.
    const rows = await this.tasks.find(filter, { sort, limit: limit + 1, projection: PROJECTION, readonly: true });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    if (rows.length <= limit || !last) return { tasks: page };
    return { tasks: page, nextCursor: encodeSearchCursor({ sort: search.sort, direction: search.direction, after: last.sortKeys[search.sort] }) };
  }

  /**
   * Dependency edges around a set of tasks: each task's dependencies, and the tasks (up to
   * `limit`) that depend on them. Source is the prerequisite, target the task that waits.
   */
  async edgesAround(tasks: readonly TaskRecord[], limit = 1_000): Promise<DependencyEdge[]> {
    return edgesOf(tasks, await this.dependentsOf(tasks.map((t) => t._id), limit));
  }

  // ---- readiness -----------------------------------------------------------------------------

  /** Counts for launch readiness over a scope of workspaces. */
  async readinessCounts(scope: WorkspaceScope): Promise<{
    done: number;
    notCancelled: number;
    verified: number;
    openBlockers: TaskRecord[];
  }> {
    const where: Filter = scope.all ? {} : { workspaceId: scope.ids.length === 1 ? scope.ids[0] : { $in: [...scope.ids] } };
    const [total, done, cancelled, verified, openBlockers] = await Promise.all([
      this.tasks.countDocuments(where),
      this.tasks.countDocuments({ ...where, status: 'done' }),
      this.tasks.countDocuments({ ...where, status: 'cancelled' }),
      this.tasks.countDocuments({ ...where, status: 'done', evidenceCount: { $gt: 0 } }),
      this.tasks.find({ ...where, labels: 'launch-blocker', status: { $nin: [...CLOSED_STATUSES] } }, { projection: PROJECTION }),
    ]);
    return { done, notCancelled: total - cancelled, verified, openBlockers };
  }
}

export interface DependencyEdge {
  sourceIssueId: string;
  targetIssueId: string;
}

/** The dependency edges into and out of `tasks`, given the tasks that depend on them (`dependentsOf`). */
export function edgesOf(tasks: readonly TaskRecord[], dependents: readonly TaskRecord[]): DependencyEdge[] {
  const edges = new Map<string, DependencyEdge>();
  const add = (source: string, target: string): void => {
    edges.set(`${source}>${target}`, { sourceIssueId: source, targetIssueId: target });
  };
  for (const t of tasks) for (const d of t.dependencies) add(d, t._id);
  const ids = new Set(tasks.map((t) => t._id));
  for (const dependent of dependents) for (const d of dependent.dependencies) if (ids.has(d)) add(d, dependent._id);
  return [...edges.values()];
}
