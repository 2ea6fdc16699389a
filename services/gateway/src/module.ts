import { createLeasedMeter, createUsageMeter } from '@planning/metering';
import { createOutbox } from '@planning/outbox';
import { AuditService } from '@planning/proto/planning/audit/v1/audit_pb';
import { ClaimService } from '@planning/proto/planning/claims/v1/claims_pb';
import { ExportService } from '@planning/proto/planning/exports/v1/exports_pb';
import { AgentService } from '@planning/proto/planning/issues/v1/agents_pb';
import { ImportService } from '@planning/proto/planning/imports/v1/imports_pb';
import { GuidanceService } from '@planning/proto/planning/issues/v1/guidance_pb';
import { ProgramService } from '@planning/proto/planning/issues/v1/programs_pb';
import { ProjectService } from '@planning/proto/planning/issues/v1/projects_pb';
import { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import { TaskService } from '@planning/proto/planning/issues/v1/tasks_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { UsageService } from '@planning/proto/planning/usage/v1/usage_pb';
import {
  createInProcessLimiter,
  createResilientLimiter,
  type RateLimiter,
  type ResilientLimiter,
} from '@planning/rate-limit';
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
import { createDenialAuditor } from './audit/denials.js';
import { gatewaySettings } from './config.js';
import type { GatewayDeps, GatewaySettings } from './deps.js';
import { bootstrapAdmin } from './identity/bootstrap.js';
import { createLoginThrottle } from './identity/login-throttle.js';
import { createCognitoProvider, createLocalProvider, type IdentityProvider } from './identity/providers.js';
import { ApiKeyRepository } from './store/api-keys.js';
import type { RedisSessionStore } from './store/redis-sessions.js';
import { createStoreSessionStore, type SessionStore } from './store/sessions.js';
import { UserRepository } from './store/users.js';
import { GrantRepository } from './oauth/grants.js';
import { startOAuth } from './oauth/setup.js';
import { siteOf } from './oauth/site.js';
import { createWorkspaceAccessCache } from './workspace-access.js';

export interface GatewayExports {
  deps: GatewayDeps;
}

/** The gateway: identity, sessions, tokens and limits; the REST and MCP surfaces. */
export const gatewayModule: ModuleDefinition<GatewaySettings, GatewayExports> = {
  name: 'gateway',
  deps: ['bus', 'rpc-clients', 'http'],
  settings: gatewaySettings,
  validate(settings) {
    const problems = [];
    if (Boolean(settings.COGNITO_USER_POOL_ID) !== Boolean(settings.COGNITO_CLIENT_ID)) {
      problems.push({
        variable: settings.COGNITO_USER_POOL_ID ? 'COGNITO_CLIENT_ID' : 'COGNITO_USER_POOL_ID',
        message: 'COGNITO_USER_POOL_ID and COGNITO_CLIENT_ID go together (both set: sign-in through Cognito)',
      });
    }
    if (!settings.OAUTH_ISSUER) {
      for (const variable of ['OAUTH_JWKS_URL', 'OAUTH_SCOPE_PREFIX'] as const) {
        if (settings[variable]) problems.push({ variable, message: 'applies to an external issuer: set OAUTH_ISSUER too' });
      }
      if (settings.OAUTH_AUDIENCE.length > 0) problems.push({ variable: 'OAUTH_AUDIENCE', message: 'applies to an external issuer: set OAUTH_ISSUER too' });
    }
    if (settings.PUBLIC_URL && new URL(settings.PUBLIC_URL).pathname.replace(/\/+$/, '') !== '') {
      problems.push({ variable: 'PUBLIC_URL', message: 'must be an origin (scheme, host, port) without a path' });
    }
    return problems;
  },
  async init(ctx) {
    const { bus } = ctx.get<BusExports>('bus');
    const { app } = ctx.get<HttpExports>('http');
    const clients = ctx.get<RpcClientsExports>('rpc-clients');
    const settings = ctx.settings;
    const store = await openServiceStore(ctx.config, 'gateway', ctx.logger);
    const outbox = await createOutbox({
      store,
      bus,
      source: 'gateway',
      logger: ctx.logger,
      traceHeaders: () => injectTraceHeaders(),
    });
    const users = await UserRepository.open(store);

    // With Redis: buckets and sessions shared by every replica; a Redis outage degrades the
    // limiter to per-replica buckets (readiness details say so) and never fails readiness.
    const redisUrl = ctx.config.REDIS_URL;
    let resilient: ResilientLimiter | undefined;
    let limiter: RateLimiter;
    let redisSessions: RedisSessionStore | undefined;
    let sessions: SessionStore;
    if (redisUrl) {
      // The Redis client loads only when Redis is configured.
      const [{ createRedisLimiter }, { createRedisSessionStore }] = await Promise.all([
        import('@planning/rate-limit/redis'),
        import('./store/redis-sessions.js'),
      ]);
      resilient = createResilientLimiter({
        primary: createRedisLimiter({ url: redisUrl }),
        fallback: createInProcessLimiter(),
        logger: ctx.logger,
      });
      limiter = resilient;
      redisSessions = createRedisSessionStore({ url: redisUrl });
      sessions = redisSessions;
    } else {
      limiter = createInProcessLimiter();
      sessions = await createStoreSessionStore(store);
    }

    const identity: IdentityProvider =
      settings.COGNITO_USER_POOL_ID && settings.COGNITO_CLIENT_ID
        ? createCognitoProvider(users, {
            userPoolId: settings.COGNITO_USER_POOL_ID,
            clientId: settings.COGNITO_CLIENT_ID,
            ...(settings.COGNITO_CLIENT_SECRET ? { clientSecret: settings.COGNITO_CLIENT_SECRET } : {}),
            ...(settings.COGNITO_REGION ? { region: settings.COGNITO_REGION } : {}),
            ...(settings.COGNITO_ENDPOINT ? { endpoint: settings.COGNITO_ENDPOINT } : {}),
          })
        : createLocalProvider(users);
    ctx.logger.info({ mode: identity.mode, sessions: sessions.kind, limiter: limiter.kind }, 'gateway identity ready');

    const workspaces = clients.client('issues', WorkspaceService);
    const site = siteOf(settings.PUBLIC_URL, { host: ctx.config.HOST, port: ctx.config.PORT });
    const audit = createDenialAuditor({
      outbox,
      logger: ctx.logger,
      perSourcePerMinute: settings.AUDIT_DENIALS_PER_SOURCE_PER_MINUTE,
      perMinute: settings.AUDIT_DENIALS_PER_MINUTE,
    });
    // Every API request is metered: leases keep that to one counter write per many requests under load.
    const meter = createLeasedMeter(await createUsageMeter(store));
    const deps: GatewayDeps = {
      settings,
      users,
      sessions,
      apiKeys: await ApiKeyRepository.open(store, { ttlMs: settings.API_KEY_CACHE_MS }),
      identity,
      loginThrottle: createLoginThrottle({
        limiter,
        maxFailuresPerEmail: settings.LOGIN_MAX_FAILURES_PER_EMAIL,
        maxFailuresPerAddress: settings.LOGIN_MAX_FAILURES_PER_ADDRESS,
        windowSeconds: settings.LOGIN_THROTTLE_WINDOW_SECONDS,
      }),
      limiter,
      meter,
      audit,
      workspaceAccess: createWorkspaceAccessCache(workspaces, { ttlMs: settings.WORKSPACE_CACHE_MS }),
      outbox,
      rpc: {
        workspaces,
        audit: clients.client('audit', AuditService),
        agents: clients.client('issues', AgentService),
        projects: clients.client('issues', ProjectService),
        programs: clients.client('issues', ProgramService),
        tasks: clients.client('issues', TaskService),
        taskRecords: clients.client('issues', TaskRecordService),
        guidance: clients.client('issues', GuidanceService),
        claims: clients.client('agents-claims', ClaimService),
        exports: clients.client('imports-exports', ExportService),
        imports: clients.client('imports-exports', ImportService),
        usage: {
          issues: clients.client('issues', UsageService),
          agentsClaims: clients.client('agents-claims', UsageService),
          importsExports: clients.client('imports-exports', UsageService),
        },
      },
      oauth: { resource: { site, authorizationServers: [] }, grants: await GrantRepository.open(store) },
      clock: () => new Date(),
    };
    const oauth = await startOAuth(deps, {
      site,
      store,
      ...(redisUrl ? { redisUrl } : {}),
      internalSecret: ctx.config.internalSecret,
      trustProxy: ctx.config.trustProxy !== false,
      logger: app.log,
    });
    deps.oauth = oauth;
    ctx.logger.info({ oauth: await oauth.status(), publicUrl: site.publicUrl }, 'gateway MCP sign-in ready');
    await gatewayPlugin(app, deps);
    return {
      exports: { deps },
      async start() {
        await outbox.start();
        await bootstrapAdmin(users, {
          email: settings.SERVICE_ADMIN_EMAIL,
          password: settings.SERVICE_ADMIN_PASSWORD,
          logger: ctx.logger,
        });
      },
      async stop() {
        await audit.stop();
        await outbox.stop();
        await meter.close().catch((err: unknown) => ctx.logger.warn({ err }, 'could not give back unused metering leases'));
        await limiter.close().catch(() => undefined);
        await redisSessions?.close().catch(() => undefined);
        await oauth.close().catch(() => undefined);
        await store.close();
      },
      async ready() {
        const report = await storeReadiness(store);
        // Redis problems are reported, never fatal: the limiter falls back per replica.
        await limiter.ping().catch(() => undefined);
        const details: Record<string, unknown> = {
          ...report.details,
          identity: identity.mode,
          rateLimiter: resilient ? { kind: 'redis', ...resilient.status() } : { kind: limiter.kind, mode: 'per-replica' },
        };
        details.oauth = await oauth.status();
        if (redisSessions) {
          details.sessions = await redisSessions.ping().then(
            () => ({ kind: 'redis', reachable: true }),
            () => ({ kind: 'redis', reachable: false }),
          );
        } else {
          details.sessions = { kind: sessions.kind };
        }
        return { ok: report.ok, details };
      },
    };
  },
};
