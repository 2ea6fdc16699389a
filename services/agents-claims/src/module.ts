import { openServiceStore, storeReadiness, type ModuleDefinition } from '@planning/runtime';

/**
 * The agents-claims service: ready-work queue, claims and leases, fencing tokens, agent-run
 * metering. It owns its store from the start so deployments and health checks are in place.
 */
export const agentsClaimsModule: ModuleDefinition = {
  name: 'agents-claims',
  deps: ['bus', 'rpc-server', 'rpc-clients'],
  async init(ctx) {
    const store = await openServiceStore(ctx.config, 'agents-claims');
    return {
      async stop() {
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
