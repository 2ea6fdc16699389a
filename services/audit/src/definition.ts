/**
 * The audit module as the entry point sees it: name and dependencies (it reads no settings). Its
 * implementation (module.ts: the event store, the bus consumer, the RPC service) is loaded when a
 * runtime starts the module, in the thread that runs it.
 */
import { lazyModule } from '@planning/runtime';

export const auditModule = lazyModule(
  { name: 'audit', deps: ['bus', 'rpc-server', 'rpc-clients'] },
  async () => (await import('./module.js')).auditImplementation,
);
