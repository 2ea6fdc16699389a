export { agentsClaimsModule } from './module.js';
