/**
 * The issues module as the entry point sees it: name, dependencies and settings. Its
 * implementation (module.ts: stores, repositories, RPC services) is loaded when a runtime starts
 * the module, in the thread that runs it.
 */
import type { ModuleDefinition } from '@planning/runtime';
import { issuesSettings, type IssuesSettings } from './config.js';
import { issuesModuleCore } from './definition-core.js';

export const issuesModule: ModuleDefinition<IssuesSettings> = { ...issuesModuleCore, settings: issuesSettings };
