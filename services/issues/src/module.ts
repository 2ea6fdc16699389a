import type { EnvValues } from '@planning/config';
import { createOutbox } from '@planning/outbox';
import {
  openServiceStore,
  storeReadiness,
  type BusExports,
  type ModuleDefinition,
  type RpcServerExports,
} from '@planning/runtime';
import { injectTraceHeaders } from '@planning/telemetry';
import { issuesSettings } from './config.js';
import { openPlanning, ProgramService, ProjectService, TaskRecordService, TaskService } from './planning.js';
import { registerUsageProvider } from '@planning/metering';
import { AgentService, createAgentService } from './rpc/agent-service.js';
import { ClaimSupportService, createClaimSupportService } from './rpc/claim-support.js';
import { createGuidanceService, GuidanceService } from './rpc/guidance-service.js';
import { createImportSupportService, ImportSupportService } from './rpc/import-support.js';
import { createPlanningAccess } from './rpc/planning-access.js';
import { createIssuesUsageProvider } from './rpc/usage-provider.js';
import { createLocalAccess, createWorkspaceService, WorkspaceService } from './rpc/workspace-service.js';
import { AgentRepository } from './store/agents.js';
import { ClaimSupportRepository } from './store/claim-support.js';
import { GuidanceRepository } from './store/guidance.js';
import { ImportSupportRepository } from './store/import-support.js';
import { storedTaskCounter } from './store/usage.js';
import { WorkspaceRepository } from './store/workspaces.js';

export type IssuesSettings = EnvValues<typeof issuesSettings>;

/** The issues service: workspaces and members, and (as it grows) everything planned in them. */
export const issuesModule: ModuleDefinition<IssuesSettings> = {
  name: 'issues',
  deps: ['bus', 'rpc-server'],
  settings: issuesSettings,
  async init(ctx) {
    const { bus } = ctx.get<BusExports>('bus');
    const rpc = ctx.get<RpcServerExports>('rpc-server');
    const store = await openServiceStore(ctx.config, 'issues');
    const clock = () => new Date();
    const outbox = await createOutbox({
      store,
      bus,
      source: 'issues',
      logger: ctx.logger,
      traceHeaders: () => injectTraceHeaders(),
    });
    const workspaces = await WorkspaceRepository.open(store, outbox);
    rpc.addService(WorkspaceService, createWorkspaceService({ workspaces, clock }));
    const access = createLocalAccess(workspaces);
    const agents = await AgentRepository.open(store, outbox);
    rpc.addService(AgentService, createAgentService({ agents, access, clock }));
    registerUsageProvider(rpc, createIssuesUsageProvider({ access, countStoredTasks: storedTaskCounter(store) }));
    const planning = await openPlanning({ store, outbox, workspaces, agents, access, clock });
    rpc.addService(ProjectService, planning.services.projects);
    rpc.addService(ProgramService, planning.services.programs);
    rpc.addService(TaskService, planning.services.tasks);
    rpc.addService(TaskRecordService, planning.services.taskRecords);
    // What the agents-claims service asks of tasks (claims mirror on tasks, the ready queue).
    rpc.addService(
      ClaimSupportService,
      createClaimSupportService({
        repo: await ClaimSupportRepository.open(outbox, planning.tasks, planning.records),
        access: createPlanningAccess(access, workspaces),
        clock,
      }),
    );
    // What the imports-exports service asks of tasks (checking import rows, writing commit chunks).
    rpc.addService(
      ImportSupportService,
      createImportSupportService({ repo: await ImportSupportRepository.open(store, outbox, planning.tasks, planning.planning), clock }),
    );
    const guidance = await GuidanceRepository.open(store, outbox);
    rpc.addService(
      GuidanceService,
      createGuidanceService({
        guidance,
        planning: planning.planning,
        tasks: planning.tasks,
        records: planning.records,
        access: createPlanningAccess(access, workspaces),
        clock,
      }),
    );
    return {
      async start() {
        await outbox.start();
      },
      async stop() {
        await outbox.stop();
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
