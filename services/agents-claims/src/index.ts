// Light on purpose: the module definition (name, dependencies, settings); the implementation is
// loaded when a runtime starts the module (definition.ts).
export { agentsClaimsModule } from './definition.js';
