/**
 * Every process's HTTP server: `/live`, `/ready`, the error envelope for everything that goes
 * wrong, and (in processes that run the gateway) the API routes the gateway registers on it.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace, type Span } from '@opentelemetry/api';
import { ServiceError, toServiceError } from '@planning/errors';
import { recordHttpServerRequest } from '@planning/telemetry';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { ModuleDefinition, RuntimeView } from './registry.js';

export interface HttpAppOptions {
  /** pino logger for request logs; none: quiet. */
  logger?: FastifyBaseLogger;
  /** The runtime whose modules `/ready` reports. Without it `/ready` answers ready. */
  runtime?: RuntimeView;
  /** Default request body limit in bytes (routes may raise it). Default 1 MiB. */
  bodyLimit?: number;
  /** Which proxies to trust for `X-Forwarded-*` (client addresses, https detection): true, or a list of addresses/CIDRs. */
  trustProxy?: boolean | string;
}

/** Maps a fastify/framework error to the documented envelope's code. */
function frameworkError(err: FastifyError): ServiceError {
  const status = err.statusCode ?? 500;
  if (err.validation && err.validation.length > 0) {
    const first = err.validation[0]!;
    // A missing or an unknown property is named itself, not the object that lacks or has it.
    const params = first.params as { missingProperty?: string; additionalProperty?: string } | undefined;
    const named = params?.missingProperty ?? params?.additionalProperty;
    const path = first.instancePath?.replace(/^\//, '').replace(/\//g, '.') ?? '';
    const field = [path, named].filter(Boolean).join('.') || (err.validationContext ?? 'request');
    const where = err.validationContext ? `${err.validationContext} ` : '';
    return new ServiceError('invalid-input', `Invalid ${where}field '${field}': ${first.message ?? 'invalid value'}`, {
      field,
    });
  }
  if (status === 413) return new ServiceError('payload-too-large', 'Request body is too large');
  if (status === 404) return new ServiceError('not-found', 'Not found');
  if (status === 405) return new ServiceError('method-not-allowed', 'Method not allowed');
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new ServiceError('invalid-input', 'Unsupported content type: send application/json', { field: 'body' });
  }
  if (status >= 400 && status < 500) {
    // Malformed JSON, empty bodies with a JSON content type, bad headers.
    return new ServiceError('invalid-input', err.message.replace(/^Body is not valid JSON.*$/s, 'Malformed JSON body'), {
      field: 'body',
    });
  }
  return toServiceError(err);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's SERVER span (ended when the response is sent). */
    traceSpan?: Span;
  }
}

const tracer = trace.getTracer('planning-http');

/**
 * A SERVER span per request that continues the caller's W3C trace context, so a request's gRPC
 * calls and the events it causes join one trace, and its duration in the
 * `http.server.request.duration` histogram. Named by route pattern, never by raw URL (paths and
 * query strings may carry ids). Health probes are neither traced nor counted.
 */
