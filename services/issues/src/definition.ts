/**
 * The issues module as the entry point sees it: name, dependencies and settings. Its
 * implementation (module.ts: stores, repositories, RPC services) is loaded when a runtime starts
 * the module, in the thread that runs it.
 */
import { lazyModule } from '@planning/runtime';
import { issuesSettings, type IssuesSettings } from './config.js';

export const issuesModule = lazyModule<IssuesSettings>(
  { name: 'issues', deps: ['bus', 'rpc-server', 'rpc-clients'], settings: issuesSettings },
  async () => (await import('./module.js')).issuesImplementation,
);
