export {
  startTelemetry,
  resolveTraceExportSettings,
  type Telemetry,
  type TelemetryOptions,
  type TraceExporterName,
  type TraceExportSettings,
} from './telemetry.js';
export { createLogger, REDACT_PATHS, type Logger, type LoggerOptions } from './logger.js';
export { injectTraceHeaders, withConsumerSpan, withExtractedContext, type TraceCarrier } from './propagation.js';
