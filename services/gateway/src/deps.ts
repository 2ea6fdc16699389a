import type { EnvValues } from '@planning/config';
import type { UsageMeter } from '@planning/metering';
import type { Outbox } from '@planning/outbox';
import type { AuditService } from '@planning/proto/planning/audit/v1/audit_pb';
import type { ClaimService } from '@planning/proto/planning/claims/v1/claims_pb';
import type { ExportService } from '@planning/proto/planning/exports/v1/exports_pb';
import type { AgentService } from '@planning/proto/planning/issues/v1/agents_pb';
import type { ImportService } from '@planning/proto/planning/imports/v1/imports_pb';
import type { GuidanceService } from '@planning/proto/planning/issues/v1/guidance_pb';
import type { ProgramService } from '@planning/proto/planning/issues/v1/programs_pb';
import type { ProjectService } from '@planning/proto/planning/issues/v1/projects_pb';
import type { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import type { TaskService } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { UsageService } from '@planning/proto/planning/usage/v1/usage_pb';
import type { RateLimiter } from '@planning/rate-limit';
import type { RpcClient } from '@planning/rpc';
import type { DenialAuditor } from './audit/denials.js';
import type { gatewaySettings } from './config.js';
import type { LoginThrottle } from './identity/login-throttle.js';
import type { IdentityProvider } from './identity/providers.js';
import type { ApiKeyRepository } from './store/api-keys.js';
import type { SessionStore } from './store/sessions.js';
import type { UserRepository } from './store/users.js';
import type { AuthorizationServer } from './oauth/authorization-server.js';
import type { OAuthVerifier } from './oauth/credentials.js';
import type { GrantRepository } from './oauth/grants.js';
import type { ProtectedResource } from './oauth/resource-metadata.js';
import type { WorkspaceAccessCache } from './workspace-access.js';

export type GatewaySettings = EnvValues<typeof gatewaySettings>;

/** Everything the gateway's routes need; `buildApp(deps)` takes it, tests build it by hand. */
export interface GatewayDeps {
  settings: GatewaySettings;
  users: UserRepository;
  sessions: SessionStore;
  /** API keys (only token hashes are stored). */
  apiKeys: ApiKeyRepository;
  /** Who a sign-in is: `local` or `cognito`. */
  identity: IdentityProvider;
  loginThrottle: LoginThrottle;
  /** Per-key token buckets: Redis (shared by replicas, per-replica fallback) or in-process. */
  limiter: RateLimiter;
  /** Monthly API request counts per workspace. */
  meter: UsageMeter;
  /** Bounded audit of denials (401/403 and throttled sign-ins). */
  audit: DenialAuditor;
  /** Plan and status of a token's workspace, briefly cached. */
  workspaceAccess: WorkspaceAccessCache;
  /** The gateway's own events (authentication and token decisions) go through its outbox. */
  outbox: Outbox;
  rpc: {
    workspaces: RpcClient<typeof WorkspaceService>;
    audit: RpcClient<typeof AuditService>;
    agents: RpcClient<typeof AgentService>;
    /** Planning records of the issues service: projects and milestones, programs and initiatives, tasks and what accumulates on them. */
    projects: RpcClient<typeof ProjectService>;
    programs: RpcClient<typeof ProgramService>;
    tasks: RpcClient<typeof TaskService>;
    taskRecords: RpcClient<typeof TaskRecordService>;
    /** Customization, working standards, knowledge documents, context packs and launch readiness. */
    guidance: RpcClient<typeof GuidanceService>;
    /** The agents-claims service: ready work, claims, leases, status posts, release, lease policy. */
    claims: RpcClient<typeof ClaimService>;
    /** The imports-exports service: issue exports and their history. */
    exports: RpcClient<typeof ExportService>;
    /** The imports-exports service: JSON issue imports (previews and commits). */
    imports: RpcClient<typeof ImportService>;
    /** Each service answers for its own quota kinds. */
    usage: {
      issues: RpcClient<typeof UsageService>;
      agentsClaims: RpcClient<typeof UsageService>;
      importsExports: RpcClient<typeof UsageService>;
    };
  };
  /** MCP sign-in: where the service is reached, the grants, and whose tokens the MCP endpoint takes. */
  oauth: {
    /** The MCP endpoint as a protected resource: its site and the issuers it trusts. */
    resource: ProtectedResource;
    grants: GrantRepository;
    /** The built-in authorization server; absent when an external issuer is configured or OAuth is off. */
    server?: AuthorizationServer;
    /** Verifies access tokens of the trusted issuer; absent when OAuth is off (API keys only). */
    verify?: OAuthVerifier;
  };
  clock: () => Date;
}
