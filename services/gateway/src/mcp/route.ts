import { ServiceError } from '@planning/errors';
import { mcpOutcomeOf, mcpRequestInfo, withMcpSpan } from '@planning/telemetry';
import { Ajv } from 'ajv';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { markDenial } from '../auth.js';
import type { GatewayDeps } from '../deps.js';
import { insufficientScopeChallenge, unauthorizedChallenge } from '../oauth/resource-metadata.js';
import { isLoopbackHost } from '../oauth/site.js';
import { NAME_STYLES, requiredScopes, toolNamed, wireName, type NameStyle, type Toolset, type ToolView } from './catalog.js';
import type { McpEngine } from './engine.js';
import { MCP_PATH, PROTOCOL_VERSIONS } from './protocol.js';
import type { McpCallState } from './server.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The scopes a refused MCP call needs (its 403's `insufficient_scope` challenge names them). */
    neededScopes?: readonly string[];
  }
}

/** Request headers the SDK never sees: credentials stay in the gateway. */
const WITHHELD = new Set(['authorization', 'x-api-key', 'cookie', 'content-length', 'connection', 'transfer-encoding']);
/** Response headers fastify sets itself. */
const NOT_COPIED = new Set(['content-length', 'transfer-encoding', 'connection']);

/**
 * `Accept` as the SDK checks it. Responses are always JSON here (no SSE), so a client that
 * accepts JSON is served even when it does not also list `text/event-stream`; a missing header or
 * a wildcard accepts JSON. Anything else goes through unchanged and the SDK answers 406.
 */
export function normalizeAccept(accept: string | undefined): string | undefined {
  if (accept === undefined || accept.trim() === '') return 'application/json, text/event-stream';
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim().toLowerCase());
  if (types.some((t) => t === '*/*' || t === 'application/*' || t === 'application/json')) return 'application/json, text/event-stream';
  return accept;
}

/**
 * Whether an `Origin` header is allowed: absent (non-browser clients), listed (`*` allows any), or
 * — for a server that listens on a loopback address only (`loopback`) — a loopback origin: pages
 * served from this machine, which a DNS-rebinding page (its origin names another host) is not.
 */
export function originAllowed(origin: string | undefined, allowed: readonly string[], loopback = false): boolean {
  if (origin === undefined) return true;
  if (allowed.includes('*')) return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.origin === 'null') return false;
  if (loopback && (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHost(url.hostname)) return true;
  return allowed.some((a) => a.replace(/\/+$/, '').toLowerCase() === url.origin.toLowerCase());
}

function jsonRpcError(reply: FastifyReply, status: number, code: number, message: string, extra: { data?: object; id?: string | number | null } = {}): FastifyReply {
  const error = { code, message, ...(extra.data ? { data: extra.data } : {}) };
  return reply.status(status).type('application/json').send(JSON.stringify({ jsonrpc: '2.0', error, id: extra.id ?? null }));
}

/** The `id` of a raw JSON-RPC request body, if it has one (for errors answered before the SDK sees it). */
function requestIdOf(body: unknown): string | number | null {
  if (typeof body !== 'string') return null;
  try {
    const id = (JSON.parse(body) as { id?: unknown } | null)?.id;
    return typeof id === 'string' || typeof id === 'number' ? id : null;
  } catch {
    return null;
  }
}

/** Headers a browser page may read from a response (CORS): auth challenges, rate limits, the protocol version. */
export const CORS_EXPOSED_HEADERS = 'WWW-Authenticate, Retry-After, RateLimit, RateLimit-Policy, Mcp-Protocol-Version';
/** Headers a preflight allows when the browser does not list its own. */
export const CORS_ALLOWED_HEADERS = 'Authorization, X-Api-Key, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Method, Mcp-Name';

/**
 * CORS for an allowed browser origin: the response may be read by that origin (never `*`: the
 * answer depends on the caller's token), with the headers a client needs exposed.
 */
function allowOrigin(reply: FastifyReply, origin: string): void {
  void reply.header('access-control-allow-origin', origin);
  void reply.header('vary', 'Origin');
  void reply.header('access-control-expose-headers', CORS_EXPOSED_HEADERS);
}

function webRequestOf(request: FastifyRequest, body: string): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || WITHHELD.has(name)) continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const accept = normalizeAccept(request.headers.accept);
  if (accept !== undefined) headers.set('accept', accept);
  return new Request(new URL(request.url, 'http://localhost'), { method: 'POST', headers, body });
}

