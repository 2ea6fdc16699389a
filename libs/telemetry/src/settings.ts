/**
 * How this codebase reads the standard `OTEL_*` variables. Telemetry starts before any service
 * configuration is parsed (it must exist before the first request), so it reads its own variables
 * here, from the environment it is given.
 */
import { diag } from '@opentelemetry/api';

export type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';
export type TraceExporterName = 'otlp' | 'console';
export type MetricExporterName = 'prometheus' | 'otlp' | 'console';

export interface OtlpTarget {
  protocol: OtlpProtocol;
  /** The full URL the exporter posts to (http) or dials (grpc); undefined: the exporter's default. */
  url: string | undefined;
}

export interface TraceExportSettings extends OtlpTarget {
  disabled: boolean;
  serviceName: string;
  exporters: TraceExporterName[];
  /** Full OTLP traces URL for the HTTP protocols (kept for callers that read it). */
  otlpTracesUrl: string | undefined;
}

export interface MetricExportSettings extends OtlpTarget {
  disabled: boolean;
  exporters: MetricExporterName[];
  /** OTEL_METRIC_EXPORT_INTERVAL (push exporters), default 60 s. */
  intervalMs: number;
  /** OTEL_METRIC_EXPORT_TIMEOUT, default 30 s. */
  timeoutMs: number;
}

const PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json', 'grpc'];

function isDisabled(env: NodeJS.ProcessEnv): boolean {
  return env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true';
}

/** OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL; the specification's default is http/protobuf. */
function protocolFor(signal: 'TRACES' | 'METRICS', env: NodeJS.ProcessEnv): OtlpProtocol {
  for (const name of [`OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`, 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const value = env[name]?.trim().toLowerCase();
    if (!value) continue;
    if ((PROTOCOLS as readonly string[]).includes(value)) return value as OtlpProtocol;
    diag.warn(`${name}: unsupported protocol "${value}" ignored (supported: ${PROTOCOLS.join(', ')})`);
  }
  return 'http/protobuf';
}

/**
 * The endpoint of one signal. Over HTTP a base endpoint gets the signal's path (`/v1/traces`); a
 * signal-specific endpoint is used as given. Over gRPC both are used as given.
 */
function targetFor(signal: 'TRACES' | 'METRICS', env: NodeJS.ProcessEnv): OtlpTarget & { configured: boolean } {
  const protocol = protocolFor(signal, env);
  const specific = env[`OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`]?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  let url: string | undefined;
  if (specific) url = specific;
  else if (base) url = protocol === 'grpc' ? base : `${base.replace(/\/+$/, '')}/v1/${signal.toLowerCase()}`;
  return { protocol, url, configured: Boolean(specific || base) };
}

/** A comma list of exporter names: undefined when the variable is unset, [] for `none`. */
function exporterList<T extends string>(variable: string, value: string | undefined, supported: readonly T[]): T[] | undefined {
  const requested = (value ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  if (requested.length === 0) return undefined;
  if (requested.includes('none')) return [];
  const out: T[] = [];
  for (const name of requested) {
    if ((supported as readonly string[]).includes(name)) {
      if (!out.includes(name as T)) out.push(name as T);
    } else {
      // diag stays silent unless OTEL_LOG_LEVEL asks for it, like the SDK's own warnings.
      diag.warn(`${variable}: unsupported exporter "${name}" ignored (supported: ${supported.join(', ')}, none)`);
    }
  }
  return out;
}

/**
 * Trace export. Unlike the SDK's own default (OTLP to localhost), an unset `OTEL_TRACES_EXPORTER`
 * exports over OTLP only when an endpoint is configured, so a laptop and the test suite make no
 * network calls.
 */
export function resolveTraceExportSettings(serviceName: string, env: NodeJS.ProcessEnv): TraceExportSettings {
  const disabled = isDisabled(env);
  const target = targetFor('TRACES', env);
  const listed = exporterList<TraceExporterName>('OTEL_TRACES_EXPORTER', env.OTEL_TRACES_EXPORTER, ['otlp', 'console']);
  const exporters = disabled ? [] : (listed ?? (target.configured ? ['otlp'] : []));
  return {
    disabled,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || serviceName,
    exporters,
    protocol: target.protocol,
    url: target.url,
    otlpTracesUrl: target.protocol === 'grpc' ? undefined : target.url,
  };
}

/**
 * Metric export. Unset `OTEL_METRICS_EXPORTER`: the Prometheus scrape endpoint always, plus OTLP
 * when an endpoint is configured. Set, it lists exactly the exporters wanted (`none`: no metrics).
 */
export function resolveMetricExportSettings(env: NodeJS.ProcessEnv): MetricExportSettings {
  const disabled = isDisabled(env);
  const target = targetFor('METRICS', env);
  const listed = exporterList<MetricExporterName>('OTEL_METRICS_EXPORTER', env.OTEL_METRICS_EXPORTER, ['prometheus', 'otlp', 'console']);
  const exporters: MetricExporterName[] = disabled ? [] : (listed ?? (target.configured ? ['prometheus', 'otlp'] : ['prometheus']));
  const positive = (name: string, fallback: number): number => {
    const value = Number(env[name]);
    return Number.isFinite(value) && value > 0 ? value : fallback;
  };
  return {
    disabled,
    exporters,
    protocol: target.protocol,
    url: target.url,
    intervalMs: positive('OTEL_METRIC_EXPORT_INTERVAL', 60_000),
    timeoutMs: positive('OTEL_METRIC_EXPORT_TIMEOUT', 30_000),
  };
}

/**
 * `deployment.environment.name`: from OTEL_RESOURCE_ATTRIBUTES when it names one (either key),
 * else `production` when NODE_ENV says so (the image sets it), else `development`.
 */
export function resolveDeploymentEnvironment(env: NodeJS.ProcessEnv): string {
  const attributes = new Map<string, string>();
  for (const pair of (env.OTEL_RESOURCE_ATTRIBUTES ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    try {
      attributes.set(decodeURIComponent(pair.slice(0, at).trim()), decodeURIComponent(pair.slice(at + 1).trim()));
    } catch {
      // A malformed pair: the SDK's own resource detector reports it.
    }
  }
  const named = attributes.get('deployment.environment.name') || attributes.get('deployment.environment');
  if (named) return named;
  return env.NODE_ENV?.trim() === 'production' ? 'production' : 'development';
}
