// Light on purpose: the module definition; the implementation is loaded when a runtime starts the
// module (definition.ts).
export { auditModule } from './definition.js';
