import { createRemoteAccess } from '@planning/access';
import { IdempotencyKeys } from '@planning/idempotency';
import type { Consumer } from '@planning/bus';
import { createUsageMeter, meteredUsageProvider, registerUsageProvider } from '@planning/metering';
import { createOutbox } from '@planning/outbox';
import { ClaimSupportService } from '@planning/proto/planning/issues/v1/claim_support_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import {
  openServiceStore,
  storeReadiness,
  type BusExports,
  type ModuleImplementation,
  type RpcClientsExports,
  type RpcServerExports,
} from '@planning/runtime';
import { injectTraceHeaders, observeActiveClaims } from '@planning/telemetry';
import { ClaimsCore } from './claims-core.js';
import { IDEMPOTENCY_COLLECTION } from './core/context.js';
import type { AgentsClaimsSettings } from './config.js';
import { ClaimService, createClaimService } from './rpc/claim-service.js';
import { ClaimRepository } from './store/claims.js';
import { PolicyRepository } from './store/policies.js';
import { createSweeper } from './sweeper.js';

/** The durable consumer of task status moves (one per deployment: replicas share it). */
export const CLAIMS_CONSUMER = 'agents-claims';

/**
 * The agents-claims service: ready-work queue, claims and leases, fencing tokens, idempotency
 * records and agent-run metering, in its own store. It calls the issues service (tasks) over gRPC
 * and hears of status moves that end claims from the bus; issues never calls it.
 */
export const agentsClaimsImplementation: ModuleImplementation<AgentsClaimsSettings> = {
  async init(ctx) {
    const { bus } = ctx.get<BusExports>('bus');
    const rpc = ctx.get<RpcServerExports>('rpc-server');
    const clients = ctx.get<RpcClientsExports>('rpc-clients');
    const settings = ctx.settings;
    const store = await openServiceStore(ctx.config, 'agents-claims', ctx.logger);
    const outbox = await createOutbox({
      store,
      bus,
      source: 'agents-claims',
      logger: ctx.logger,
      traceHeaders: () => injectTraceHeaders(),
    });
    // Monthly usage of this service's quota kinds, reported to GET /api/billing/usage.
    const meter = await createUsageMeter(store);
    const access = createRemoteAccess(clients.client('issues', WorkspaceService));
    registerUsageProvider(rpc, meteredUsageProvider({ owner: 'agents-claims', kinds: ['agent-runs'], meter, access }));
    const claims = await ClaimRepository.open(store, outbox);
    const core = new ClaimsCore({
      claims,
      idempotency: await IdempotencyKeys.open(store, { collection: IDEMPOTENCY_COLLECTION }),
      policies: await PolicyRepository.open(store, settings.CLAIM_LEASE_SECONDS),
      meter,
      access,
      issues: clients.client('issues', ClaimSupportService),
      clock: () => new Date(),
      logger: ctx.logger,
      startTimeoutMs: settings.CLAIM_START_TIMEOUT_MS,
      idempotencyLeaseMs: settings.CLAIM_IDEMPOTENCY_LEASE_MS,
    });
    rpc.addService(ClaimService, createClaimService(core));
    const sweeper = createSweeper(core, {
      intervalMs: settings.CLAIM_SWEEP_INTERVAL_MS,
      reconcileIntervalMs: settings.CLAIM_RECONCILE_INTERVAL_MS,
      logger: ctx.logger,
    });
    let consumer: Consumer | undefined;
    let unobserve: (() => void) | undefined;
    return {
      async start() {
        await outbox.start();
        unobserve = observeActiveClaims(() => claims.countActive());
        consumer = await bus.consume(
          { durable: CLAIMS_CONSUMER, filterSubjects: ['planning.issues.task.status-changed'], ackWaitMs: 30_000 },
          // The bus runs each delivery in its consumer span (producer context from the headers).
          (delivery) => core.onTaskStatusChanged(delivery.event),
        );
        sweeper.start();
      },
      async stop() {
        unobserve?.();
        await sweeper.stop();
        await consumer?.stop();
        await core.settle();
        await outbox.stop();
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
