/**
 * `@planning/runtime/config`: reading the environment (the process's variables and each module's
 * settings). Apart from `@planning/runtime` because it loads zod, which a thread that is handed
 * its configuration (the services' worker) does without.
 */
export { describeProcessConfig, loadProcessConfig, processEnvShape, type ProcessConfigResult } from './process-env.js';
export { loadModuleSettings } from './module-settings.js';
