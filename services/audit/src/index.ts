export { auditModule, AUDIT_CONSUMER } from './module.js';
