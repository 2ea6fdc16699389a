/**
 * The agents-claims module as the entry point sees it: name, dependencies and settings. Its
 * implementation (module.ts: claims core, stores, sweeper, RPC service) is loaded when a runtime
 * starts the module, in the thread that runs it.
 */
import type { ModuleDefinition } from '@planning/runtime';
import { agentsClaimsSettings, type AgentsClaimsSettings } from './config.js';
import { agentsClaimsModuleCore } from './definition-core.js';

export const agentsClaimsModule: ModuleDefinition<AgentsClaimsSettings> = { ...agentsClaimsModuleCore, settings: agentsClaimsSettings };
