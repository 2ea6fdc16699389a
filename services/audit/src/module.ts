import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import {
  openServiceStore,
  storeReadiness,
  type BusExports,
  type ModuleImplementation,
  type RpcClientsExports,
  type RpcServerExports,
} from '@planning/runtime';
import type { Consumer } from '@planning/bus';
import { recordAuditWriteLag } from '@planning/telemetry';
import { AuditService, createAuditService } from './rpc/audit-service.js';
import { AuditEventRepository } from './store/audit-events.js';
import { AuditWriter } from './store/audit-writer.js';

/** Every event on the bus is an audit event; the durable consumer resumes where it stopped. */
export const AUDIT_CONSUMER = 'audit';

/**
 * Deliveries the audit consumer takes at once. With the bus's default of 4 the consumer wrote at
 * most 4 records per commit and fell behind a busy request path (the in-process bus then keeps
 * every event it has not written, and audit lag grows). Records are independent (each carries its
 * event's time and id; a repeat is recognised by the id), so order does not matter: the
 * deliveries in hand are written as one batch (AuditWriter).
 */
const AUDIT_CONCURRENCY = 64;

/**
 * Events written in one audit batch at most; a full batch is written at once. The bus hands the
 * consumer at most AUDIT_CONCURRENCY deliveries before they are acknowledged, and each is
 * acknowledged once its batch is written, so a batch can never hold more: with that many in hand
 * no further event can come, and waiting out the gathering time would only hold the consumer up
 * (with batches of up to 256 it waited the full 20 ms for every 64 events, and under the
 * benchmark's stream of 100,000 writes its records fell 17 s behind on average).
 */
const AUDIT_BATCH = AUDIT_CONCURRENCY;

/**
 * How long a batch of audit records gathers events after its first before it is written (ms).
 * Every batch waits for a flush of the audit store's log to the disk, and flushes of different
 * files still share the disk: written per turn of the event loop, at about 200 requests/s the
 * audit store flushed 0.8 times a request, beside the issues and claims stores whose flushes the
 * requests wait for. Gathering for 20 ms cut that to 0.2 a request; in the HTTP benchmark's open
 * loop (quick runs, alternated, two each) the flushes' mean fell from 2.3 to 1.3 to 1.5 ms, and
 * the mixed run's p50 from 15 to 17 ms to 9 to 10 ms and its p99 from 147 to 192 ms to 67 to 83 ms.
 * An audit record is written at most this much later (planning.audit.write.lag); under load a batch
 * fills before that (AUDIT_BATCH).
 */
const AUDIT_GATHER_MS = 20;

export const auditImplementation: ModuleImplementation = {
  async init(ctx) {
    const { bus } = ctx.get<BusExports>('bus');
    const rpc = ctx.get<RpcServerExports>('rpc-server');
    const clients = ctx.get<RpcClientsExports>('rpc-clients');
    const store = await openServiceStore(ctx.config, 'audit', ctx.logger);
    const events = await AuditEventRepository.open(store);
    const clock = () => new Date();
    rpc.addService(
      AuditService,
      createAuditService({ events, workspaces: clients.client('issues', WorkspaceService), clock }),
    );
    const writer = new AuditWriter(events, AUDIT_BATCH, AUDIT_GATHER_MS);
    let consumer: Consumer | undefined;
    return {
      async start() {
        consumer = await bus.consume(
          { durable: AUDIT_CONSUMER, filterSubjects: ['planning.>'], ackWaitMs: 30_000, concurrency: AUDIT_CONCURRENCY },
          // The bus runs each delivery in its consumer span (producer context from the headers).
          async (delivery) => {
            await writer.record(delivery.event);
            recordAuditWriteLag((Date.now() - Date.parse(delivery.event.occurredAt)) / 1000);
          },
        );
      },
      async stop() {
        await consumer?.stop();
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
