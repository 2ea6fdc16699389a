import { validateDoneGate, validateDoneRequires } from '../domain/done-policy.js';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { invalidInput, ServiceError } from '@planning/errors';
import {
  ProjectService,
  type ContextPackItem as ContextPackItemMessage,
  type MilestoneSchema,
  type ProjectSchema,
} from '@planning/proto/planning/issues/v1/projects_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import { optionalId, validateDate, validateEnum, validateId, validateName, validateQuery } from '../domain/fields.js';
import {
  MILESTONE_STATUSES,
  PROJECT_STATUSES,
  validateContextPack,
  validateGoal,
  type ContextPackItem,
} from '../domain/planning.js';
import type { MilestoneRecord, PlanningRepository, ProjectPatch, ProjectRecord } from '../store/planning.js';
import { pageOf, pageRequest } from './paging.js';
import { MANAGE_PROJECTS, READ_PROJECTS, type PlanningAccess } from './planning-access.js';
import { actorOf } from './workspace-service.js';

export { ProjectService };

/** Project fields a PATCH may unset (the done policy's: back to the workspace's). */
const CLEARABLE = ['initiativeId', 'doneRequires', 'doneGate'] as const;

export function toProjectMessage(p: ProjectRecord): MessageInitShape<typeof ProjectSchema> {
  return {
    id: p._id,
    workspaceId: p.workspaceId,
    name: p.name,
    status: p.status,
    goal: p.goal,
    initiativeId: p.initiativeId,
    contextPack: p.contextPack,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
    createdBy: p.createdBy,
    version: p.version,
    ...(p.doneRequires ? { doneRequires: p.doneRequires } : {}),
    ...(p.doneGate ? { doneGate: p.doneGate } : {}),
  };
}

export function toMilestoneMessage(m: MilestoneRecord): MessageInitShape<typeof MilestoneSchema> {
  return {
    id: m._id,
    workspaceId: m.workspaceId,
    projectId: m.projectId,
    name: m.name,
    status: m.status,
    targetDate: m.targetDate,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
    version: m.version,
  };
}

/** Context pack items as plain values for validation (empty optional strings are unset). */
export function rawContextPack(items: readonly ContextPackItemMessage[]): Record<string, unknown>[] {
  return items.map((i) => ({ kind: i.kind, title: i.title, path: i.path, url: i.url, note: i.note }));
}

export interface ProjectServiceDeps {
  planning: PlanningRepository;
  access: PlanningAccess;
  clock: () => Date;
}

