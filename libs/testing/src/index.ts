export * from './binaries.js';
export * from './nats-server.js';
export * from './redis-server.js';
export { startMongoWireServer, type MongoWireServer, type MongoWireServerOptions } from './mongo-wire/server.js';
export { startOtlpReceiver, type OtlpReceiver, type ReceivedPoint, type ReceivedSpan, type ReceivedRequest, type Attributes, type AttributeValue } from './otlp/receiver.js';
export { parsePrometheusText, type PrometheusFamily, type PrometheusSample } from './prometheus.js';
