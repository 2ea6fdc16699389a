import { createInProcessBus, type InProcessBusOptions } from './in-process/in-process-bus.js';
import type { NatsBusOptions } from './nats/nats-bus.js';
import type { EventBus } from './port.js';
import { withTelemetry, type BusLogger } from './traced.js';

export * from './port.js';
export { createInProcessBus, type InProcessBusOptions } from './in-process/in-process-bus.js';
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
      return withTelemetry(await createInProcessBus(options), logger);
    }
    case 'nats': {
      const { kind: _kind, logger, ...options } = config;
      const { createNatsBus } = await import('./nats/nats-bus.js');
      return withTelemetry(await createNatsBus(options), logger);
    }
  }
}
