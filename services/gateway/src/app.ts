import cookie from '@fastify/cookie';
import type { HttpAppOptions } from '@planning/runtime';
import { createHttpApp } from '@planning/runtime/http';
import type { FastifyInstance } from 'fastify';
import { registerAuthentication } from './auth.js';
import type { GatewayDeps } from './deps.js';
import { createTokenResolver } from './identity/token-resolver.js';
import { registerOpenApi } from './openapi.js';
import { adminRoutes } from './routes/admin.js';
import { agentRoutes } from './routes/agents.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { authRoutes } from './routes/auth.js';
import { billingRoutes } from './routes/billing.js';
import { exportRoutes } from './routes/exports.js';
import { importRoutes } from './routes/imports.js';
import { mcpRoutes } from './mcp/route.js';
import { oauthRoutes } from './oauth/setup.js';
import { guidanceRoutes } from './routes/guidance.js';
import { initiativeRoutes } from './routes/initiatives.js';
import { issueRecordRoutes } from './routes/issue-records.js';
import { issueRoutes } from './routes/issues.js';
import { memberRoutes } from './routes/members.js';
import { milestoneRoutes } from './routes/milestones.js';
import { programRoutes } from './routes/programs.js';
import { projectRoutes } from './routes/projects.js';
import { taskContractRoutes } from './routes/task-contract.js';
import { userRoutes } from './routes/users.js';
import { workspaceRoutes } from './routes/workspaces.js';

/**
 * The gateway's routes as one fastify plugin. The process's HTTP module registers it on the
 * shared server; tests use `buildApp` and `app.inject()`.
 */
export async function gatewayPlugin(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  // First: the OpenAPI document collects (and documents) every route registered after it.
  await registerOpenApi(app);
  await app.register(cookie);
  registerAuthentication(app, deps, { resolveToken: createTokenResolver(deps, deps.oauth.verify) });
  app.addHook('onSend', (request, reply, payload, done) => {
    // RFC 9110: a 401 carries a challenge. Routes with their own (MCP) set it first.
    if (reply.statusCode === 401 && !reply.hasHeader('www-authenticate')) {
      const presented = request.headers.authorization !== undefined || request.headers['x-api-key'] !== undefined;
      void reply.header('www-authenticate', `Bearer realm="planning-service"${presented ? ', error="invalid_token"' : ''}`);
    }
    done(null, payload);
  });
  await authRoutes(app, deps);
  await userRoutes(app, deps);
  await workspaceRoutes(app, deps);
  await memberRoutes(app, deps);
  await apiKeyRoutes(app, deps);
  await billingRoutes(app, deps);
  await projectRoutes(app, deps);
  await milestoneRoutes(app, deps);
  await programRoutes(app, deps);
  await initiativeRoutes(app, deps);
  await exportRoutes(app, deps);
  await importRoutes(app, deps);
  await issueRoutes(app, deps);
  await issueRecordRoutes(app, deps);
  await taskContractRoutes(app, deps);
  await agentRoutes(app, deps);
  await adminRoutes(app, deps);
  await guidanceRoutes(app, deps);
  await mcpRoutes(app, deps);
  await oauthRoutes(app, deps);
}

/** A complete gateway app without `listen()`. */
export async function buildApp(deps: GatewayDeps, options: HttpAppOptions = {}): Promise<FastifyInstance> {
  const app = createHttpApp(options);
  await gatewayPlugin(app, deps);
  await app.ready();
  return app;
}
