/**
 * The OTLP exporters (traces and metrics; gRPC, HTTP/protobuf and HTTP/JSON). telemetry.ts loads
 * this module with `import()` only when the environment configures an OTLP exporter
 * (lazy-exporter.ts stands in until it has loaded): they and the OTLP encoding they share are
 * about 1 MB of heap in each thread, which a process exporting nothing over OTLP (the default)
 * does not hold.
 */
import { OTLPMetricExporter as OTLPMetricExporterGrpc } from '@opentelemetry/exporter-metrics-otlp-grpc';
import { OTLPMetricExporter as OTLPMetricExporterJson } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as OTLPMetricExporterProto } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as OTLPTraceExporterGrpc } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as OTLPTraceExporterJson } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OTLPTraceExporterProto } from '@opentelemetry/exporter-trace-otlp-proto';
import type { PushMetricExporter } from '@opentelemetry/sdk-metrics';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { OtlpTarget } from './settings.js';

export function traceExporter(target: OtlpTarget): SpanExporter {
  const config = target.url ? { url: target.url } : {};
  if (target.protocol === 'grpc') return new OTLPTraceExporterGrpc(config);
  if (target.protocol === 'http/json') return new OTLPTraceExporterJson(config);
  return new OTLPTraceExporterProto(config);
}

export function metricExporter(target: OtlpTarget): PushMetricExporter {
  const config = target.url ? { url: target.url } : {};
  if (target.protocol === 'grpc') return new OTLPMetricExporterGrpc(config);
  if (target.protocol === 'http/json') return new OTLPMetricExporterJson(config);
  return new OTLPMetricExporterProto(config);
}
