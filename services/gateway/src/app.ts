import cookie from '@fastify/cookie';
import { createHttpApp, type HttpAppOptions } from '@planning/runtime';
import type { FastifyInstance } from 'fastify';
import { registerAuthentication } from './auth.js';
import type { GatewayDeps } from './deps.js';
import { adminRoutes } from './routes/admin.js';
import { authRoutes } from './routes/auth.js';
import { workspaceRoutes } from './routes/workspaces.js';

/**
 * The gateway's routes as one fastify plugin. The process's HTTP module registers it on the
 * shared server; tests use `buildApp` and `app.inject()`.
 */
export async function gatewayPlugin(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  await app.register(cookie);
  registerAuthentication(app, deps);
  await authRoutes(app, deps);
  await workspaceRoutes(app, deps);
  await adminRoutes(app, deps);
}

/** A complete gateway app without `listen()`. */
export async function buildApp(deps: GatewayDeps, options: HttpAppOptions = {}): Promise<FastifyInstance> {
  const app = createHttpApp(options);
  await gatewayPlugin(app, deps);
  await app.ready();
  return app;
}
