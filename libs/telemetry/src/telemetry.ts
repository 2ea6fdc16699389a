import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import { context, diag, DiagConsoleLogger, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, diagLogLevelFromString, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { defaultResource, detectResources, envDetector, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricProducer,
  type MetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
  type SpanLimits,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
} from '@opentelemetry/semantic-conventions';
import product from '../../../package.json' with { type: 'json' };
import { LazyExporter } from './lazy-exporter.js';
import { PullMetricReader, WorkerMetricsProducer, inWorkerThread, mergeScopeMetrics, serveWorkerMetrics } from './metrics-bridge.js';
import {
  resolveDeploymentEnvironment,
  resolveMetricExportSettings,
  resolveTraceExportSettings,
  type MetricExporterName,
  type OtlpTarget,
  type TraceExporterName,
} from './settings.js';
import { TentativeSpanProcessor, tentativeAwarePropagator } from './tentative.js';

export interface TelemetryOptions {
  serviceName: string;
  /** `service.version`; defaults to the root package.json version. */
  serviceVersion?: string;
  /** Where the `OTEL_*` variables are read from; defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /**
   * Extra span processors, added to the exporters from the environment (tests register an
   * in-memory exporter this way). Any processor makes the SDK record spans.
   */
  spanProcessors?: SpanProcessor[];
}

export interface Telemetry {
  /** True when spans are recorded and exported somewhere; false in the quiet default. */
  readonly enabled: boolean;
  /** The trace exporters configured from the environment. */
  readonly exporters: readonly TraceExporterName[];
  /** The metric exporters configured from the environment (`prometheus` unless turned off). */
  readonly metricExporters: readonly MetricExporterName[];
  /** The resource every span and metric carries. */
  readonly resource: Resource;
  /**
   * Answers `GET /metrics` in the Prometheus text format (this thread's metrics and every worker
   * thread's); undefined when the Prometheus exporter is off or in a worker thread.
   */
  readonly metricsHandler: ((request: IncomingMessage, response: ServerResponse) => void) | undefined;
  /** Flushes pending spans and metrics (bounded wait) and unregisters the global providers. Idempotent. */
  shutdown(): Promise<void>;
}

export {
  resolveTraceExportSettings,
  resolveMetricExportSettings,
  type TraceExporterName,
  type MetricExporterName,
} from './settings.js';
export type { TraceExportSettings, MetricExportSettings, OtlpProtocol } from './settings.js';

const SHUTDOWN_TIMEOUT_MS = 5_000;

// The OTLP exporters load only when configured (otlp-exporters.ts); until then a stand-in takes the calls.
const otlpExporters = () => import('./otlp-exporters.js');

function traceExporter(target: OtlpTarget): SpanExporter {
  return new LazyExporter(async () => (await otlpExporters()).traceExporter(target));
}

function metricExporter(target: OtlpTarget): PushMetricExporter {
  return new LazyExporter(async () => (await otlpExporters()).metricExporter(target));
}

/**
 * The resource of every span and metric: service name, version and deployment environment,
 * a per-process instance id, the host name, and `OTEL_RESOURCE_ATTRIBUTES`.
 */
function buildResource(serviceName: string, serviceVersion: string, env: NodeJS.ProcessEnv): Resource {
  const environment = resolveDeploymentEnvironment(env);
  return defaultResource()
    .merge(
      resourceFromAttributes({
        [ATTR_SERVICE_VERSION]: serviceVersion,
        'service.instance.id': randomUUID(),
        'host.name': hostname(),
        // The current key and the one most backends still group by.
        'deployment.environment.name': environment,
        'deployment.environment': environment,
      }),
    )
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }));
}

/**
 * `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, as the SDK reads them (unset or unknown:
 * the default, parent-based always-on).
 */
