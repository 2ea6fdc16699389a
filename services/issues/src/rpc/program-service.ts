import type { MessageInitShape } from '@bufbuild/protobuf';
import { invalidInput, ServiceError } from '@planning/errors';
import { ProgramService, type InitiativeSchema, type ProgramSchema } from '@planning/proto/planning/issues/v1/programs_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import { LIMITS, optionalId, validateDate, validateEnum, validateId, validateName, validateQuery, validateText } from '../domain/fields.js';
import { PROGRAM_STATUSES, validateContextPack, validateGoal } from '../domain/planning.js';
import type { InitiativeRecord, PlanningRepository, ProgramRecord } from '../store/planning.js';
import type { WorkspaceRepository } from '../store/workspaces.js';
import { pageOf, pageRequest } from './paging.js';
import { MANAGE_PROJECTS, READ_PROJECTS, type PlanningAccess } from './planning-access.js';
import { rawContextPack } from './project-service.js';
import { actorOf } from './workspace-service.js';

export { ProgramService };

export function toProgramMessage(p: ProgramRecord): MessageInitShape<typeof ProgramSchema> {
  return {
    id: p._id,
    workspaceId: p.workspaceId,
    name: p.name,
    status: p.status,
    ownerId: p.ownerId,
    description: p.description,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
    version: p.version,
  };
}

export function toInitiativeMessage(i: InitiativeRecord): MessageInitShape<typeof InitiativeSchema> {
  return {
    id: i._id,
    workspaceId: i.workspaceId,
    programId: i.programId,
    name: i.name,
    status: i.status,
    ownerIds: i.ownerIds,
    goal: i.goal,
    startDate: i.startDate,
    targetDate: i.targetDate,
    contextPack: i.contextPack,
    createdAt: i.createdAt,
    updatedAt: i.updatedAt,
    version: i.version,
  };
}

export interface ProgramServiceDeps {
  planning: PlanningRepository;
  workspaces: WorkspaceRepository;
  access: PlanningAccess;
  clock: () => Date;
}

