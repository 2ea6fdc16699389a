/**
 * The imports-exports module as the entry point sees it: name, dependencies and settings. Its
 * implementation (module.ts: import and export cores, stores, RPC services) is loaded when a
 * runtime starts the module, in the thread that runs it.
 */
import type { ModuleDefinition } from '@planning/runtime';
import { importsExportsSettings, type ImportsExportsSettings } from './config.js';
import { importsExportsModuleCore } from './definition-core.js';

export const importsExportsModule: ModuleDefinition<ImportsExportsSettings> = { ...importsExportsModuleCore, settings: importsExportsSettings };
