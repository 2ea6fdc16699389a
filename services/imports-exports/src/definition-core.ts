/**
 * The imports-exports module without its settings' schemas: name, dependencies and the implementation
 * (module.ts, loaded when a runtime starts the module). For a thread that is handed its settings
 * already parsed (the services' worker of an all-in-one process): it loads neither config.ts nor
 * zod. definition.ts adds the schemas for the thread that reads the environment.
 */
import { lazyModule } from '@planning/runtime';
import type { ImportsExportsSettings } from './config.js';

export const importsExportsModuleCore = lazyModule<ImportsExportsSettings>(
  { name: 'imports-exports', deps: ['bus', 'rpc-server', 'rpc-clients'] },
  async () => (await import('./module.js')).importsExportsImplementation,
);
