/**
 * Telemetry for any bus adapter: a PRODUCER span around each publish, whose context travels in
 * the message headers (replacing the context the outbox stored with the event, which becomes the
 * producer span's parent), and a CONSUMER span around each handler run, parented by and linked
 * to the producer span. Also the publish lag (event recorded to bus accepted), the consume lag
 * (bus accepted to handler start) and the handler's duration.
 */
import { recordBusProcess, recordBusPublish, withConsumerSpan, withProducerSpan } from '@planning/telemetry';
import type { DeliveryHandler, EventBus } from './port.js';

/** When the bus accepted the message (milliseconds since the epoch), for the consume lag. */
export const PUBLISHED_AT_HEADER = 'planning-published-at';

/** Where the wrapper reports handled and failed deliveries (a pino logger fits). */
export interface BusLogger {
  debug(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export function withTelemetry<B extends EventBus>(bus: B, logger?: BusLogger): B {
  // The adapter stays the prototype: its own properties (a NATS connection, ...) remain readable.
  const traced = Object.create(bus) as B;
  const system = bus.kind;
  traced.publish = (event, headers) =>
    withProducerSpan({ system, subject: event.subject, messageId: event.id }, headers, async (out) => {
      out[PUBLISHED_AT_HEADER] = String(Date.now());
      const result = await bus.publish(event, out);
      const recordedAt = Date.parse(event.occurredAt);
      if (!result.duplicate && Number.isFinite(recordedAt)) {
        recordBusPublish({ system, subject: event.subject, lagSeconds: (Date.now() - recordedAt) / 1000 });
      }
      return result;
    });
  traced.consume = (options, handler) => {
    const observed: DeliveryHandler = async (delivery) => {
      const publishedAt = Number(delivery.headers[PUBLISHED_AT_HEADER]);
      const lagSeconds = Number.isFinite(publishedAt) && publishedAt > 0 ? (Date.now() - publishedAt) / 1000 : undefined;
      const started = performance.now();
      let errorType: string | undefined;
      try {
        await withConsumerSpan(
          { system, subject: delivery.event.subject, messageId: delivery.event.id, consumerGroup: options.durable, deliveryCount: delivery.deliveryCount },
          delivery.headers,
          async () => {
            try {
              await handler(delivery);
            } catch (err) {
              errorType = err instanceof Error ? err.constructor.name : 'Error';
              // In the consumer span's context: the line carries its trace and span ids.
              logger?.warn(
                { err, subject: delivery.event.subject, eventId: delivery.event.id, consumer: options.durable, deliveryCount: delivery.deliveryCount },
                'event handler failed; the bus delivers it again',
              );
              throw err;
            }
            logger?.debug({ subject: delivery.event.subject, eventId: delivery.event.id, consumer: options.durable }, 'event handled');
          },
        );
      } catch (err) {
        errorType ??= err instanceof Error ? err.constructor.name : 'Error';
        throw err;
      } finally {
        recordBusProcess({
          system,
          subject: delivery.event.subject,
          group: options.durable,
          lagSeconds,
          seconds: (performance.now() - started) / 1000,
          ...(errorType ? { errorType } : {}),
        });
      }
    };
    return bus.consume(options, observed);
  };
  return traced;
}
