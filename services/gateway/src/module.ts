import { createOutbox } from '@planning/outbox';
import { AuditService } from '@planning/proto/planning/audit/v1/audit_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import {
  openServiceStore,
  storeReadiness,
  type BusExports,
  type HttpExports,
  type ModuleDefinition,
  type RpcClientsExports,
} from '@planning/runtime';
import { injectTraceHeaders } from '@planning/telemetry';
import { gatewayPlugin } from './app.js';
import { gatewaySettings } from './config.js';
import type { GatewayDeps, GatewaySettings } from './deps.js';
import { bootstrapAdmin } from './identity/bootstrap.js';
import { createStoreSessionStore } from './store/sessions.js';
import { UserRepository } from './store/users.js';

export interface GatewayExports {
  deps: GatewayDeps;
}

/** The gateway: identity, sessions, tokens and limits; the REST and MCP surfaces. */
export const gatewayModule: ModuleDefinition<GatewaySettings, GatewayExports> = {
  name: 'gateway',
  deps: ['bus', 'rpc-clients', 'http'],
  settings: gatewaySettings,
  async init(ctx) {
    const { bus } = ctx.get<BusExports>('bus');
    const { app } = ctx.get<HttpExports>('http');
    const clients = ctx.get<RpcClientsExports>('rpc-clients');
    const store = await openServiceStore(ctx.config, 'gateway');
    const outbox = await createOutbox({
      store,
      bus,
      source: 'gateway',
      logger: ctx.logger,
      traceHeaders: () => injectTraceHeaders(),
    });
    const users = await UserRepository.open(store);
    const deps: GatewayDeps = {
      settings: ctx.settings,
      users,
      sessions: await createStoreSessionStore(store),
      outbox,
      rpc: {
        workspaces: clients.client('issues', WorkspaceService),
        audit: clients.client('audit', AuditService),
      },
      clock: () => new Date(),
    };
    await gatewayPlugin(app, deps);
    return {
      exports: { deps },
      async start() {
        await outbox.start();
        await bootstrapAdmin(users, {
          email: ctx.settings.SERVICE_ADMIN_EMAIL,
          password: ctx.settings.SERVICE_ADMIN_PASSWORD,
          logger: ctx.logger,
        });
      },
      async stop() {
        await outbox.stop();
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