function samplerFromEnv(env: NodeJS.ProcessEnv): Sampler | undefined {
  const name = env.OTEL_TRACES_SAMPLER?.trim();
  if (!name) return undefined;
  const ratio = (): number => {
    const value = numberFromEnv(env, 'OTEL_TRACES_SAMPLER_ARG');
    if (value === undefined || value < 0 || value > 1) {
      diag.error(`OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1; using 1`);
      return 1;
    }
    return value;
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      diag.error(`unknown OTEL_TRACES_SAMPLER value "${name}", using the default`);
      return undefined;
  }
}

/** The span limits of the `OTEL_SPAN_*` and `OTEL_ATTRIBUTE_*` variables, as the SDK reads them. */
function spanLimitsFromEnv(env: NodeJS.ProcessEnv): SpanLimits {
  const n = (name: string) => numberFromEnv(env, name);
  return {
    attributeCountLimit: n('OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT') ?? n('OTEL_ATTRIBUTE_COUNT_LIMIT'),
    attributeValueLengthLimit: n('OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT') ?? n('OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT'),
    eventCountLimit: n('OTEL_SPAN_EVENT_COUNT_LIMIT'),
    linkCountLimit: n('OTEL_SPAN_LINK_COUNT_LIMIT'),
    attributePerEventCountLimit: n('OTEL_SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT'),
    attributePerLinkCountLimit: n('OTEL_SPAN_ATTRIBUTE_PER_LINK_COUNT_LIMIT'),
  };
}

function numberFromEnv(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  const value = Number(raw);
  return Number.isFinite(value) ? value : undefined;
}

let active: Telemetry | undefined;

/**
 * Starts OpenTelemetry for this thread. Always installs the W3C trace-context + baggage
 * propagator and the AsyncLocalStorage context manager, so trace context flows through gRPC
 * metadata and bus headers even when nothing is exported. No auto-instrumentation: the http, rpc
 * and bus libraries instrument themselves.
 *
 * Metrics: the instruments of `instruments.ts` record into this thread's MeterProvider. In the
 * main thread the exporters (Prometheus, OTLP) read it merged with every worker thread's; a
 * worker thread only answers the main thread (metrics-bridge.ts).
 */
