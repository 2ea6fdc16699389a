import type { EnvValues } from '@planning/config';
import { ProgramService } from '@planning/proto/planning/issues/v1/programs_pb';
import { ProjectService } from '@planning/proto/planning/issues/v1/projects_pb';
import { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import { TaskService } from '@planning/proto/planning/issues/v1/tasks_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { ModuleDefinition, RpcClientsExports } from '@planning/runtime';
import { demoSettings } from '../config.js';
import { seedDemo } from './seed.js';


export type DemoSettings = EnvValues<typeof demoSettings>;

/**
 * What the demo needs from the gateway module: the system administrator it created at start
 * (the gateway owns the user directory). Structural, so this package does not import the gateway.
 */
interface GatewayView {
  deps: {
    settings: { SERVICE_ADMIN_EMAIL: string };
    users: { findByEmail(email: string): Promise<{ _id: string } | null> };
  };
}

/**
 * Seeds the demo workspace once the gateway has bootstrapped the administrator, through the
 * issues service's RPCs as the system principal. Only the `all` target includes this module
 * (the registry decides); a failure is logged and never stops the process.
 */
export const demoModule: ModuleDefinition<DemoSettings> = {
  name: 'demo',
  // The issues service is reached through rpc-clients (in all-in-one it may run in another thread).
  deps: ['gateway', 'rpc-clients'],
  settings: demoSettings,
  async init(ctx) {
    return {
      async start() {
        if (!ctx.settings.SERVICE_DEMO) return;
        const gateway = ctx.get<GatewayView>('gateway');
        const clients = ctx.get<RpcClientsExports>('rpc-clients');
        try {
          const admin = await gateway.deps.users.findByEmail(gateway.deps.settings.SERVICE_ADMIN_EMAIL);
          if (!admin) {
            ctx.logger.warn({}, 'demo workspace not seeded: no system administrator');
            return;
          }
          const result = await seedDemo(
            {
              workspaces: clients.client('issues', WorkspaceService),
              projects: clients.client('issues', ProjectService),
              programs: clients.client('issues', ProgramService),
              tasks: clients.client('issues', TaskService),
              taskRecords: clients.client('issues', TaskRecordService),
            },
            admin._id,
            new Date(),
          );
          ctx.logger.info(result, result.created > 0 ? 'demo workspace seeded' : 'demo workspace already present');
        } catch (err) {
          ctx.logger.error({ err }, 'demo workspace could not be seeded');
        }
      },
    };
  },
};
