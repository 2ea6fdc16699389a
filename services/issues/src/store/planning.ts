import { conflict, ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import type { Outbox } from '@planning/outbox';
import {
  escapeRegExp,
  type Collection,
  type DocumentStore,
  type Filter,
  type StoreSession,
  type StoredDocument,
} from '@planning/store';
import type { DoneGate, DoneRequirement } from '../domain/done-policy.js';
import type { ContextPackItem, MilestoneStatus, ProgramStatus, ProjectStatus } from '../domain/planning.js';
import type { Actor } from './task-documents.js';

export interface ProjectInput {
  workspaceId: string;
  name: string;
  status: ProjectStatus;
  goal: string;
  initiativeId?: string;
  contextPack: ContextPackItem[];
  createdBy: string;
  /** The project's own done policy; absent: the workspace's applies. */
  doneRequires?: DoneRequirement;
  doneGate?: DoneGate;
}

export interface ProjectRecord extends StoredDocument, ProjectInput {
  createdAt: string;
  updatedAt: string;
  version: number;
}

export interface MilestoneInput {
  workspaceId: string;
  projectId: string;
  name: string;
  status: MilestoneStatus;
  targetDate?: string;
}

export interface MilestoneRecord extends StoredDocument, MilestoneInput {
  createdAt: string;
  updatedAt: string;
  version: number;
}

export interface ProgramInput {
  workspaceId: string;
  name: string;
  status: ProgramStatus;
  ownerId: string;
  description: string;
}

export interface ProgramRecord extends StoredDocument, ProgramInput {
  createdAt: string;
  updatedAt: string;
  version: number;
}

export interface InitiativeInput {
  workspaceId: string;
  programId: string;
  name: string;
  status: ProgramStatus;
  ownerIds: string[];
  goal: string;
  startDate?: string;
  targetDate?: string;
  contextPack: ContextPackItem[];
}

export interface InitiativeRecord extends StoredDocument, InitiativeInput {
  createdAt: string;
  updatedAt: string;
  version: number;
}

/** A page request over records ordered by id (oldest first). */
export interface PageOptions {
  limit: number;
  after?: string;
}

/** Which workspaces a list covers: some, or (system principals and administrators) all. */
export type WorkspaceScope = { all: true } | { all: false; ids: readonly string[] };

export interface ProjectPatch {
  name?: string;
  status?: ProjectStatus;
  goal?: string;
  contextPack?: ContextPackItem[];
  initiativeId?: string | null;
  /** null: back to the workspace's policy. */
  doneRequires?: DoneRequirement | null;
  doneGate?: DoneGate | null;
}

function scopeFilter(scope: WorkspaceScope): Filter {
  if (scope.all) return {};
  return scope.ids.length === 1 ? { workspaceId: scope.ids[0] } : { workspaceId: { $in: [...scope.ids] } };
}

/** A literal, case-insensitive match of `q` in any of `fields`. */
function textFilter(q: string, fields: readonly string[]): Filter {
  const pattern = escapeRegExp(q);
  return { $or: fields.map((f) => ({ [f]: { $regex: pattern, $options: 'i' } })) };
}

function pageFilter(base: Filter, after: string | undefined): Filter {
  if (!after) return base;
  return { $and: [base, { _id: { $gt: after } }] };
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/**
 * Projects, milestones, programs and initiatives of every workspace. Each change and its event
 * are written in one outbox transaction.
 */
export class PlanningRepository {
  private constructor(
    readonly projects: Collection<ProjectRecord>,
    readonly milestones: Collection<MilestoneRecord>,
    readonly programs: Collection<ProgramRecord>,
    readonly initiatives: Collection<InitiativeRecord>,
    private readonly outbox: Outbox,
  ) {}

  static async open(store: DocumentStore, outbox: Outbox): Promise<PlanningRepository> {
    const projects = store.collection<ProjectRecord>('projects');
    const milestones = store.collection<MilestoneRecord>('milestones');
    const programs = store.collection<ProgramRecord>('programs');
    const initiatives = store.collection<InitiativeRecord>('initiatives');
    await projects.createIndexes([
      { name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } },
      { name: 'workspace_initiative', keys: { workspaceId: 1, initiativeId: 1 } },
    ]);
    await milestones.createIndexes([
      { name: 'project_id', keys: { projectId: 1, _id: 1 } },
      { name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } },
    ]);
    await programs.createIndexes([{ name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } }]);
    await initiatives.createIndexes([
      { name: 'workspace_id', keys: { workspaceId: 1, _id: 1 } },
      { name: 'program_id', keys: { programId: 1, _id: 1 } },
    ]);
    return new PlanningRepository(projects, milestones, programs, initiatives, outbox);
  }

  // ---- projects ------------------------------------------------------------------------------

  async createProject(
    input: ProjectInput,
    actor: Actor,
    now: Date,
  ): Promise<ProjectRecord> {
    const at = now.toISOString();
    const record: ProjectRecord = { _id: newId('prj'), ...input, createdAt: at, updatedAt: at, version: 1 };
    await this.outbox.transaction(async (session) => {
      await this.projects.insertOne(record, { session });
      await this.outbox.add(
        {
          type: 'project.created',
          workspaceId: record.workspaceId,
          actor,
          data: { subject: { type: 'project', id: record._id } },
        },
        { session },
      );
    });
    return record;
  }

  findProject(id: string, session?: StoreSession): Promise<ProjectRecord | null> {
    return this.projects.findOne({ _id: id }, session ? { session } : undefined);
  }

  listProjects(scope: WorkspaceScope, options: PageOptions & { q?: string; status?: string; initiativeId?: string }): Promise<ProjectRecord[]> {
    const and: Filter[] = [scopeFilter(scope)];
    if (options.status) and.push({ status: options.status });
    if (options.initiativeId) and.push({ initiativeId: options.initiativeId });
    if (options.q) and.push(textFilter(options.q, ['name', 'goal']));
    return this.projects.find(pageFilter({ $and: and }, options.after), { sort: { _id: 1 }, limit: options.limit });
  }

  /**
   * Applies the fields that differ; a patch that changes nothing writes nothing (retry-safe).
   * The write is conditional on the version read, so a concurrent change is never overwritten.
   */
  async updateProject(id: string, patch: ProjectPatch, actor: Actor, now: Date): Promise<{ project: ProjectRecord; changedFields: string[] }> {
    return this.outbox.transaction(async (session) => {
      const current = await this.findProject(id, session);
      if (!current) throw new ServiceError('not-found', 'Project not found');
      const set: Record<string, unknown> = {};
      const unset: Record<string, ''> = {};
      for (const field of ['name', 'status', 'goal', 'contextPack'] as const) {
        if (patch[field] !== undefined && !sameJson(patch[field], current[field])) set[field] = patch[field];
      }
      for (const field of ['initiativeId', 'doneRequires', 'doneGate'] as const) {
        const value = patch[field];
        if (value === undefined || value === (current[field] ?? null)) continue;
        if (value === null) unset[field] = '';
        else set[field] = value;
      }
      const changedFields = [...Object.keys(set), ...Object.keys(unset)];
      if (changedFields.length === 0) return { project: current, changedFields };
      const updated = await this.projects.findOneAndUpdate(
        { _id: id, version: current.version },
        {
          $set: { ...set, updatedAt: now.toISOString() },
          $inc: { version: 1 },
          ...(Object.keys(unset).length > 0 ? { $unset: unset } : {}),
        },
        { session },
      );
      if (!updated) throw conflict('version-conflict', 'The project changed meanwhile; retry');
      await this.outbox.add(
        {
          type: 'project.updated',
          workspaceId: current.workspaceId,
          actor,
          data: { subject: { type: 'project', id }, changedFields },
        },
        { session },
      );
      return { project: updated, changedFields };
    });
  }

  // ---- milestones ----------------------------------------------------------------------------

  async createMilestone(
    input: MilestoneInput,
    actor: Actor,
    now: Date,
  ): Promise<MilestoneRecord> {
    const at = now.toISOString();
    const record: MilestoneRecord = { _id: newId('ms'), ...input, createdAt: at, updatedAt: at, version: 1 };
    await this.outbox.transaction(async (session) => {
      // The project is read in the transaction: a milestone never lands in a project that is gone.
      if (!(await this.findProject(record.projectId, session))) throw new ServiceError('not-found', 'Project not found');
      await this.milestones.insertOne(record, { session });
      await this.outbox.add(
        {
          type: 'milestone.created',
          workspaceId: record.workspaceId,
          actor,
          data: { subject: { type: 'milestone', id: record._id }, projectId: record.projectId },
        },
        { session },
      );
    });
    return record;
  }

  findMilestone(id: string, session?: StoreSession): Promise<MilestoneRecord | null> {
    return this.milestones.findOne({ _id: id }, session ? { session } : undefined);
  }

  listMilestones(
    where: { projectId: string } | { scope: WorkspaceScope },
    options: PageOptions & { status?: string },
  ): Promise<MilestoneRecord[]> {
    const and: Filter[] = ['projectId' in where ? { projectId: where.projectId } : scopeFilter(where.scope)];
    if (options.status) and.push({ status: options.status });
    return this.milestones.find(pageFilter({ $and: and }, options.after), { sort: { _id: 1 }, limit: options.limit });
  }

  // ---- programs ------------------------------------------------------------------------------

  async createProgram(
    input: ProgramInput,
    actor: Actor,
    now: Date,
  ): Promise<ProgramRecord> {
    const at = now.toISOString();
    const record: ProgramRecord = { _id: newId('prg'), ...input, createdAt: at, updatedAt: at, version: 1 };
    await this.outbox.transaction(async (session) => {
      await this.programs.insertOne(record, { session });
      await this.outbox.add(
        {
          type: 'program.created',
          workspaceId: record.workspaceId,
          actor,
          data: { subject: { type: 'program', id: record._id } },
        },
        { session },
      );
    });
    return record;
  }

  findProgram(id: string, session?: StoreSession): Promise<ProgramRecord | null> {
    return this.programs.findOne({ _id: id }, session ? { session } : undefined);
  }

  listPrograms(scope: WorkspaceScope, options: PageOptions & { q?: string; status?: string }): Promise<ProgramRecord[]> {
    const and: Filter[] = [scopeFilter(scope)];
    if (options.status) and.push({ status: options.status });
    if (options.q) and.push(textFilter(options.q, ['name', 'description']));
    return this.programs.find(pageFilter({ $and: and }, options.after), { sort: { _id: 1 }, limit: options.limit });
  }

  // ---- initiatives ---------------------------------------------------------------------------

  async createInitiative(
    input: InitiativeInput,
    actor: Actor,
    now: Date,
  ): Promise<InitiativeRecord> {
    const at = now.toISOString();
    const record: InitiativeRecord = { _id: newId('ini'), ...input, createdAt: at, updatedAt: at, version: 1 };
    await this.outbox.transaction(async (session) => {
      if (!(await this.findProgram(record.programId, session))) throw new ServiceError('not-found', 'Program not found');
      await this.initiatives.insertOne(record, { session });
      await this.outbox.add(
        {
          type: 'initiative.created',
          workspaceId: record.workspaceId,
          actor,
          data: { subject: { type: 'initiative', id: record._id }, programId: record.programId },
        },
        { session },
      );
    });
    return record;
  }

  findInitiative(id: string, session?: StoreSession): Promise<InitiativeRecord | null> {
    return this.initiatives.findOne({ _id: id }, session ? { session } : undefined);
  }

  listInitiatives(
    scope: WorkspaceScope,
    options: PageOptions & { q?: string; status?: string; programId?: string },
  ): Promise<InitiativeRecord[]> {
    const and: Filter[] = [scopeFilter(scope)];
    if (options.programId) and.push({ programId: options.programId });
    if (options.status) and.push({ status: options.status });
    if (options.q) and.push(textFilter(options.q, ['name', 'goal']));
    return this.initiatives.find(pageFilter({ $and: and }, options.after), { sort: { _id: 1 }, limit: options.limit });
  }
}
