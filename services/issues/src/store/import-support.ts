import { ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import type { Outbox } from '@planning/outbox';
import { isDuplicateKeyError, type Collection, type DocumentStore, type StoredDocument, type StoreSession } from '@planning/store';
import { isUnexpired } from '../domain/claims.js';
import { assertNoDependencyCycle } from '../domain/dependencies.js';
import { importedTaskId, newTaskOf, parseImportRow, type ParsedRow, type RowProblem } from '../domain/import-rows.js';
import { applyPatch, type FieldChange, type TaskFields } from '../domain/tasks.js';
import type { PlanningRepository } from './planning.js';
import { fieldsOf, type Actor, type TaskRecord } from './task-documents.js';
import type { TaskRepository } from './tasks.js';

export interface ImportRowInput {
  row: number;
  fields: Record<string, unknown>;
}

export interface RowCheck {
  row: number;
  operation: 'create' | 'update';
  issueId?: string;
  version: number;
  errors: RowProblem[];
  conflicts: RowProblem[];
}

export interface PlannedRow extends ImportRowInput {
  operation: 'create' | 'update';
  issueId?: string;
  expectedVersion: number;
}

export interface ChunkRequest {
  workspaceId: string;
  commitId: string;
  chunkIndex: number;
  actor: Actor;
  rows: PlannedRow[];
  storedTaskLimit: number | null;
  quotaResetsAt: string;
  now: Date;
}

export interface RowError extends RowProblem {
  row: number;
}

export interface ChunkResult {
  created: number;
  updated: number;
  skipped: number;
  errors: RowError[];
  replayed: boolean;
}

/** The marker of an applied chunk, written in the chunk's own transaction. */
interface ChunkMarker extends StoredDocument {
  commitId: string;
  chunkIndex: number;
  workspaceId: string;
  result: Omit<ChunkResult, 'replayed'>;
  at: Date;
}

/** Projects and milestones looked up once per call (rows of a chunk mostly name the same few). */
interface References {
  project(id: string): Promise<{ workspaceId: string } | null>;
  milestone(id: string): Promise<{ workspaceId: string; projectId: string } | null>;
}

/** Tasks in the workspace matched by id or externalId. */
interface Matches {
  byId: Map<string, TaskRecord>;
  byExternalId: Map<string, TaskRecord>;
}

/** How a problem a task rule raised reads in a row error: its reason, or a short code. */
function codeOf(err: ServiceError): string {
  if (typeof err.details.reason === 'string') return err.details.reason;
  return err.code === 'invalid-input' ? 'invalid' : err.code;
}

/**
 * The issues side of imports (DECISIONS §8): checks rows against the workspace's tasks, projects
 * and milestones without writing, and writes chunks of a commit. A chunk is one outbox
 * transaction holding its tasks, their activity and events, and a marker named by the commit
 * and the chunk: a chunk written again (the commit resumed after a crash, or raced) finds the
 * marker and writes nothing, and created tasks have ids derived from the commit and the row.
 */
export class ImportSupportRepository {
  private constructor(
    private readonly outbox: Outbox,
    private readonly tasks: TaskRepository,
    private readonly planning: PlanningRepository,
    private readonly markers: Collection<ChunkMarker>,
  ) {}

  static async open(store: DocumentStore, outbox: Outbox, tasks: TaskRepository, planning: PlanningRepository): Promise<ImportSupportRepository> {
    const markers = store.collection<ChunkMarker>('import_chunks');
    // A commit is resumed within days, never months: markers of old commits are swept.
    await markers.createIndexes([{ name: 'expiry_ttl', keys: { at: 1 }, expireAfterSeconds: 30 * 86_400 }]);
    await tasks.tasks.createIndexes([
      // Unique: one task per externalId in a workspace (a backstop to the check in applyChunk).
      { name: 'workspace_external_id', keys: { workspaceId: 1, externalId: 1 }, unique: true, partialFilterExpression: { externalId: { $exists: true } } },
    ]);
    return new ImportSupportRepository(outbox, tasks, planning, markers);
  }

  private async matches(workspaceId: string, rows: readonly ParsedRow[], session?: StoreSession): Promise<Matches> {
    const ids = [...new Set(rows.flatMap((r) => (r.id ? [r.id] : [])))];
    const externalIds = [...new Set(rows.flatMap((r) => (r.externalId ? [r.externalId] : [])))];
    const byId = new Map((await this.tasks.getMany(ids, session)).filter((t) => t.workspaceId === workspaceId).map((t) => [t._id, t]));
    const byExternalId = new Map<string, TaskRecord>();
    if (externalIds.length > 0) {
      const found = await this.tasks.tasks.find(
        { workspaceId, externalId: { $in: externalIds } },
        { projection: { searchText: 0 }, ...(session ? { session } : {}) },
      );
      for (const t of found) {
        const ext = (t as TaskRecord & { externalId?: string }).externalId;
        if (ext !== undefined) byExternalId.set(ext, t);
      }
    }
    return { byId, byExternalId };
  }

  private references(session?: StoreSession): References {
    const projects = new Map<string, Promise<{ workspaceId: string } | null>>();
    const milestones = new Map<string, Promise<{ workspaceId: string; projectId: string } | null>>();
    const memo = <T>(cache: Map<string, Promise<T>>, id: string, load: () => Promise<T>): Promise<T> => {
      let found = cache.get(id);
      if (!found) {
        found = load();
        cache.set(id, found);
      }
      return found;
    };
    return {
      project: (id) => memo(projects, id, () => this.planning.findProject(id, session)),
      milestone: (id) => memo(milestones, id, () => this.planning.findMilestone(id, session)),
    };
  }

  private matchOf(row: ParsedRow, m: Matches): TaskRecord | undefined {
    return (row.id ? m.byId.get(row.id) : undefined) ?? (row.externalId ? m.byExternalId.get(row.externalId) : undefined);
  }

  /** Problems with the project, milestone and dependencies a task's next fields name. */
  private async referenceProblems(
    id: string | undefined,
    next: TaskFields,
    current: TaskRecord | undefined,
    refs: References,
    session?: StoreSession,
  ): Promise<RowProblem[]> {
    const problems: RowProblem[] = [];
    const ws = next.workspaceId;
    if (!current) {
      const project = await refs.project(next.projectId);
      if (!project || project.workspaceId !== ws) problems.push({ field: 'projectId', code: 'not-found' });
    }
    if (next.milestoneId !== undefined && (!current || current.milestoneId !== next.milestoneId)) {
      const milestone = await refs.milestone(next.milestoneId);
      if (!milestone || milestone.workspaceId !== ws) problems.push({ field: 'milestoneId', code: 'not-found' });
      else if (milestone.projectId !== next.projectId) problems.push({ field: 'milestoneId', code: 'other-project' });
    }
    const sameDeps = current && current.dependencies.length === next.dependencies.length && next.dependencies.every((d) => current.dependencies.includes(d));
    if (next.dependencies.length > 0 && !sameDeps) {
      const deps = await this.tasks.getMany(next.dependencies, session);
      if (next.dependencies.some((d) => !deps.some((t) => t._id === d && t.workspaceId === ws))) {
        problems.push({ field: 'dependencies', code: 'not-found' });
      } else if (id !== undefined && next.dependencies.includes(id)) {
        problems.push({ field: 'dependencies', code: 'cycle' });
      } else if (current) {
        try {
          await assertNoDependencyCycle(current._id, next.dependencies, async (ids) =>
            (await this.tasks.getMany(ids, session)).map((t) => ({ id: t._id, dependencies: t.dependencies })),
          );
        } catch (err) {
          if (!(err instanceof ServiceError)) throw err;
          problems.push({ field: 'dependencies', code: 'cycle' });
        }
      }
    }
    return problems;
  }

  /** What writing `row` would do: the new task or the patched one, or the problems in the way. */
  private async plan(
    workspaceId: string,
    row: ParsedRow,
    match: TaskRecord | undefined,
    now: Date,
    refs: References,
    session?: StoreSession,
  ): Promise<{ errors: RowProblem[]; conflicts: RowProblem[]; next?: TaskFields; changes?: FieldChange[] }> {
    const errors = [...row.errors];
    const conflicts: RowProblem[] = [];
    if (!match) {
      const made = newTaskOf(row);
      errors.push(...made.errors);
      if (errors.length > 0 || !made.task) return { errors, conflicts };
      const t = made.task;
      const next: TaskFields = {
        workspaceId,
        projectId: t.projectId,
        title: t.title,
        description: t.description,
        status: t.status,
        priority: t.priority,
        labels: t.labels,
        dependencies: t.dependencies,
        acceptanceChecks: [],
        agent: { instructions: t.instructions },
        ...(t.milestoneId !== undefined ? { milestoneId: t.milestoneId } : {}),
        ...(t.dueDate !== undefined ? { dueDate: t.dueDate } : {}),
        ...(t.estimate !== undefined ? { estimate: t.estimate } : {}),
      };
      errors.push(...(await this.referenceProblems(undefined, next, undefined, refs, session)));
      return { errors, conflicts, next, changes: [] };
    }
    if (row.projectId !== undefined && row.projectId !== match.projectId) errors.push({ field: 'projectId', code: 'immutable' });
    if (row.updatedAt !== undefined && match.updatedAt > row.updatedAt) conflicts.push({ field: 'updatedAt', code: 'changed-since-source' });
    if (match.claim && match.status === 'in-progress' && isUnexpired(match.claim, now)) conflicts.push({ field: 'id', code: 'active-claim' });
    if (errors.length > 0) return { errors, conflicts };
    try {
      const { next, changes } = applyPatch(fieldsOf(match), row.patch, 'human', () => newId('chk'));
      if (changes.length > 0) errors.push(...(await this.referenceProblems(match._id, next, match, refs, session)));
      return { errors, conflicts, next, changes };
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      errors.push({ field: typeof err.details.field === 'string' ? err.details.field : 'status', code: codeOf(err) });
      return { errors, conflicts };
    }
  }

  async check(workspaceId: string, rows: readonly ImportRowInput[], now: Date): Promise<{ checks: RowCheck[]; storedTasks: number }> {
    const parsed = rows.map((r) => parseImportRow(r.fields));
    const m = await this.matches(workspaceId, parsed);
    const refs = this.references();
    const checks: RowCheck[] = [];
    for (const [i, input] of rows.entries()) {
      const row = parsed[i] as ParsedRow;
      const match = this.matchOf(row, m);
      const planned = await this.plan(workspaceId, row, match, now, refs);
      checks.push({
        row: input.row,
        operation: match ? 'update' : 'create',
        ...(match ? { issueId: match._id } : {}),
        version: match?.version ?? 0,
        errors: planned.errors,
        conflicts: planned.conflicts,
      });
    }
    return { checks, storedTasks: await this.tasks.countInWorkspace(workspaceId) };
  }

  /**
   * Writes one chunk (see the class comment). A stored-task quota its creates would pass refuses the
   * whole chunk. A create naming an externalId a task of the workspace already carries (an earlier
   * import of the same rows) is skipped as `duplicate-external-id`; the unique index on
   * (workspaceId, externalId) backs this up against a concurrent commit: its duplicate-key error
   * runs the chunk's transaction again, which then finds the task and skips the row.
   */
  async applyChunk(req: ChunkRequest): Promise<ChunkResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.applyChunkOnce(req);
      } catch (err) {
        if (!isDuplicateKeyError(err) || attempt >= 5) throw err;
      }
    }
  }

  private async applyChunkOnce(req: ChunkRequest): Promise<ChunkResult> {
    const markerId = `${req.commitId}:${req.chunkIndex}`;
    return this.outbox.transaction(async (session) => {
      const done = await this.markers.findOne({ _id: markerId }, { session });
      if (done) return { ...done.result, replayed: true };
      // The marker goes first: two writers of the same chunk conflict on it, and one retries into the replay above.
      await this.markers.insertOne(
        { _id: markerId, commitId: req.commitId, chunkIndex: req.chunkIndex, workspaceId: req.workspaceId, result: { created: 0, updated: 0, skipped: 0, errors: [] }, at: req.now },
        { session },
      );
      const ctx = { actor: req.actor, now: req.now, moveActor: 'human' as const, storedTaskLimit: null, quotaResetsAt: req.quotaResetsAt };
      const result: Omit<ChunkResult, 'replayed'> = { created: 0, updated: 0, skipped: 0, errors: [] };
      const refs = this.references(session);
      const skip = (row: number, problems: readonly RowProblem[]): void => {
        result.skipped += 1;
        for (const p of problems) result.errors.push({ row, ...p });
      };
      const parsed = req.rows.map((input) => parseImportRow(input.fields));
      // Creates are decided first (they depend on nothing the chunk's updates change), so the
      // stored-task quota is checked for the rows that will be created, not the ones skipped.
      const creates = new Map<number, { id: string; task: NonNullable<ReturnType<typeof newTaskOf>['task']>; externalId?: string } | { problems: RowProblem[] }>();
      const externalIds = new Set<string>();
      for (const [i, input] of req.rows.entries()) {
        if (input.operation !== 'create') continue;
        const row = parsed[i] as ParsedRow;
        const id = importedTaskId(req.commitId, input.row);
        if (await this.tasks.get(id, session)) {
          // Written by this commit before (cannot happen with the marker; kept as a second guard).
          creates.set(i, { problems: [] });
          continue;
        }
        if (row.externalId !== undefined) {
          const taken =
            externalIds.has(row.externalId) ||
            (await this.tasks.tasks.findOne({ workspaceId: req.workspaceId, externalId: row.externalId }, { projection: { _id: 1 }, session })) !== null;
          if (taken) {
            creates.set(i, { problems: [{ field: 'externalId', code: 'duplicate-external-id' }] });
            continue;
          }
        }
        const planned = await this.plan(req.workspaceId, row, undefined, req.now, refs, session);
        const made = newTaskOf(row);
        if (planned.errors.length > 0 || !made.task) {
          creates.set(i, { problems: planned.errors });
          continue;
        }
        if (row.externalId !== undefined) externalIds.add(row.externalId);
        creates.set(i, { id, task: made.task, ...(row.externalId !== undefined ? { externalId: row.externalId } : {}) });
      }
      let creating = 0;
      for (const c of creates.values()) if ('task' in c) creating += 1;
      await this.tasks.assertRoomFor(req.workspaceId, creating, { storedTaskLimit: req.storedTaskLimit, quotaResetsAt: req.quotaResetsAt }, session);
      for (const [i, input] of req.rows.entries()) {
        const row = parsed[i] as ParsedRow;
        if (input.operation === 'update') {
          const current = input.issueId ? await this.tasks.get(input.issueId, session) : null;
          if (!current || current.workspaceId !== req.workspaceId) {
            skip(input.row, [{ field: 'id', code: 'not-found' }]);
            continue;
          }
          if (current.version !== input.expectedVersion) {
            skip(input.row, [{ field: 'id', code: 'changed-since-preview' }]);
            continue;
          }
          const planned = await this.plan(req.workspaceId, row, current, req.now, refs, session);
          const problems = [...planned.errors, ...planned.conflicts];
          if (problems.length > 0 || !planned.next) {
            skip(input.row, problems);
            continue;
          }
          if (!planned.changes || planned.changes.length === 0) {
            skip(input.row, []);
            continue;
          }
          await this.tasks.write(current, planned.next, planned.changes, ctx, session, 'updated');
          result.updated += 1;
          continue;
        }
        const create = creates.get(i);
        if (!create || !('task' in create)) {
          skip(input.row, create?.problems ?? []);
          continue;
        }
        await this.tasks.createInSession(req.workspaceId, create.task, ctx, session, {
          id: create.id,
          ...(create.externalId !== undefined ? { extra: { externalId: create.externalId } } : {}),
        });
        result.created += 1;
      }
      await this.markers.updateOne({ _id: markerId }, { $set: { result } }, { session });
      return { ...result, replayed: false };
    });
  }
}