function registerTracing(app: FastifyInstance): void {
  app.decorateRequest('traceSpan', undefined);
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    if (route === '/live' || route === '/ready') {
      done();
      return;
    }
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const span = tracer.startSpan(
      `${request.method} ${route ?? 'unmatched'}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': request.method, ...(route ? { 'http.route': route } : {}) },
      },
      parent,
    );
    request.traceSpan = span;
    // Everything after this hook (other hooks, the handler, its gRPC calls) runs in the span.
    context.with(trace.setSpan(parent, span), done);
  });
  app.addHook('onResponse', async (request, reply) => {
    const span = request.traceSpan;
    if (!span) return;
    span.setAttribute('http.response.status_code', reply.statusCode);
    if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
    recordHttpServerRequest({
      method: request.method,
      route: request.routeOptions.url,
      statusCode: reply.statusCode,
      scheme: request.protocol,
      seconds: reply.elapsedTime / 1000,
    });
  });
}

/** Paths probed every few seconds: logged at debug, so they do not drown the rest. */
const PROBE_PATHS = new Set(['/live', '/ready']);

/**
 * One log line per answered request: method, path (never the query string), route pattern,
 * status and time. Query strings hold search text and filter ids, which logs must not keep.
 */
function registerRequestLog(app: FastifyInstance): void {
  app.addHook('onResponse', async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? '';
    // Not under `req`/`res`: the logger's serializers for those expect the framework's objects.
    const entry = {
      http: { method: request.method, path, route: request.routeOptions.url ?? null, statusCode: reply.statusCode, remoteAddress: request.ip },
      responseTime: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (PROBE_PATHS.has(path)) request.log.debug(entry, 'request completed');
    else request.log.info(entry, 'request completed');
  });
}

export function createHttpApp(options: HttpAppOptions = {}): FastifyInstance {
  const serverOptions: FastifyServerOptions = {
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    trustProxy: options.trustProxy ?? false,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    // Fastify's own request lines carry the whole URL, query string included (search text, filter
    // ids): one line per request is written below instead, without the query.
    logController: new LogController({ disableRequestLogging: true }),
  };
  const app: FastifyInstance = options.logger
    ? Fastify({ ...serverOptions, loggerInstance: options.logger })
    : Fastify({ ...serverOptions, logger: false });

  // Query strings, params and headers arrive as text and are coerced to the schema's types;
  // JSON bodies are typed already and are never coerced (a number is not a name).
  const coercing = new Ajv({ coerceTypes: 'array', useDefaults: true, removeAdditional: false, allErrors: false });
  const strict = new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, allErrors: false });
  for (const ajv of [coercing, strict]) {
    addFormats.default(ajv);
    ajv.addKeyword({ keyword: 'example' });
  }
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? strict : coercing).compile(schema),
  );

  registerTracing(app);
  if (options.logger) registerRequestLog(app);

  app.setErrorHandler((err: FastifyError | ServiceError, request, reply) => {
    const error = err instanceof ServiceError ? err : frameworkError(err as FastifyError);
    request.traceSpan?.setAttribute('error.type', error.code);
    if (error.code === 'internal') {
      request.log.error({ err }, 'request failed');
    }
    if (error.details.retryAfterSeconds !== undefined) {
      void reply.header('retry-after', String(Math.max(1, Math.ceil(error.details.retryAfterSeconds))));
    }
    void reply.status(error.httpStatus).send(error.toBody());
  });

  app.setNotFoundHandler((request, reply) => {
    void reply.status(404).send(new ServiceError('not-found', `No route for ${request.method} ${request.url.split('?')[0]}`).toBody());
  });

  app.get('/live', async () => ({ data: { status: 'live' } }));

  app.get('/ready', async (_request, reply) => {
    if (!options.runtime) return { data: { status: 'ready', notRunning: [], details: {} } };
    const report = await options.runtime.ready();
    const status = options.runtime.draining ? 'draining' : report.ok ? 'ready' : 'not-ready';
    void reply.status(report.ok ? 200 : 503);
    return { data: { status, notRunning: report.notRunning, details: report.details } };
  });

  return app;
}

export interface HttpExports {
  app: FastifyInstance;
}

/** The process's HTTP server module: listens on HOST:PORT once every module is initialised. */
export const httpModule: ModuleDefinition<undefined, HttpExports> = {
  name: 'http',
  deps: [],
  async init(ctx) {
    const app = createHttpApp({
      logger: ctx.logger as unknown as FastifyBaseLogger,
      runtime: ctx.runtime,
      trustProxy: ctx.config.trustProxy,
    });
    return {
      exports: { app },
      async start() {
        await app.listen({ host: ctx.config.HOST, port: ctx.config.PORT });
        const address = app.server.address();
        ctx.logger.info({ address }, 'http listening');
      },
      async drain() {
        await app.close();
      },
    };
  },
};
