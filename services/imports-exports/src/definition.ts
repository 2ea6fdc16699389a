/**
 * The imports-exports module as the entry point sees it: name, dependencies and settings. Its
 * implementation (module.ts: import and export cores, stores, RPC services) is loaded when a
 * runtime starts the module, in the thread that runs it.
 */
import { lazyModule } from '@planning/runtime';
import { importsExportsSettings, type ImportsExportsSettings } from './config.js';

export const importsExportsModule = lazyModule<ImportsExportsSettings>(
  { name: 'imports-exports', deps: ['bus', 'rpc-server', 'rpc-clients'], settings: importsExportsSettings },
  async () => (await import('./module.js')).importsExportsImplementation,
);
