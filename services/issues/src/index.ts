// Light on purpose: the module definitions (name, dependencies, settings). The implementation is
// loaded by the definition when a runtime starts the module (definition.ts).
export { issuesModule } from './definition.js';
export type { IssuesSettings } from './config.js';
export { demoModule, type DemoSettings } from './demo/module.js';
