import { openServiceStore, storeReadiness, type ModuleDefinition } from '@planning/runtime';

/**
 * The imports-exports service: import previews and commits, exports and their history. It owns
 * its store from the start so deployments and health checks are in place.
 */
export const importsExportsModule: ModuleDefinition = {
  name: 'imports-exports',
  deps: ['bus', 'rpc-server', 'rpc-clients'],
  async init(ctx) {
    const store = await openServiceStore(ctx.config, 'imports-exports');
    return {
      async stop() {
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