export function createProjectService(deps: ProjectServiceDeps): ServiceImplementation<typeof ProjectService> {
  const { planning, access } = deps;

  /** The project by id, if the caller may do `requirement` in its workspace. */
  const projectFor = async (ctx: CallContext, id: string, requirement = READ_PROJECTS, field = 'id'): Promise<ProjectRecord> => {
    const project = await planning.findProject(validateId(id, field));
    if (!project) throw new ServiceError('not-found', 'Project not found');
    await access.record(ctx, 'Project', project.workspaceId, requirement);
    return project;
  };

  /** An initiative of the workspace, for a project to belong to. */
  const initiativeIn = async (workspaceId: string, id: string): Promise<string> => {
    const initiative = await planning.findInitiative(id);
    if (!initiative || initiative.workspaceId !== workspaceId) throw new ServiceError('not-found', 'Initiative not found');
    return id;
  };

  return {
    async createProject(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      const name = validateName(request.name, 'name');
      const goal = request.goal === undefined ? '' : validateGoal(request.goal);
      const status = request.status === undefined ? 'active' : validateEnum(request.status, PROJECT_STATUSES, 'status');
      const contextPack: ContextPackItem[] = validateContextPack(rawContextPack(request.contextPack));
      const initiativeId = optionalId(request.initiativeId, 'initiativeId');
      await access.workspace(ctx, workspaceId, MANAGE_PROJECTS);
      const project = await planning.createProject(
        {
          workspaceId,
          name,
          status,
          goal,
          contextPack,
          ...(initiativeId ? { initiativeId: await initiativeIn(workspaceId, initiativeId) } : {}),
          createdBy: actorOf(ctx.principal).id,
        },
        actorOf(ctx.principal),
        deps.clock(),
      );
      return { project: toProjectMessage(project) };
    },

    async listProjects(request, ctx) {
      const workspaceId = optionalId(request.workspaceId, 'workspaceId');
      const status = request.status ? validateEnum(request.status, PROJECT_STATUSES, 'status') : undefined;
      const initiativeId = optionalId(request.initiativeId, 'initiativeId');
      const q = validateQuery(request.q);
      const page = pageRequest(request);
      const scope = await access.scope(ctx, workspaceId, READ_PROJECTS);
      const rows = await planning.listProjects(scope, {
        limit: page.limit + 1,
        ...(page.after ? { after: page.after } : {}),
        ...(q ? { q } : {}),
        ...(status ? { status } : {}),
        ...(initiativeId ? { initiativeId } : {}),
      });
      const { items, nextCursor } = pageOf(rows, page.limit);
      return { projects: items.map(toProjectMessage), nextCursor };
    },

    async getProject(request, ctx) {
      return { project: toProjectMessage(await projectFor(ctx, request.id)) };
    },

    async updateProject(request, ctx) {
      const id = validateId(request.id, 'projectId');
      const patch: ProjectPatch = {};
      if (request.status !== undefined) patch.status = validateEnum(request.status, PROJECT_STATUSES, 'status');
      if (request.goal !== undefined) patch.goal = validateGoal(request.goal);
      if (request.name !== undefined) patch.name = validateName(request.name, 'name');
      if (request.contextPack) patch.contextPack = validateContextPack(rawContextPack(request.contextPack.items));
      if (request.initiativeId !== undefined) patch.initiativeId = validateId(request.initiativeId, 'initiativeId');
      if (request.doneRequires !== undefined) patch.doneRequires = validateDoneRequires(request.doneRequires);
      if (request.doneGate !== undefined) patch.doneGate = validateDoneGate(request.doneGate);
      for (const field of request.clearFields) {
        if (!CLEARABLE.includes(field as (typeof CLEARABLE)[number]) || patch[field as (typeof CLEARABLE)[number]] !== undefined) {
          throw invalidInput('clearFields', `'clearFields' may name ${CLEARABLE.join(', ')} (each only when it is not also set)`);
        }
        patch[field as (typeof CLEARABLE)[number]] = null;
      }
      if (Object.keys(patch).length === 0) {
        throw invalidInput('status', "Send at least one of 'status' and 'goal' (or 'name', 'contextPack', 'initiativeId', 'doneRequires', 'doneGate')");
      }
      const project = await projectFor(ctx, id, MANAGE_PROJECTS, 'projectId');
      if (typeof patch.initiativeId === 'string') await initiativeIn(project.workspaceId, patch.initiativeId);
      const result = await planning.updateProject(id, patch, actorOf(ctx.principal), deps.clock());
      return { project: toProjectMessage(result.project), changedFields: result.changedFields };
    },

    async createMilestone(request, ctx) {
      const projectId = validateId(request.projectId, 'projectId');
      const name = validateName(request.name, 'name');
      const targetDate = request.targetDate ? validateDate(request.targetDate, 'targetDate') : undefined;
      const status = request.status === undefined ? 'active' : validateEnum(request.status, MILESTONE_STATUSES, 'status');
      const project = await projectFor(ctx, projectId, MANAGE_PROJECTS, 'projectId');
      const milestone = await planning.createMilestone(
        { workspaceId: project.workspaceId, projectId, name, status, ...(targetDate ? { targetDate } : {}) },
        actorOf(ctx.principal),
        deps.clock(),
      );
      return { milestone: toMilestoneMessage(milestone) };
    },

    async listMilestones(request, ctx) {
      const projectId = optionalId(request.projectId, 'projectId');
      const workspaceId = optionalId(request.workspaceId, 'workspaceId');
      const status = request.status ? validateEnum(request.status, MILESTONE_STATUSES, 'status') : undefined;
      const page = pageRequest(request);
      if (!projectId && !workspaceId) throw invalidInput('projectId', "'projectId' (or 'workspaceId') is required");
      let where: Parameters<PlanningRepository['listMilestones']>[0];
      if (projectId) {
        const project = await projectFor(ctx, projectId, READ_PROJECTS, 'projectId');
        if (workspaceId && project.workspaceId !== workspaceId) throw new ServiceError('not-found', 'Project not found');
        where = { projectId };
      } else {
        where = { scope: await access.scope(ctx, workspaceId, READ_PROJECTS) };
      }
      const rows = await planning.listMilestones(where, {
        limit: page.limit + 1,
        ...(page.after ? { after: page.after } : {}),
        ...(status ? { status } : {}),
      });
      const { items, nextCursor } = pageOf(rows, page.limit);
      return { milestones: items.map(toMilestoneMessage), nextCursor };
    },
  };
}
