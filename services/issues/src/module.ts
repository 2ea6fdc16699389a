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
import { createWorkspaceService, WorkspaceService } from './rpc/workspace-service.js';
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
