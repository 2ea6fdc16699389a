import { hostname } from 'node:os';
import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import { redactSecrets } from '@planning/errors';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';

/** The logger every library accepts. */
export type Logger = PinoLogger;

export interface LoggerOptions {
  /** Written as the `service` field of every line. */
  name: string;
  /** Overrides `LOG_LEVEL` (default `info`). */
  level?: string;
  /** Where lines go; defaults to stdout. */
  destination?: DestinationStream;
}

/** Credential paths censored in every log line. pino wildcards match one level, so the top level is listed too. */
export const REDACT_PATHS: readonly string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'password',
  'token',
  'secret',
  '*.password',
  '*.token',
  '*.secret',
];

const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** The active span's ids, so a log line can be found from its trace and the other way round. */
function traceFields(): Record<string, string> {
  const spanContext = trace.getSpanContext(context.active());
  if (!spanContext || !isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

export function createLogger(options: LoggerOptions): Logger {
  const level = (options.level ?? process.env.LOG_LEVEL ?? 'info').trim().toLowerCase();
  if (!LEVELS.has(level)) {
    throw new Error(`createLogger: unknown log level "${level}" (expected one of ${[...LEVELS].join(', ')})`);
  }
  const logger = pino(
    {
      level,
      base: { service: options.name, pid: process.pid, hostname: hostname() },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
      mixin: traceFields,
      // Field paths above catch credentials where they belong; this catches them anywhere else
      // (a token pasted into a path, a cookie value in a message). The line is JSON already and
      // the patterns never span a quote, so it stays valid.
      hooks: { streamWrite: redactSecrets },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
  return logger;
}
