import type { EnvValues } from '@planning/config';
import type { Outbox } from '@planning/outbox';
import type { AuditService } from '@planning/proto/planning/audit/v1/audit_pb';
import type { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { RpcClient } from '@planning/rpc';
import type { gatewaySettings } from './config.js';
import type { SessionStore } from './store/sessions.js';
import type { UserRepository } from './store/users.js';

export type GatewaySettings = EnvValues<typeof gatewaySettings>;

/** Everything the gateway's routes need; `buildApp(deps)` takes it, tests build it by hand. */
export interface GatewayDeps {
  settings: GatewaySettings;
  users: UserRepository;
  sessions: SessionStore;
  /** The gateway's own events (authentication and token decisions) go through its outbox. */
  outbox: Outbox;
  rpc: {
    workspaces: RpcClient<typeof WorkspaceService>;
    audit: RpcClient<typeof AuditService>;
  };
  clock: () => Date;
}
