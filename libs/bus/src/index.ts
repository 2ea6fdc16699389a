import { createInProcessBus, type DroppedMessage, type InProcessBusOptions } from './in-process/in-process-bus.js';
import type { NatsBusOptions } from './nats/nats-bus.js';
import type { EventBus } from './port.js';
import { recordBusDropped } from '@planning/telemetry';
import { withTelemetry, type BusLogger } from './traced.js';

export * from './port.js';
export { createInProcessBus, type DroppedMessage, type InProcessBusOptions } from './in-process/in-process-bus.js';
// The NATS client loads only when a NATS bus is built (`@planning/bus/nats` for direct use).
export type { NatsBusOptions, NatsEventBus } from './nats/nats-bus.js';
export { withTelemetry, PUBLISHED_AT_HEADER, type BusLogger } from './traced.js';

/** Which bus to build: the embedded one (one process only) or NATS JetStream. */
export type BusConfig = (({ kind: 'in-process' } & InProcessBusOptions) | ({ kind: 'nats' } & NatsBusOptions)) & {
  /** Receives a debug line per handled event and a warning per failed one (see traced.ts). */
  logger?: BusLogger;
};

/** Builds the bus a service's configuration asks for, with producer/consumer spans and lag metrics. */
export async function createBus(config: BusConfig): Promise<EventBus> {
  switch (config.kind) {
    case 'in-process': {
      const { kind: _kind, logger, ...options } = config;
      return withTelemetry(await createInProcessBus({ onDrop: reportDrops(logger), ...options }), logger);
    }
    case 'nats': {
      const { kind: _kind, logger, ...options } = config;
      const { createNatsBus } = await import('./nats/nats-bus.js');
      return withTelemetry(await createNatsBus(options), logger);
    }
  }
}

/** How often at most a bus that keeps dropping undelivered events says so in the log. */
const DROP_WARNING_INTERVAL_MS = 60_000;

/**
 * Counts every event the in-process bus's caps drop before a consumer had it
 * (`planning.bus.dropped`), and warns: at the first drop, then at most once a minute with the
 * count since the last warning. Such a drop means a consumer (the audit trail, claims) misses an
 * event: the process publishes faster than its consumers keep up, for longer than the caps allow.
 */
function reportDrops(logger: BusLogger | undefined): (dropped: DroppedMessage) => void {
  let lastWarning = Number.NEGATIVE_INFINITY;
  let unreported = 0;
  return (dropped) => {
    recordBusDropped({ system: 'in-process', subject: dropped.subject, reason: dropped.reason });
    unreported++;
    const now = Date.now();
    if (now - lastWarning < DROP_WARNING_INTERVAL_MS) return;
    logger?.warn(
      { dropped: unreported, reason: dropped.reason, subject: dropped.subject, consumers: dropped.durables },
      'in-process bus dropped events its consumers had not handled (retention cap reached): they will not see them',
    );
    lastWarning = now;
    unreported = 0;
  };
}
