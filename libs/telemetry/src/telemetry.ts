import { context, diag, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';

export type TraceExporterName = 'otlp' | 'console';

export interface TelemetryOptions {
  serviceName: string;
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
  /** Flushes pending spans (bounded wait) and unregisters the global providers. Idempotent. */
  shutdown(): Promise<void>;
}

export interface TraceExportSettings {
  disabled: boolean;
  serviceName: string;
  exporters: TraceExporterName[];
  /** Full OTLP traces URL; undefined means the exporter's default (localhost:4318). */
  otlpTracesUrl: string | undefined;
}

const SHUTDOWN_TIMEOUT_MS = 5_000;

/**
 * Reads the standard `OTEL_*` variables the way this codebase interprets them. Unlike the SDK's
 * own default (OTLP to localhost), an unset `OTEL_TRACES_EXPORTER` exports over OTLP only when an
 * endpoint is configured, so a developer's laptop and the test suite make no network calls.
 */
export function resolveTraceExportSettings(serviceName: string, env: NodeJS.ProcessEnv): TraceExportSettings {
  const disabled = env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true';
  const resolvedName = env.OTEL_SERVICE_NAME?.trim() || serviceName;
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const baseEndpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const otlpTracesUrl = tracesEndpoint
    ? tracesEndpoint
    : baseEndpoint
      ? `${baseEndpoint.replace(/\/+$/, '')}/v1/traces`
      : undefined;

  const requested = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  let exporters: TraceExporterName[];
  if (requested.length === 0) {
    exporters = otlpTracesUrl ? ['otlp'] : [];
  } else if (requested.includes('none')) {
    exporters = [];
  } else {
    exporters = [];
    for (const name of requested) {
      if (name === 'otlp' || name === 'console') {
        if (!exporters.includes(name)) exporters.push(name);
      } else {
        // diag stays silent unless OTEL_LOG_LEVEL asks for it, like the SDK's own warnings.
        diag.warn(`OTEL_TRACES_EXPORTER: unsupported exporter "${name}" ignored (supported: otlp, console, none)`);
      }
    }
  }
  return { disabled, serviceName: resolvedName, exporters: disabled ? [] : exporters, otlpTracesUrl };
}

let active: Telemetry | undefined;

/**
 * Starts OpenTelemetry for this process. Always installs the W3C trace-context + baggage
 * propagator and the AsyncLocalStorage context manager, so trace context flows through gRPC
 * metadata and bus headers even when nothing is exported. No auto-instrumentation: the rpc and
 * bus libraries propagate explicitly.
 */
export function startTelemetry(options: TelemetryOptions): Telemetry {
  if (active) throw new Error('startTelemetry: telemetry is already started in this process');
  const settings = resolveTraceExportSettings(options.serviceName, options.env ?? process.env);

  const processors: SpanProcessor[] = [];
  for (const name of settings.exporters) {
    if (name === 'console') processors.push(new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() }));
    else processors.push(new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: settings.otlpTracesUrl }) }));
  }
  if (!settings.disabled) processors.push(...(options.spanProcessors ?? []));

  const contextManager = new AsyncLocalStorageContextManager();
  const propagator = new CompositePropagator({
    propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
  });

  let sdk: NodeSDK | undefined;
  if (processors.length > 0) {
    const attributes = options.serviceVersion ? { [ATTR_SERVICE_VERSION]: options.serviceVersion } : {};
    sdk = new NodeSDK({
      serviceName: settings.serviceName,
      resource: defaultResource().merge(resourceFromAttributes(attributes)),
      contextManager,
      textMapPropagator: propagator,
      spanProcessors: processors,
      // Explicit empty lists: left out, the SDK would export metrics and logs over OTLP to localhost.
      metricReaders: [],
      logRecordProcessors: [],
      instrumentations: [],
    });
    sdk.start();
  } else {
    contextManager.enable();
    context.setGlobalContextManager(contextManager);
    propagation.setGlobalPropagator(propagator);
  }

  let stopped: Promise<void> | undefined;
  const handle: Telemetry = {
    enabled: processors.length > 0,
    exporters: settings.exporters,
    shutdown() {
      stopped ??= (async () => {
        try {
          if (sdk) await withTimeout(sdk.shutdown(), SHUTDOWN_TIMEOUT_MS);
        } finally {
          trace.disable();
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

async function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    // An unreachable collector must not hold the process open on exit.
    timer = setTimeout(() => {
      diag.warn(`telemetry shutdown did not finish within ${ms} ms; pending spans dropped`);
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
