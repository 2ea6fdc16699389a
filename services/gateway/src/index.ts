export { gatewayModule, type GatewayExports } from './module.js';
export { buildApp, gatewayPlugin } from './app.js';
export type { GatewayDeps, GatewaySettings } from './deps.js';