async function sendWeb(reply: FastifyReply, response: Response): Promise<FastifyReply> {
  const text = await response.text();
  void reply.status(response.status);
  response.headers.forEach((value, name) => {
    if (!NOT_COPIED.has(name)) void reply.header(name, value);
  });
  return text.length > 0 ? reply.send(text) : reply.send();
}

const errorBody = (description: string) => ({ description, $ref: 'ErrorBody#' });

/** The largest JSON-RPC message accepted, in bytes (tool arguments are bounded far below it). */
export const MCP_BODY_LIMIT = 1024 * 1024;

// Query strings are text: coerced to the schema's types, as the gateway's other routes do.
const queryAjv = new Ajv({ coerceTypes: 'array', useDefaults: true, allErrors: false, strict: false });

/**
 * `POST /api/mcp`: the remote MCP endpoint (Streamable HTTP, JSON responses, stateless) for
 * agent tokens. The `Origin` is checked first (before authentication; listed browser origins get
 * CORS, with an `OPTIONS` preflight); the gateway then authenticates, rate-limits and meters the
 * request like any token request; this route refuses batches, answers a tool call the token
 * lacks the scope for with 403, and hands the message to the official SDK: 2026-07-28 requests
 * (per-request `_meta` envelope) to its modern handler, session-era requests (`initialize`
 * handshake) to a per-request stateless transport. Both serve the same tools from one factory.
 */
