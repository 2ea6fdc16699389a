import { createOutbox } from '@planning/outbox';
import {
  openServiceStore,
  storeReadiness,
  type BusExports,
  type ModuleImplementation,
  type RpcClientsExports,
  type RpcServerExports,
} from '@planning/runtime';
import { ClaimService } from '@planning/proto/planning/claims/v1/claims_pb';
import { injectTraceHeaders } from '@planning/telemetry';
import { createApprovalSweeper } from './approval-sweeper.js';
import type { IssuesSettings } from './config.js';
import { openPlanning, ProgramService, ProjectService, TaskRecordService, TaskService } from './planning.js';
import { registerUsageProvider } from '@planning/metering';
import { AgentService, createAgentService } from './rpc/agent-service.js';
import { ClaimSupportService, createClaimSupportService } from './rpc/claim-support.js';
import { createGuidanceService, GuidanceService } from './rpc/guidance-service.js';
import { createImportSupportService, ImportSupportService } from './rpc/import-support.js';
import { createPlanningAccess } from './rpc/planning-access.js';
import { createIssuesUsageProvider } from './rpc/usage-provider.js';
import { createRemoteWriteFences } from './rpc/write-fences.js';
import { createLocalAccess, createWorkspaceService, WorkspaceService } from './rpc/workspace-service.js';
import { AgentRepository } from './store/agents.js';
import { ClaimSupportRepository } from './store/claim-support.js';
import { GuidanceRepository } from './store/guidance.js';
import { ImportSupportRepository } from './store/import-support.js';
import { storedTaskCounter } from './store/usage.js';
import { WorkspaceRepository } from './store/workspaces.js';

/** The issues service: workspaces and members, and (as it grows) everything planned in them. */
export const issuesImplementation: ModuleImplementation<IssuesSettings> = {
  async init(ctx) {
    const { bus } = ctx.get<BusExports>('bus');
    const rpc = ctx.get<RpcServerExports>('rpc-server');
    const clients = ctx.get<RpcClientsExports>('rpc-clients');
    const store = await openServiceStore(ctx.config, 'issues', ctx.logger);
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
    // Agent writes are fenced by the agents-claims service, which owns claims and their rule.
    const fences = createRemoteWriteFences(clients.client('agents-claims', ClaimService));
    const planning = await openPlanning({
      store,
      outbox,
      workspaces,
      agents,
      access,
      fences,
      clock,
      approvalTtlSeconds: ctx.settings.APPROVAL_TTL_SECONDS,
    });
    const approvalSweeper = createApprovalSweeper(planning.records, { intervalMs: ctx.settings.APPROVAL_SWEEP_INTERVAL_MS, clock, logger: ctx.logger });
    rpc.addService(ProjectService, planning.services.projects);
    rpc.addService(ProgramService, planning.services.programs);
    rpc.addService(TaskService, planning.services.tasks);
    rpc.addService(TaskRecordService, planning.services.taskRecords);
    // What the agents-claims service asks of tasks (claims mirror on tasks, the ready queue).
    rpc.addService(
      ClaimSupportService,
      createClaimSupportService({
        repo: await ClaimSupportRepository.open(outbox, planning.tasks, planning.records, store),
        tasks: planning.tasks,
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
        approvalSweeper.start();
      },
      async stop() {
        await approvalSweeper.stop();
        await outbox.stop();
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
