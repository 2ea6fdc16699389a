/**
 * The agents-claims module as the entry point sees it: name, dependencies and settings. Its
 * implementation (module.ts: claims core, stores, sweeper, RPC service) is loaded when a runtime
 * starts the module, in the thread that runs it.
 */
import { lazyModule } from '@planning/runtime';
import { agentsClaimsSettings, type AgentsClaimsSettings } from './config.js';

export const agentsClaimsModule = lazyModule<AgentsClaimsSettings>(
  { name: 'agents-claims', deps: ['bus', 'rpc-server', 'rpc-clients'], settings: agentsClaimsSettings },
  async () => (await import('./module.js')).agentsClaimsImplementation,
);
