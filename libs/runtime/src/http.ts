/**
 * Every process's HTTP server: `/live`, `/ready`, the error envelope for everything that goes
 * wrong, and (in processes that run the gateway) the API routes the gateway registers on it.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace, type Span } from '@opentelemetry/api';
import { randomBytes } from 'node:crypto';
import { STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { ServiceError, toServiceError } from '@planning/errors';
import { recordHttpServerRequest } from '@planning/telemetry';
import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { Ajv, type AnySchema, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyHttpOptions, type FastifyReply } from 'fastify';
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

/** The longest request line (method, path and query) the service reads; longer is 414. */
export const MAX_REQUEST_LINE_BYTES = 8 * 1024;
/** The most the request line and headers may take together (Node's parser limit); more is 431 (414 when the line is the cause). */
export const MAX_HEADER_BYTES = 16 * 1024;

/** Maps a fastify/framework error to the documented envelope's code. */
function frameworkError(err: FastifyError): ServiceError {
  const status = err.statusCode ?? 500;
  if (err.validation && err.validation.length > 0) {
    const first = err.validation[0]!;
    // A missing or an unknown property is named itself, not the object that lacks or has it.
    const params = first.params as { missingProperty?: string; additionalProperty?: string } | undefined;
    const named = params?.missingProperty ?? params?.additionalProperty;
    const path = first.instancePath?.replace(/^\//, '').replace(/\//g, '.') ?? '';
    const full = [path, named].filter(Boolean).join('.');
    // A query parameter, path parameter or header is named as the client sent it: `status`, not
    // the index of one of its repeated values (`status.0`).
    const field = (err.validationContext && err.validationContext !== 'body' ? full.split('.')[0] : full) || (err.validationContext ?? 'request');
    const where = err.validationContext ? `${err.validationContext} ` : '';
    return new ServiceError('invalid-input', `Invalid ${where}field '${field}': ${first.message ?? 'invalid value'}`, {
      field,
    });
  }
  if (err.code === 'FST_ERR_BAD_URL') return new ServiceError('invalid-input', 'The path is not valid percent-encoding', { field: 'path' });
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return new ServiceError('uri-too-long', `The request line (path and query) is longer than ${MAX_REQUEST_LINE_BYTES} bytes`, { field: 'url' });
  }
  if (status === 413) return new ServiceError('payload-too-large', 'Request body is too large', { field: 'body' });
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

/**
 * A validator per schema: query strings, params and headers arrive as text and are coerced to
 * the schema's types; JSON bodies are typed already and are never coerced (a number is not a
 * name). Coercion turns "Infinity" and "1e309" into numbers that Ajv then lets pass every bound
 * (it checks bounds only on finite numbers), so coerced parts are refused when they hold one.
 */
function createValidatorCompiler(schemas: LazySchemas) {
  const make = (coerceTypes: false | 'array') => {
    const ajv = new Ajv({ coerceTypes, useDefaults: true, removeAdditional: false, allErrors: false });
    addFormats.default(ajv);
    ajv.addKeyword({ keyword: 'example' });
    return ajv;
  };
  const coercing = make('array');
  const strict = make(false);
  return ({ schema, httpPart }: { schema: AnySchema; httpPart?: string }) =>
    lazyValidator(schemas, () => (httpPart === 'body' ? strict.compile(schema) : finiteOnly(coercing.compile(schema))));
}

/** An app's schemas compiled on first use (lazyValidator, lazySerializers): how to compile each now, and how many have been. */
interface LazySchemas {
  compilers: (() => void)[];
  compiled: number;
}

const lazySchemasOf = new WeakMap<FastifyInstance, LazySchemas>();

/**
 * Compiles every schema of the app's routes that no request has needed yet (a test's check that
 * all of them compile; the server itself compiles each on first use). Returns how many the app
 * has, and how many had been compiled before the call.
 */
export function compileAllSchemas(app: FastifyInstance): { total: number; compiledBefore: number } {
  const schemas = lazySchemasOf.get(app);
  if (!schemas) throw new Error('not an app made by createHttpApp');
  const compiledBefore = schemas.compiled;
  for (const compile of schemas.compilers) compile();
  return { total: schemas.compilers.length, compiledBefore };
}

/**
 * A validator compiled when it is first called, not when its route is registered. The gateway
 * has 1,088 of them (one per route and request part, one per route and response status);
 * compiled at start, their generated code and its source text stayed in the gateway's heap whether
 * or not a route was ever called (about 2.8 MB of source text alone). A schema that cannot compile
 * then fails on the route's first request instead of at start: the gateway's tests compile every
 * route's schemas (`compileAllSchemas`).
 */
function lazyValidator(schemas: LazySchemas, compile: () => ValidateFunction): ValidateFunction {
  const ready = lazily(schemas, compile);
  const wrapped = ((data: unknown) => {
    const v = ready();
    const ok = v(data);
    wrapped.errors = v.errors;
    return ok;
  }) as ValidateFunction;
  return wrapped;
}

/** Fastify's response serializers (fast-json-stringify), each built when its route first answers with that status (see lazyValidator). */
function lazySerializers(schemas: LazySchemas) {
  return (externalSchemas: unknown, options: unknown) => {
    const build = SerializerSelector()(externalSchemas as never, options as never);
    return (route: Parameters<typeof build>[0]) => {
      const ready = lazily(schemas, () => build(route) as (data: unknown) => string);
      return (data: unknown) => ready()(data);
    };
  };
}

/** `compile`, run once on the first call of what this returns (or by compileAllSchemas), counted in `schemas`. */
function lazily<F>(schemas: LazySchemas, compile: () => F): () => F {
  let compiled: F | undefined;
  const ready = (): F => {
    if (compiled === undefined) {
      compiled = compile();
      schemas.compiled++;
    }
    return compiled;
  };
  schemas.compilers.push(ready);
  return ready;
}

/** Where `data` (a coerced query, params or headers object) holds a number that is not finite. */
function nonFinitePath(data: unknown): string | undefined {
  if (data === null || typeof data !== 'object') return undefined;
  for (const [key, value] of Object.entries(data)) {
    const values: unknown[] = Array.isArray(value) ? value : [value];
    if (values.some((v) => typeof v === 'number' && !Number.isFinite(v))) return `/${key}`;
  }
  return undefined;
}

function finiteOnly(validate: ValidateFunction): ValidateFunction {
  const wrapped = ((data: unknown) => {
    if (!validate(data)) {
      wrapped.errors = validate.errors;
      return false;
    }
    const path = nonFinitePath(data);
    if (path === undefined) {
      wrapped.errors = null;
      return true;
    }
    wrapped.errors = [{ instancePath: path, schemaPath: '#/type', keyword: 'type', params: {}, message: 'must be a finite number' }];
    return false;
  }) as ValidateFunction;
  return wrapped;
}

/**
 * Requests the HTTP parser refuses before any route sees them (a request line or headers too
 * large, a malformed request): the same envelope as every other failure. The answer is written,
 * the socket half-closed and what the client still sends is read and dropped for a moment
 * ("lingering close"): closing at once would make the kernel reset a connection whose client is
 * still writing — a 1 MB query string — and the client would lose the answer.
 */
const answeredSockets = new WeakSet<Socket>();

export function answerClientError(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
  if (answeredSockets.has(socket)) return; // the parser reports again for every chunk after an error
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  answeredSockets.add(socket);
  let error: ServiceError;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    const packet = Buffer.isBuffer(err.rawPacket) ? err.rawPacket : Buffer.alloc(0);
    const lineEnd = packet.indexOf('\r\n');
    const lineTooLong = lineEnd < 0 ? packet.length > MAX_REQUEST_LINE_BYTES : lineEnd > MAX_REQUEST_LINE_BYTES;
    error = lineTooLong
      ? new ServiceError('uri-too-long', `The request line (path and query) is longer than ${MAX_REQUEST_LINE_BYTES} bytes`, { field: 'url' })
      : new ServiceError('headers-too-large', `The request headers are larger than ${MAX_HEADER_BYTES} bytes`, { field: 'headers' });
  } else {
    error = new ServiceError('invalid-input', 'Malformed HTTP request', { field: 'request' });
  }
  const body = JSON.stringify(error.toBody());
  socket.end(
    `HTTP/1.1 ${error.httpStatus} ${STATUS_CODES[error.httpStatus] ?? ''}\r\n` +
      `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
  socket.on('data', () => undefined);
  socket.resume();
  setTimeout(() => socket.destroy(), 2_000).unref();
}

/**
 * Request ids are random (a counter repeats across processes and restarts): a 5xx quotes one, the
 * log line has it. Eight random bytes each, cut from a pool filled 512 ids at a time (one call into
 * the system's random source per 512 requests rather than one per request).
 */
const ID_POOL_BYTES = 4096;
let idPool = Buffer.alloc(0);
let idOffset = 0;
function newRequestId(): string {
  if (idOffset + 8 > idPool.length) {
    idPool = randomBytes(ID_POOL_BYTES);
    idOffset = 0;
  }
  idOffset += 8;
  return `req_${idPool.toString('hex', idOffset - 8, idOffset)}`;
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
  // Hooks on every request take `done` rather than returning a promise: one promise and one
  // microtask fewer per hook and request.
  app.addHook('onResponse', (request, reply, done) => {
    const span = request.traceSpan;
    if (span) {
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
    }
    done();
  });
}

/** Paths probed every few seconds: logged at debug, so they do not drown the rest. */
const PROBE_PATHS = new Set(['/live', '/ready']);

/**
 * One log line per answered request: method, path (never the query string), route pattern,
 * status and time. Query strings hold search text and filter ids, which logs must not keep.
 */
function registerRequestLog(app: FastifyInstance): void {
  app.addHook('onResponse', (request, reply, done) => {
    const path = request.url.split('?', 1)[0] ?? '';
    // Not under `req`/`res`: the logger's serializers for those expect the framework's objects.
    const entry = {
      http: { method: request.method, path, route: request.routeOptions.url ?? null, statusCode: reply.statusCode, remoteAddress: request.ip },
      responseTime: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (PROBE_PATHS.has(path)) request.log.debug(entry, 'request completed');
    else request.log.info(entry, 'request completed');
    done();
  });
}

export function createHttpApp(options: HttpAppOptions = {}): FastifyInstance {
  const schemas: LazySchemas = { compilers: [], compiled: 0 };
  const serverOptions: FastifyHttpOptions<Server> = {
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    trustProxy: options.trustProxy ?? false,
    forceCloseConnections: 'idle',
    // Requests that arrive while the server closes get 503 in the envelope (below), not Fastify's body.
    return503OnClosing: false,
    // Fastify's own request lines carry the whole URL, query string included (search text, filter
    // ids): one line per request is written below instead, without the query.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: newRequestId,
    http: { maxHeaderSize: MAX_HEADER_BYTES },
    // Params are bounded by their schemas (400 naming the field); the router's own limit only
    // stops pathological paths, and the request line is bounded anyway.
    routerOptions: { maxParamLength: MAX_REQUEST_LINE_BYTES },
    clientErrorHandler: answerClientError,
    schemaController: { compilersFactory: { buildSerializer: lazySerializers(schemas) } },
    frameworkErrors: (err, _request, reply) => {
      const error = frameworkError(err);
      void (reply as unknown as FastifyReply).status(error.httpStatus).send(error.toBody());
    },
  };
  const app: FastifyInstance = options.logger
    ? Fastify({ ...serverOptions, loggerInstance: options.logger })
    : Fastify({ ...serverOptions, logger: false });

  lazySchemasOf.set(app, schemas);
  app.setValidatorCompiler(createValidatorCompiler(schemas));

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', (request, _reply, done) => {
    if (closing) {
      done(new ServiceError('unavailable', 'The service is shutting down; retry shortly'));
      return;
    }
    // A request line that Node's parser accepted (headers and line under 16 KiB together) may
    // still be longer than the service reads.
    if ((request.raw.url ?? '').length > MAX_REQUEST_LINE_BYTES) {
      done(new ServiceError('uri-too-long', `The request line (path and query) is longer than ${MAX_REQUEST_LINE_BYTES} bytes`, { field: 'url' }));
      return;
    }
    done();
  });

  registerTracing(app);
  if (options.logger) registerRequestLog(app);

  app.setErrorHandler((err: FastifyError | ServiceError, request, reply) => {
    const error = err instanceof ServiceError ? err : frameworkError(err as FastifyError);
    request.traceSpan?.setAttribute('error.type', error.code);
    if (error.details.retryAfterSeconds !== undefined) {
      void reply.header('retry-after', String(Math.max(1, Math.ceil(error.details.retryAfterSeconds))));
    }
    if (error.httpStatus < 500) {
      void reply.status(error.httpStatus).send(error.toBody());
      return;
    }
    // A failure on our side: the caller learns what failed and which request it was (to quote
    // when reporting it); the log line with the same id has the cause.
    request.log.error({ err }, 'request failed');
    const body = error.toBody();
    const what = `${request.method} ${request.routeOptions.url ?? 'this request'}`;
    if (error.code === 'internal') body.error.message = `The service failed to complete ${what}`;
    void reply.status(error.httpStatus).send({ error: { ...body.error, requestId: request.id } });
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
