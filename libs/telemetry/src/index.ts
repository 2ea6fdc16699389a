export {
  startTelemetry,
  activeTelemetry,
  resolveTraceExportSettings,
  resolveMetricExportSettings,
  type Telemetry,
  type TelemetryOptions,
  type TraceExporterName,
  type MetricExporterName,
  type TraceExportSettings,
  type MetricExportSettings,
  type OtlpProtocol,
} from './telemetry.js';
export { resolveDeploymentEnvironment } from './settings.js';
export { startMetricsServer, type MetricsServer } from './metrics-server.js';
export { createLogger, REDACT_PATHS, type Logger, type LoggerOptions } from './logger.js';
export {
  injectTraceHeaders,
  withConsumerSpan,
  withExtractedContext,
  withProducerSpan,
  type MessageInfo,
  type TraceCarrier,
} from './propagation.js';
export { traceIfWorked, isTentative } from './tentative.js';
export { mcpOutcomeOf, mcpRequestInfo, withMcpSpan, type McpOutcome, type McpRequestInfo } from './mcp.js';
export * from './instruments.js';