export async function mcpRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  // The SDK's half (engine.ts) is loaded on the first POST: a gateway without MCP traffic never holds it.
  let engine: Promise<McpEngine> | undefined;
  const engineOf = (): Promise<McpEngine> =>
    (engine ??= import('./engine.js').then(
      (m) => m.createMcpEngine(deps, app.log),
      (err: unknown) => {
        engine = undefined; // the next request tries again
        throw err;
      },
    ));
  const allowedOrigins = deps.settings.MCP_ALLOWED_ORIGINS;
  /**
   * The Origin check (DNS-rebinding defence), run before authentication and so before the rate
   * limiter (`config.beforeAuth`, see auth.ts): a disallowed page neither spends a key's tokens
   * nor learns whether its token is valid; it gets 403. An allowed origin gets the CORS headers,
   * on errors too (a browser client can then read a 401 or 429).
   */
  const originGate = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const origin = request.headers.origin;
    if (!originAllowed(origin, allowedOrigins, deps.oauth.resource.site.loopback)) {
      markDenial(request, { reason: 'origin-not-allowed' });
      throw new ServiceError('forbidden', 'This Origin may not call the MCP endpoint', { reason: 'origin-not-allowed' });
    }
    if (origin !== undefined) allowOrigin(reply, origin);
  };
  app.addHook('onClose', async () => {
    if (engine) await (await engine).close();
  });

  await app.register(async (scope) => {
    // The body reaches the SDK as sent: malformed JSON is a JSON-RPC parse error, not a REST 400.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));
    // Errors before the handler that JSON-RPC clients must be able to read: a bad query string
    // (`?toolset=bogus`) is -32602 naming the parameter; an oversized body is HTTP 413 with a
    // JSON-RPC -32600 body. Everything else (401, 403, 429, …) keeps the REST envelope.
    scope.setErrorHandler((error: FastifyError, request, reply) => {
      if (request.method === 'POST' && error.validation && error.validationContext === 'querystring') {
        const first = error.validation[0];
        const params = (first?.params ?? {}) as { missingProperty?: string; additionalProperty?: string };
        const field = params.additionalProperty ?? params.missingProperty ?? ((first?.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.') || 'query');
        const detail = params.additionalProperty !== undefined ? 'is not a parameter of this endpoint' : (first?.message ?? 'is invalid');
        return jsonRpcError(reply, 400, -32602, `Invalid params: query parameter '${field}' ${detail}`, {
          data: { code: 'invalid-input', field },
          id: requestIdOf(request.body),
        });
      }
      if (request.method === 'POST' && (error.statusCode === 413 || error.code === 'FST_ERR_CTP_BODY_TOO_LARGE')) {
        return jsonRpcError(reply, 413, -32600, `Invalid Request: the body exceeds ${request.routeOptions.bodyLimit ?? MCP_BODY_LIMIT} bytes`, {
          data: { code: 'payload-too-large' },
        });
      }
      throw error;
    });
    // OAuth challenges (RFC 6750, RFC 9728): where to get a token, and which scopes a refused one lacks.
    scope.addHook('onSend', async (request, reply, payload) => {
      if (reply.statusCode === 401) {
        const invalid = request.denial !== undefined && request.denial.reason !== 'missing-credentials';
        void reply.header('www-authenticate', unauthorizedChallenge(deps.oauth.resource, invalid));
      } else if (reply.statusCode === 403 && request.failure instanceof ServiceError && request.failure.details.reason === 'missing-scope') {
        void reply.header('www-authenticate', insufficientScopeChallenge(deps.oauth.resource, request.principal.scopes, request.neededScopes ?? ['issues:read']));
      }
      return payload;
    });

    scope.post<{ Querystring: { toolset?: Toolset; names?: NameStyle } }>(
      MCP_PATH,
      {
        schema: {
          operationId: 'mcp',
          summary: 'Remote MCP endpoint (JSON-RPC 2.0 over Streamable HTTP)',
          description: [
            `Protocol revisions: ${PROTOCOL_VERSIONS.join(', ')} (2026-07-28 statelessly with the per-request \`_meta\` envelope; the session-era ones with \`initialize\`, without sessions).`,
            'Methods: `initialize`, `server/discover`, `ping`, `tools/list`, `tools/call`; others -32601. Responses are JSON (no SSE); batches are refused (-32600).',
            '`?toolset=core` lists the compact tool set; `?names=portable` names the tools `service_<name>` (for hosts that accept only `^[a-zA-Z0-9_-]{1,64}$`; `tools/call` takes both forms always); another value is a JSON-RPC -32602 naming the parameter (HTTP 400). A tool call the token lacks the scope for gets 403 with the error envelope; a refusal is a tool result with `isError` and `structuredContent.error`; bad arguments are -32602 naming the field.',
            `A body over ${MCP_BODY_LIMIT} bytes is HTTP 413 with a JSON-RPC -32600 body. The \`Origin\` check runs before authentication; listed browser origins get CORS headers (preflight: \`OPTIONS /api/mcp\`). See docs/mcp.md.`,
          ].join(' '),
          querystring: {
            type: 'object',
            additionalProperties: false,
            properties: {
              toolset: { type: 'string', enum: ['full', 'core'], description: '`core`: the issue-named tools without aliases and guidance tools.' },
              names: { type: 'string', enum: [...NAME_STYLES], description: '`portable`: tools listed as `service_<name>` instead of `service.<name>`.' },
            },
          },
          body: {
            type: 'object',
            description: 'One JSON-RPC 2.0 request or notification.',
            required: ['jsonrpc', 'method'],
            properties: { jsonrpc: { type: 'string', enum: ['2.0'] }, id: { type: ['string', 'integer'], maxLength: 200, minimum: -9007199254740991, maximum: 9007199254740991 }, method: { type: 'string', maxLength: 200 }, params: { type: 'object' } },
          },
          response: {
            200: { description: 'A JSON-RPC response (result or error)', type: 'object', additionalProperties: true },
            400: { description: 'A JSON-RPC error: malformed JSON (-32700), a batch or not JSON-RPC (-32600), a bad query parameter such as `toolset` (-32602)', type: 'object', additionalProperties: true },
            202: { description: 'A notification was accepted', type: 'null' },
            403: errorBody('forbidden: the token lacks the scope of the tool called (`missing-scope`), or the `Origin` is not allowed; quota-exceeded'),
            405: errorBody('method-not-allowed'),
            406: { description: 'The client does not accept JSON (a JSON-RPC error)', type: 'object', additionalProperties: true },
            413: { description: `The body exceeds ${MCP_BODY_LIMIT} bytes (a JSON-RPC -32600 error)`, type: 'object', additionalProperties: true },
            415: { description: 'The body is not application/json (a JSON-RPC error)', type: 'object', additionalProperties: true },
          },
        },
        // The body is the raw JSON-RPC text (the SDK parses and validates it); its schema only documents it.
        validatorCompiler: ({ schema, httpPart }) => (httpPart === 'body' ? () => true : queryAjv.compile(schema)),
        bodyLimit: MCP_BODY_LIMIT,
        config: { access: { auth: 'token', scope: 'issues:read' }, beforeAuth: originGate },
      },
      async (request, reply) => {
        const raw = typeof request.body === 'string' ? request.body : '';
        const parsed = { ok: true, value: undefined as unknown };
        try {
          parsed.value = raw ? JSON.parse(raw) : undefined;
        } catch {
          parsed.ok = false;
        }
        if (parsed.ok && Array.isArray(parsed.value)) {
          // One message per HTTP request: the rate limit and quotas count requests.
          return jsonRpcError(reply, 400, -32600, 'Invalid Request: JSON-RPC batches are not supported; send one message per request');
        }
        const message = parsed.ok && parsed.value && typeof parsed.value === 'object' ? (parsed.value as { method?: unknown; params?: { name?: unknown } }) : undefined;
        const view: ToolView = { toolset: request.query.toolset === 'core' ? 'core' : 'full', names: request.query.names === 'portable' ? 'portable' : 'dotted' };
        if (message?.method === 'tools/call' && typeof message.params?.name === 'string') {
          const tool = toolNamed(message.params.name);
          const missing = tool ? requiredScopes(tool).filter((s) => !request.principal.scopes.includes(s)) : [];
          if (missing.length > 0) {
            request.neededScopes = requiredScopes(tool!);
            throw new ServiceError('forbidden', `The token lacks the scope ${missing.map((s) => `'${s}'`).join(', ')} for ${wireName(tool!.name, view.names)}`, { reason: 'missing-scope' });
          }
        }
        const state: McpCallState = { principal: request.principal, view };
        const webRequest = webRequestOf(request, raw);
        const mcp = await engineOf();
        const legacy = await mcp.isLegacy(webRequest, parsed.ok ? parsed.value : undefined);
        if (!legacy && message?.method === 'subscriptions/listen') {
          // A listen stream is server-initiated traffic over SSE: this endpoint has none (tools never change).
          const id = (message as { id?: unknown }).id;
          return reply
            .status(404)
            .type('application/json')
            .send(JSON.stringify({ jsonrpc: '2.0', id: typeof id === 'string' || typeof id === 'number' ? id : null, error: { code: -32601, message: 'Method not found: this endpoint has no server-initiated streams' } }));
        }
        const serve = async (): Promise<{ response: Response; body: string }> => {
          const response = await mcp.serve(webRequest, state, legacy, parsed);
          return { response, body: await response.text() };
        };
        // Each message in an MCP span (method, tool, outcome) and the mcp.server.operation.duration histogram.
        const info = mcpRequestInfo(message, request.headers['mcp-protocol-version'] as string | undefined, (name) => toolNamed(name)?.name);
        const { response, body } = info ? await withMcpSpan(info, serve, (served) => mcpOutcomeOf(served.body)) : await serve();
        return sendWeb(reply, new Response(body.length > 0 ? body : null, { status: response.status, headers: response.headers }));
      },
    );

    const notAllowed = async (_request: FastifyRequest, reply: FastifyReply) => {
      void reply.header('allow', 'POST');
      throw new ServiceError('method-not-allowed', 'The MCP endpoint takes POST only: no server-initiated stream, no sessions');
    };
    // The CORS preflight a browser sends before a POST with an Authorization header.
    scope.options(
      MCP_PATH,
      {
        schema: {
          operationId: 'mcpPreflight',
          summary: 'CORS preflight for browser origins listed in MCP_ALLOWED_ORIGINS',
          description: 'No credentials needed. A listed `Origin` gets `Access-Control-Allow-Origin`, `-Methods: POST`, `-Headers` (the requested ones) and `-Max-Age`; an unlisted one 403 `origin-not-allowed`; no `Origin`: 204 with `Allow: POST`.',
          response: { 204: { description: 'Preflight answered', type: 'null' }, 403: errorBody('forbidden: the `Origin` is not allowed (`origin-not-allowed`)') },
        },
        config: { access: { auth: 'public' }, beforeAuth: originGate },
      },
      async (request, reply) => {
        void reply.header('allow', 'POST');
        if (request.headers.origin !== undefined) {
          const requested = request.headers['access-control-request-headers'];
          void reply.header('access-control-allow-methods', 'POST');
          void reply.header('access-control-allow-headers', typeof requested === 'string' && requested.trim() !== '' ? requested : CORS_ALLOWED_HEADERS);
          void reply.header('access-control-max-age', '600');
          void reply.header('vary', 'Origin, Access-Control-Request-Headers');
        }
        return reply.status(204).send();
      },
    );

    const closed = { summary: 'Not allowed (405): the endpoint has no server-initiated stream and no sessions', response: { 405: errorBody('method-not-allowed') } };
    scope.get(MCP_PATH, { schema: { ...closed, operationId: 'mcpGet' }, config: { access: { auth: 'public' } } }, notAllowed);
    scope.delete(MCP_PATH, { schema: { ...closed, operationId: 'mcpDelete' }, config: { access: { auth: 'public' } } }, notAllowed);
  });
}
