import { createRemoteAccess } from '@planning/access';
import { createUsageMeter, meteredUsageProvider, registerUsageProvider } from '@planning/metering';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import {
  openServiceStore,
  storeReadiness,
  type ModuleDefinition,
  type RpcClientsExports,
  type RpcServerExports,
} from '@planning/runtime';

/**
 * The agents-claims service: ready-work queue, claims and leases, fencing tokens, agent-run
 * metering. It owns its store from the start so deployments and health checks are in place.
 */
export const agentsClaimsModule: ModuleDefinition = {
  name: 'agents-claims',
  deps: ['bus', 'rpc-server', 'rpc-clients'],
  async init(ctx) {
    const store = await openServiceStore(ctx.config, 'agents-claims');
    // Monthly usage of this service's quota kinds, reported to GET /api/billing/usage.
    const meter = await createUsageMeter(store);
    const access = createRemoteAccess(ctx.get<RpcClientsExports>('rpc-clients').client('issues', WorkspaceService));
    registerUsageProvider(
      ctx.get<RpcServerExports>('rpc-server'),
      meteredUsageProvider({ owner: 'agents-claims', kinds: ['agent-runs'], meter, access }),
    );
    return {
      async stop() {
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