export function startTelemetry(options: TelemetryOptions): Telemetry {
  if (active) throw new Error('startTelemetry: telemetry is already started in this process');
  const env = options.env ?? process.env;
  const traceSettings = resolveTraceExportSettings(options.serviceName, env);
  const metricSettings = resolveMetricExportSettings(env);
  const resource = buildResource(traceSettings.serviceName, options.serviceVersion ?? product.version, env);

  const exporting: SpanProcessor[] = [];
  for (const name of traceSettings.exporters) {
    if (name === 'console') exporting.push(new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() }));
    else exporting.push(new BatchSpanProcessor({ exporter: traceExporter(traceSettings) }));
  }
  if (!traceSettings.disabled) exporting.push(...(options.spanProcessors ?? []));
  const processors = exporting.length > 0 ? [new TentativeSpanProcessor(exporting)] : [];

  const contextManager = new AsyncLocalStorageContextManager();
  const propagator = tentativeAwarePropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );

  // Metrics: this thread's instruments feed a pull reader; exporters read it (and worker threads) on demand.
  const closers: (() => Promise<void> | void)[] = [];
  let metricsHandler: Telemetry['metricsHandler'];
  const metricExporters = inWorkerThread || metricSettings.disabled ? [] : metricSettings.exporters;
  if (!metricSettings.disabled && metricSettings.exporters.length > 0) {
    const ownReader = new PullMetricReader();
    const appProvider = new MeterProvider({ resource, readers: [ownReader] });
    metrics.setGlobalMeterProvider(appProvider);
    closers.push(() => appProvider.shutdown());
    if (inWorkerThread) {
      const bridge = serveWorkerMetrics(ownReader);
      closers.push(() => bridge.close());
    } else {
      const workers = new WorkerMetricsProducer();
      closers.push(() => workers.close());
      const merged: MetricProducer = {
        async collect(collectOptions) {
          const results = await Promise.all([ownReader.collect(collectOptions), workers.collect()]);
          return {
            resourceMetrics: { resource, scopeMetrics: mergeScopeMetrics(results.map((r) => r.resourceMetrics.scopeMetrics)) },
            errors: results.flatMap((r) => r.errors),
          };
        },
      };
      // The exporting readers hang off a provider with no instruments of its own: all they
      // report comes from the merged producer, so no series is reported twice.
      const readers: MetricReader[] = [];
      for (const name of metricSettings.exporters) {
        if (name === 'prometheus') {
          const prometheus = new PrometheusExporter({
            preventServerStart: true,
            metricProducers: [merged],
            // service_name on every series: dashboards tell services apart without scrape labels.
            withResourceConstantLabels: /^service\.name$/,
            withoutScopeInfo: true,
          });
          readers.push(prometheus);
          metricsHandler = (request, response) => prometheus.getMetricsRequestHandler(request, response);
        } else {
          const exporter = name === 'console' ? new ConsoleMetricExporter() : metricExporter(metricSettings);
          readers.push(
            new PeriodicExportingMetricReader({
              exporter,
              exportIntervalMillis: metricSettings.intervalMs,
              exportTimeoutMillis: Math.min(metricSettings.timeoutMs, metricSettings.intervalMs),
              metricProducers: [merged],
            }),
          );
        }
      }
      const exportProvider = new MeterProvider({ resource, readers });
      // Shut down first: a push reader's last export still reads the instruments.
      closers.unshift(() => exportProvider.shutdown());
    }
  }

  // The tracer provider, context manager and propagator registered directly (what the SDK's
  // NodeSDK did with these options), without @opentelemetry/sdk-node: it imports declarative
  // configuration (with a YAML parser), logs, auto-instrumentation and every exporter it could
  // configure from the environment, about 0.8 MB of code each thread held and never ran.
  contextManager.enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(propagator);
  let tracerProvider: TracerProvider | undefined;
  if (!traceSettings.disabled) {
    const level = env.OTEL_LOG_LEVEL?.trim();
    if (level) diag.setLogger(new DiagConsoleLogger(), { logLevel: diagLogLevelFromString(level) });
    // Spans are recorded only when something takes them (an exporter or a test's processor).
    if (processors.length > 0) {
      const sampler = samplerFromEnv(env);
      tracerProvider = new TracerProvider({
        resource,
        ...(sampler ? { sampler } : {}),
        spanLimits: spanLimitsFromEnv(env),
        spanProcessors: processors,
      });
      trace.setGlobalTracerProvider(tracerProvider);
    }
  }

  let stopped: Promise<void> | undefined;
  const handle: Telemetry = {
    enabled: processors.length > 0,
    exporters: traceSettings.exporters,
    metricExporters,
    resource,
    metricsHandler,
    shutdown() {
      stopped ??= (async () => {
        try {
          const traces = tracerProvider?.shutdown() ?? Promise.resolve();
          // In order: the exporting readers' last collection still reads this thread's instruments.
          const metricsDone = (async () => {
            for (const close of closers) await close();
          })();
          await withTimeout(Promise.all([traces, metricsDone]).then(() => undefined), SHUTDOWN_TIMEOUT_MS);
        } finally {
          trace.disable();
          metrics.disable();
          propagation.disable();
          context.disable();
          if (active === handle) active = undefined;
        }
      })();
      return stopped;
    },
  };
  active = handle;
  return handle;
}

/** The telemetry this thread started, if any. */
export function activeTelemetry(): Telemetry | undefined {
  return active;
}

async function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    // An unreachable collector must not hold the process open on exit.
    timer = setTimeout(() => {
      diag.warn(`telemetry shutdown did not finish within ${ms} ms; pending spans and metrics dropped`);
      resolve();
    }, ms);
    timer.unref();
  });
  try {
    await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