export function createProgramService(deps: ProgramServiceDeps): ServiceImplementation<typeof ProgramService> {
  const { planning, access, workspaces } = deps;

  /**
   * Owners are members of the workspace (the user directory belongs to the gateway; membership is
   * what the issues service knows). Without owners given: the calling user, or for a token or a
   * service the workspace owner.
   */
  const ownersIn = async (ctx: CallContext, workspaceId: string, given: readonly string[], field: string): Promise<string[]> => {
    if (given.length === 0) {
      const principal = ctx.principal;
      if (principal.type === 'user') return [principal.id];
      const workspace = await workspaces.findById(workspaceId);
      return workspace ? [workspace.ownerId] : [];
    }
    if (given.length > LIMITS.owners) throw invalidInput(field, `'${field}' may name at most ${LIMITS.owners} owners`);
    const owners: string[] = [];
    for (const [i, raw] of given.entries()) {
      const id = validateId(raw, given.length === 1 && field === 'ownerId' ? field : `${field}[${i}]`);
      if (!(await workspaces.roleOf(workspaceId, id))) throw new ServiceError('not-found', `Owner '${id}' is not a member of this workspace`);
      if (!owners.includes(id)) owners.push(id);
    }
    return owners;
  };

  return {
    async createProgram(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      const name = validateName(request.name, 'name');
      const status = request.status === undefined ? 'active' : validateEnum(request.status, PROGRAM_STATUSES, 'status');
      const description = request.description === undefined ? '' : validateText(request.description, 'description', LIMITS.goal).trim();
      await access.workspace(ctx, workspaceId, MANAGE_PROJECTS);
      const [ownerId] = await ownersIn(ctx, workspaceId, request.ownerId ? [request.ownerId] : [], 'ownerId');
      const program = await planning.createProgram(
        { workspaceId, name, status, description, ownerId: ownerId ?? '' },
        actorOf(ctx.principal),
        deps.clock(),
      );
      return { program: toProgramMessage(program) };
    },

    async listPrograms(request, ctx) {
      const workspaceId = optionalId(request.workspaceId, 'workspaceId');
      const status = request.status ? validateEnum(request.status, PROGRAM_STATUSES, 'status') : undefined;
      const q = validateQuery(request.q);
      const page = pageRequest(request);
      const scope = await access.scope(ctx, workspaceId, READ_PROJECTS);
      const rows = await planning.listPrograms(scope, {
        limit: page.limit + 1,
        ...(page.after ? { after: page.after } : {}),
        ...(q ? { q } : {}),
        ...(status ? { status } : {}),
      });
      const { items, nextCursor } = pageOf(rows, page.limit);
      return { programs: items.map(toProgramMessage), nextCursor };
    },

    async createInitiative(request, ctx) {
      const programId = validateId(request.programId, 'programId');
      const name = validateName(request.name, 'name');
      const status = request.status === undefined ? 'active' : validateEnum(request.status, PROGRAM_STATUSES, 'status');
      const goal = request.goal === undefined ? '' : validateGoal(request.goal);
      const startDate = request.startDate ? validateDate(request.startDate, 'startDate') : undefined;
      const targetDate = request.targetDate ? validateDate(request.targetDate, 'targetDate') : undefined;
      if (startDate && targetDate && startDate > targetDate) throw invalidInput('targetDate', "'targetDate' must not be before 'startDate'");
      const contextPack = validateContextPack(rawContextPack(request.contextPack));
      const program = await planning.findProgram(programId);
      if (!program) throw new ServiceError('not-found', 'Program not found');
      await access.record(ctx, 'Program', program.workspaceId, MANAGE_PROJECTS);
      // Checked after access, so a stranger learns nothing about the program's workspace.
      if (request.workspaceId !== undefined && request.workspaceId !== program.workspaceId) {
        throw invalidInput('workspaceId', "'workspaceId' is not the program's workspace");
      }
      const ownerIds = await ownersIn(ctx, program.workspaceId, request.ownerIds, 'ownerIds');
      const initiative = await planning.createInitiative(
        {
          workspaceId: program.workspaceId,
          programId,
          name,
          status,
          goal,
          ownerIds,
          contextPack,
          ...(startDate ? { startDate } : {}),
          ...(targetDate ? { targetDate } : {}),
        },
        actorOf(ctx.principal),
        deps.clock(),
      );
      return { initiative: toInitiativeMessage(initiative) };
    },

    async listInitiatives(request, ctx) {
      const workspaceId = optionalId(request.workspaceId, 'workspaceId');
      const programId = optionalId(request.programId, 'programId');
      const status = request.status ? validateEnum(request.status, PROGRAM_STATUSES, 'status') : undefined;
      const q = validateQuery(request.q);
      const page = pageRequest(request);
      let scope = await access.scope(ctx, workspaceId, READ_PROJECTS);
      if (programId) {
        const program = await planning.findProgram(programId);
        if (!program || (workspaceId && program.workspaceId !== workspaceId)) throw new ServiceError('not-found', 'Program not found');
        await access.record(ctx, 'Program', program.workspaceId, READ_PROJECTS);
        scope = { all: false, ids: [program.workspaceId] };
      }
      const rows = await planning.listInitiatives(scope, {
        limit: page.limit + 1,
        ...(page.after ? { after: page.after } : {}),
        ...(q ? { q } : {}),
        ...(status ? { status } : {}),
        ...(programId ? { programId } : {}),
      });
      const { items, nextCursor } = pageOf(rows, page.limit);
      return { initiatives: items.map(toInitiativeMessage), nextCursor };
    },

    async getInitiative(request, ctx) {
      const initiative = await planning.findInitiative(validateId(request.id, 'id'));
      if (!initiative) throw new ServiceError('not-found', 'Initiative not found');
      await access.record(ctx, 'Initiative', initiative.workspaceId, READ_PROJECTS);
      return { initiative: toInitiativeMessage(initiative) };
    },
  };
}
