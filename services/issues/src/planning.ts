/**
 * The planning half of the issues service: projects, milestones, programs, initiatives, tasks and
 * what accumulates on them. Opens the repositories on the service's store and returns the gRPC
 * services the module registers (the REST routes and the MCP tools both call these).
 */
import type { AccessLookup } from '@planning/access';
import type { Outbox } from '@planning/outbox';
import type { ServiceImplementation } from '@planning/rpc';
import type { DocumentStore } from '@planning/store';
import { effectiveDonePolicy } from './domain/done-policy.js';
import { createPlanningAccess } from './rpc/planning-access.js';
import { createProgramService, ProgramService } from './rpc/program-service.js';
import { createProjectService, ProjectService } from './rpc/project-service.js';
import { createTaskRecordService, TaskRecordService } from './rpc/task-record-service.js';
import { createTaskService, TaskService } from './rpc/task-service.js';
import type { WriteFences } from './rpc/write-fences.js';
import type { AgentRepository } from './store/agents.js';
import { PlanningRepository } from './store/planning.js';
import { TaskRecordRepository } from './store/task-records.js';
import { TaskRepository } from './store/tasks.js';
import type { WorkspaceRepository } from './store/workspaces.js';

export interface PlanningDeps {
  store: DocumentStore;
  outbox: Outbox;
  workspaces: WorkspaceRepository;
  agents: Pick<AgentRepository, 'exists'>;
  access: AccessLookup;
  /** The fence of agent writes: agents-claims' ClaimService (rpc/write-fences.ts). */
  fences: WriteFences;
  clock: () => Date;
  /** How long a pending approval request blocks (default 7 days). */
  approvalTtlSeconds?: number;
}

export interface Planning {
  planning: PlanningRepository;
  tasks: TaskRepository;
  records: TaskRecordRepository;
  services: {
    projects: ServiceImplementation<typeof ProjectService>;
    programs: ServiceImplementation<typeof ProgramService>;
    tasks: ServiceImplementation<typeof TaskService>;
    taskRecords: ServiceImplementation<typeof TaskRecordService>;
  };
}

export async function openPlanning(deps: PlanningDeps): Promise<Planning> {
  const planning = await PlanningRepository.open(deps.store, deps.outbox);
  const tasks = await TaskRepository.open(deps.store, deps.outbox, planning, {
    agentExists: (workspaceId, agentId, session) => deps.agents.exists(workspaceId, agentId, session),
    async donePolicy(workspaceId, projectId, session, workspaceRead) {
      const [workspace, project] = await Promise.all([
        workspaceRead?._id === workspaceId && !session ? workspaceRead : deps.workspaces.findById(workspaceId, session),
        planning.findProject(projectId, session),
      ]);
      return effectiveDonePolicy(workspace, project);
    },
  });
  const records = await TaskRecordRepository.open(deps.store, deps.outbox, tasks, {
    ...(deps.approvalTtlSeconds !== undefined ? { approvalTtlSeconds: deps.approvalTtlSeconds } : {}),
  });
  const access = createPlanningAccess(deps.access, deps.workspaces);
  const common = { access, fences: deps.fences, clock: deps.clock };
  return {
    planning,
    tasks,
    records,
    services: {
      projects: createProjectService({ planning, ...common }),
      programs: createProgramService({ planning, workspaces: deps.workspaces, ...common }),
      tasks: createTaskService({ tasks, records, planning, workspaces: deps.workspaces, ...common }),
      taskRecords: createTaskRecordService({ tasks, records, ...common }),
    },
  };
}

export { ProgramService, ProjectService, TaskRecordService, TaskService };
