import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { ERROR_CODES, ERROR_TABLE, type ErrorCode } from '@planning/errors';
import { SCOPES, type Scope } from '@planning/plans';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { RouteAccess } from './auth.js';
import successExamples from './openapi-examples.json' with { type: 'json' };

/**
 * The OpenAPI document at `/docs/json` (UI at `/docs`), built from the route schemas, and the
 * conventions every `/api` route follows so that a generator can trust it (docs/api.md, "The
 * OpenAPI document"; `openapi.test.ts` fails when a route breaks one):
 *
 * - `schema.operationId` (camelCase, unique) and `schema.summary` on every operation; the tag
 *   comes from the path (`TAGS`, overridable with `schema.tags`).
 * - Object schemas used by more than one route are components: declare them once with
 *   `component('Name', schema)` and use the reference it returns. Response schemas also
 *   serialize, so they list every property the route returns.
 * - Errors: the statuses and codes a route's access declaration implies (401/403 for signed-in
 *   routes, 429 and `quota-exceeded` for token routes, 400 and 413 for routes with inputs, 404
 *   for routes naming ids, 500 and 503 always) are added here; a route declares the others with
 *   `errors('work-already-claimed', ...)`. Each error response lists its codes (`oneOf` the
 *   per-code schemas) and headers (`RateLimit`, `RateLimit-Policy`, `Retry-After`,
 *   `WWW-Authenticate`).
 * - Security: the schemes the access declaration allows, with the scopes a token needs.
 */

export const ERROR_BODY_ID = 'ErrorBody';

// ---- components ------------------------------------------------------------------------------

const components = new Map<string, object>();
const componentNames = new WeakMap<object, string>();

/**
 * Declares `schema` as `#/components/schemas/<name>` and returns it unchanged: routes use it
 * inline (validation and serialization need nothing more, so a test can register one route
 * module on a bare app), and the document refers to the component wherever the same object
 * appears.
 */
export function component<T extends object>(name: string, schema: T): T {
  const existing = components.get(name);
  if (existing !== undefined && existing !== schema) throw new Error(`OpenAPI component '${name}' is declared twice`);
  components.set(name, schema);
  componentNames.set(schema, name);
  return schema;
}

const describedComponents = new WeakMap<object, string>();

/** A component with a description of its own where it is used: `{ $ref, description }` in the document. */
export function described<T extends object>(schema: T, description: string): T & { description: string } {
  const copy = { ...schema, description };
  const name = componentNames.get(schema);
  if (name !== undefined) describedComponents.set(copy, name);
  return copy;
}

/** `node` with every declared component in it (but `self`) replaced by a reference to it. */
function referenced(node: unknown, self?: object): unknown {
  if (Array.isArray(node)) return node.map((n: unknown) => referenced(n));
  if (node === null || typeof node !== 'object') return node;
  const name = node === self ? undefined : componentNames.get(node);
  if (name !== undefined) return { $ref: `#/components/schemas/${name}` };
  const describedName = describedComponents.get(node);
  if (describedName !== undefined) return { $ref: `#/components/schemas/${describedName}`, description: (node as { description: string }).description };
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, referenced(v)]));
}

/** Every declared component, as the document's `components.schemas` (OpenAPI 3.1 takes JSON Schema as is). */
function componentSchemas(): Record<string, unknown> {
  return Object.fromEntries([...components].map(([name, schema]) => [name, referenced(schema, schema)]));
}

const str = { type: 'string' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const nullableTime = { type: ['string', 'null'], format: 'date-time' } as const;
const count = { type: 'integer', minimum: 0 } as const;

const errorBodySchema = component(ERROR_BODY_ID, {
  type: 'object',
  description: 'The error envelope of every failed request.',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      additionalProperties: true,
      properties: {
        code: { type: 'string', enum: [...ERROR_CODES] },
        message: { type: 'string' },
        reason: { type: 'string', description: 'Refines the code, e.g. `missing-scope`, `active-claim`; every 409 has one.' },
        field: { type: 'string', description: 'The request field that was wrong (`invalid-input`), e.g. `limit`, `body.title`, `url`.' },
        quota: {
          type: 'object',
          description: 'With quota-exceeded: the redacted quota.',
          required: ['kind', 'limit', 'used', 'resetsAt'],
          properties: {
            kind: str,
            limit: { type: 'number' },
            used: { type: 'number' },
            resetsAt: { type: ['string', 'null'], format: 'date-time' },
          },
        },
        failedIds: { type: 'array', items: str, description: 'Ids that failed a bulk preflight.' },
        requestId: { type: 'string', description: 'With 500 and 503: the request, as the service logged it (quote it when reporting the problem).' },
        missingCheckIds: { type: 'array', items: { type: 'string' }, description: 'With reason evidence-missing: the acceptance checks without evidence.' },
      },
    },
  },
});

export const pageInfo = component('PageInfo', {
  type: 'object',
  required: ['nextCursor'],
  properties: { nextCursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last.' } },
});

/** `{ data: <schema> }`. */
export function ok(data: object, description = 'Success') {
  return { description, type: 'object', required: ['data'], properties: { data } };
}

/** `{ data: [<item>], page: { nextCursor } }` (decisions §11: at most 500 items). */
export function page(item: object, description = 'A page of results') {
  return {
    description,
    type: 'object',
    required: ['data', 'page'],
    properties: { data: { type: 'array', maxItems: 500, items: item }, page: pageInfo },
  };
}

export const userSchema = component('User', {
  type: 'object',
  required: ['id', 'email', 'name', 'isAdmin', 'disabled', 'createdAt', 'updatedAt'],
  properties: { id: str, email: str, name: str, isAdmin: { type: 'boolean' }, disabled: { type: 'boolean' }, createdAt: time, updatedAt: time },
});

export const workspaceSchema = component('Workspace', {
  type: 'object',
  required: ['id', 'name', 'slug', 'status', 'ownerId', 'defaultSandbox', 'planId', 'createdAt', 'updatedAt', 'version', 'doneRequires', 'doneGate'],
  properties: {
    id: str,
    name: str,
    slug: str,
    status: { type: 'string', enum: ['active', 'suspended', 'archived'] },
    ownerId: str,
    defaultSandbox: str,
    planId: { type: 'string', enum: ['free', 'beginner', 'hobbyist', 'pro', 'enterprise'] },
    createdAt: time,
    updatedAt: time,
    version: count,
    doneRequires: { type: 'string', enum: ['nothing', 'evidence', 'evidence-and-approval'], description: 'The done policy (docs/planning.md).' },
    doneGate: { type: 'string', enum: ['done', 'in-review'] },
  },
});

export const memberSchema = component('Member', {
  type: 'object',
  required: ['workspaceId', 'userId', 'role', 'email', 'name', 'createdAt', 'updatedAt'],
  properties: {
    workspaceId: str,
    userId: str,
    role: { type: 'string', enum: ['owner', 'admin', 'member', 'viewer'] },
    email: { type: ['string', 'null'] },
    name: { type: ['string', 'null'] },
    createdAt: time,
    updatedAt: time,
  },
});

export const rateLimitSchema = component('RateLimit', {
  type: 'object',
  required: ['requestsPerMinute', 'burst'],
  properties: { requestsPerMinute: count, burst: count },
});

export const apiKeySchema = component('ApiKey', {
  type: 'object',
  required: ['id', 'workspaceId', 'agentId', 'scopes', 'rateLimit', 'label', 'actorType', 'planId', 'createdBy', 'createdAt', 'lastUsedAt', 'revokedAt', 'disabled'],
  properties: {
    id: str,
    workspaceId: str,
    agentId: str,
    scopes: { type: 'array', items: str },
    rateLimit: rateLimitSchema,
    label: str,
    actorType: { type: 'string', enum: ['agent', 'automation', 'user-integration'] },
    planId: str,
    createdBy: str,
    createdAt: time,
    lastUsedAt: nullableTime,
    revokedAt: nullableTime,
    disabled: { type: 'boolean' },
  },
});

/** A typed reference: an audit actor or subject, an activity's actor. */
export const entityRefSchema = component('EntityRef', { type: 'object', required: ['type', 'id'], properties: { type: str, id: str } });

export const agentSchema = component('Agent', {
  type: 'object',
  required: ['workspaceId', 'agentId', 'createdAt', 'createdBy'],
  properties: { workspaceId: str, agentId: str, createdAt: time, createdBy: str },
});

// ---- errors ----------------------------------------------------------------------------------

const CODE_TEXT: Record<ErrorCode, string> = {
  'invalid-input': 'a field is missing, malformed, of the wrong type or out of bounds (`error.field` names it)',
  unauthorized: 'no session or token, or an invalid, expired, revoked or disabled one',
  forbidden: 'the caller lacks the role, the scope or API access (`error.reason` says which)',
  'not-found': 'the resource does not exist, or belongs to a workspace the caller cannot see',
  'work-already-claimed': 'the request conflicts with the current state (`error.reason` says how)',
  'quota-exceeded': 'a monthly plan quota is used up (`error.quota`)',
  'rate-limited': 'too many requests: retry after `Retry-After` seconds',
  'not-entitled': "the workspace's plan does not include this",
  'method-not-allowed': 'the path does not take this method',
  'payload-too-large': 'the body is larger than this route accepts',
  'uri-too-long': 'the request line (path and query) is longer than 8 KiB',
  'headers-too-large': 'the request headers are larger than 16 KiB',
  internal: 'an unexpected failure inside the service (no details)',
  unavailable: 'a backend could not be reached, or the service is shutting down: retry later',
};

/** An example body per code, for the document. */
const ERROR_EXAMPLES: Record<ErrorCode, Record<string, unknown>> = {
  'invalid-input': { message: "Invalid querystring field 'limit': must be <= 200", field: 'limit' },
  unauthorized: { message: 'Sign in first: a session is required' },
  forbidden: { message: "The token lacks the scope 'issues:write'", reason: 'missing-scope' },
  'not-found': { message: 'Issue not found' },
  'work-already-claimed': { message: 'The task is claimed by another agent', reason: 'active-claim' },
  'quota-exceeded': { message: "The workspace's monthly imports quota is used up", quota: { kind: 'imports', limit: 50, used: 50, resetsAt: '2026-12-01T00:00:00.000Z' } },
  'rate-limited': { message: 'Too many requests: retry in 2 s' },
  'not-entitled': { message: "The plan 'beginner' does not include csv exports" },
  'method-not-allowed': { message: 'The MCP endpoint takes POST only' },
  'payload-too-large': { message: 'Request body is too large', field: 'body' },
  'uri-too-long': { message: 'The request line (path and query) is longer than 8192 bytes', field: 'url' },
  'headers-too-large': { message: 'The request headers are larger than 16384 bytes', field: 'headers' },
  internal: { message: 'The service failed to complete GET /api/issues', requestId: 'req_5f0c2a9e1b7d4c3a' },
  unavailable: { message: 'The issues service cannot be reached; try again shortly', requestId: 'req_5f0c2a9e1b7d4c3a' },
};

/** The code a status means when a route names no other. */
const DEFAULT_CODE: Record<number, ErrorCode> = {
  400: 'invalid-input',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not-found',
  405: 'method-not-allowed',
  409: 'work-already-claimed',
  413: 'payload-too-large',
  429: 'rate-limited',
  500: 'internal',
  503: 'unavailable',
};

/** The codes of each response `errorResponse` made, and whether its description was written for it. */
const declaredCodes = new WeakMap<object, { codes: ErrorCode[]; written: boolean }>();

/** The documented error response for `status` in the shared envelope, with the codes it may carry. */
export function errorResponse(status: number, codes: readonly ErrorCode[] = [DEFAULT_CODE[status] ?? 'internal'], description?: string) {
  // The envelope inline (no reference to resolve, so a bare app can serialize it); the document
  // names the per-code schemas instead (finishDocument).
  const response = { ...errorBodySchema, description: description ?? codes.map((c) => `\`${c}\`: ${CODE_TEXT[c]}`).join('; or ') };
  declaredCodes.set(response, { codes: [...codes], written: description !== undefined });
  return response;
}

/** Error responses for `codes` (grouped by their HTTP status), for a route's `schema.response`. */
export function errors(...codes: ErrorCode[]): Record<number, ReturnType<typeof errorResponse>> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = ERROR_TABLE[code].http;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return Object.fromEntries([...byStatus].map(([status, list]) => [status, errorResponse(status, list)]));
}

function isErrorStatus(status: string): boolean {
  return /^[45]\d\d$/.test(status);
}

function errorComponentName(code: ErrorCode): string {
  return `${code.replace(/(^|-)([a-z])/g, (_m, _d, c: string) => c.toUpperCase())}Error`;
}

// ---- tags, security, documented defaults --------------------------------------------------------

const SCOPE_TEXT: Record<Scope, string> = {
  'issues:read': 'Read tasks and what accumulates on them',
  'issues:write': 'Create and change tasks, comments, time, evidence, approvals',
  'projects:read': 'Read projects, milestones, programs, initiatives',
  'projects:write': 'Create and change projects, milestones, programs, initiatives',
  'agents:read': 'Read ready work, claims and agents',
  'agents:execute': 'Claim work and act under a claim',
  'billing:read': 'Read quota use',
  admin: 'Administer the workspace: keys, imports, exports, diagnostics, grants',
};

/** Every tag an operation may carry, in the order the reference lists them. */
export const TAGS: ReadonlyArray<{ name: string; description: string }> = [
  { name: 'auth', description: 'Sign-in, sign-out, the session and password changes' },
  { name: 'users', description: 'The user directory (system administrators)' },
  { name: 'workspaces', description: 'Workspaces, their plans and agents' },
  { name: 'members', description: 'Workspace members and roles' },
  { name: 'api-keys', description: 'Scoped API tokens for agents and automations' },
  { name: 'billing', description: 'Plan quotas and their use' },
  { name: 'projects', description: 'Projects of a workspace' },
  { name: 'milestones', description: 'Milestones of a project' },
  { name: 'programs', description: 'Programs: groups of initiatives' },
  { name: 'initiatives', description: 'Initiatives: groups of projects, with goals and context packs' },
  { name: 'issues', description: 'Tasks ("issues" on the wire), their records and task contracts' },
  { name: 'agents', description: 'Ready work, claims and leases, agent guidance' },
  { name: 'imports', description: 'JSON issue imports: preview, then commit' },
  { name: 'exports', description: 'Plan-gated issue exports and their redacted history' },
  { name: 'guidance', description: 'Workspace customization, working standards and launch readiness' },
  { name: 'knowledgebase', description: 'Knowledge documents agents can search' },
  { name: 'admin', description: 'Diagnostics and the audit trail' },
  { name: 'mcp', description: 'The remote MCP endpoint (JSON-RPC 2.0 over Streamable HTTP)' },
  { name: 'oauth', description: 'OAuth grants of MCP sign-in: list and revoke' },
];
const TAG_NAMES = new Set(TAGS.map((t) => t.name));

/** Paths whose tag is not their first segment after `/api/`. */
const TAG_BY_PREFIX: ReadonlyArray<[string, string]> = [
  ['/api/issues/export', 'exports'],
  ['/api/workspaces/:id/members', 'members'],
  ['/api/workspaces/:id/customization', 'guidance'],
  ['/api/workspaces/:id/standards', 'guidance'],
  ['/api/workspaces/:id/launch-readiness', 'guidance'],
];

function tagOf(url: string): string {
  return TAG_BY_PREFIX.find(([prefix]) => url.startsWith(prefix))?.[1] ?? url.split('/')[2] ?? 'api';
}

function scopesOf(access: RouteAccess): string[] {
  if (access.auth !== 'token' && access.auth !== 'session-or-token') return [];
  return typeof access.scope === 'string' ? [access.scope] : [...access.scope];
}

function acceptsTokens(access: RouteAccess): boolean {
  return access.auth === 'token' || access.auth === 'session-or-token';
}

function accessText(access: RouteAccess): string {
  switch (access.auth) {
    case 'public':
      return 'Access: anyone.';
    case 'session':
      return 'Access: a signed-in session only (API tokens get 403).';
    case 'token':
      return `Access: an API token with ${scopesOf(access).map((s) => `\`${s}\``).join(' and ')}.`;
    case 'session-or-token':
      return `Access: a signed-in session, or an API token with ${scopesOf(access).map((s) => `\`${s}\``).join(' and ')}.`;
  }
}

/** OpenAPI security requirements; a token's requirement lists the scopes it needs (OpenAPI 3.1 roles). */
function securityOf(access: RouteAccess): Array<Record<string, string[]>> {
  const session: Array<Record<string, string[]>> = [{ sessionCookie: [] }];
  const token: Array<Record<string, string[]>> = [{ bearerToken: scopesOf(access) }, { apiKeyHeader: scopesOf(access) }, { oauth2: scopesOf(access) }];
  switch (access.auth) {
    case 'public':
      return [{}];
    case 'session':
      return session;
    case 'token':
      return token;
    case 'session-or-token':
      return [...session, ...token];
  }
}

const ID_FIELD = /(^id$|Id$|Ids$)/;

function namesIds(schema: unknown): boolean {
  const properties = (schema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return !!properties && Object.keys(properties).some((k) => ID_FIELD.test(k));
}

/**
 * Fills in the documented errors (with their codes, in `x-error-codes` until `finishDocument`
 * turns them into schemas), security and tag of an `/api` route.
 */
export function documentRoute(route: RouteOptions): void {
  if (!route.url.startsWith('/api/')) return;
  const access = route.config?.access;
  if (!access) return;
  const schema = (route.schema ??= {}) as Record<string, unknown>;
  const response = { ...((schema.response as Record<string, unknown> | undefined) ?? {}) };
  const codes = new Map<string, Set<ErrorCode>>();
  const need = (code: ErrorCode) => {
    const status = String(ERROR_TABLE[code].http);
    codes.set(status, (codes.get(status) ?? new Set()).add(code));
  };
  for (const [status, declared] of Object.entries(response)) {
    if (!isErrorStatus(status) || typeof declared !== 'object' || declared === null) continue;
    const list = declaredCodes.get(declared)?.codes ?? (DEFAULT_CODE[Number(status)] ? [DEFAULT_CODE[Number(status)]!] : []);
    for (const code of list) codes.set(status, (codes.get(status) ?? new Set()).add(code));
  }
  if (schema.body || schema.querystring || schema.params || schema.headers) need('invalid-input');
  if (schema.body) need('payload-too-large');
  if (access.auth !== 'public') {
    need('unauthorized');
    need('forbidden');
    if (route.url.includes(':') || namesIds(schema.querystring) || namesIds(schema.body)) need('not-found');
  }
  if (acceptsTokens(access)) {
    // Every token request passes the rate limiter and counts against the monthly API quota.
    need('rate-limited');
    need('quota-exceeded');
  }
  need('internal');
  need('unavailable');
  for (const [status, list] of codes) {
    const declared = response[status] as object | undefined;
    // A description the route wrote stays; a generated one names every code the status carries.
    if (declared === undefined || declaredCodes.get(declared)?.written === false) response[status] = errorResponse(Number(status), [...list]);
  }
  schema.response = response;
  schema['x-error-codes'] = Object.fromEntries([...codes].map(([status, list]) => [status, [...list]]));
  const text = accessText(access);
  schema.description = schema.description ? `${String(schema.description)}\n\n${text}` : text;
  schema.tags ??= [tagOf(route.url)];
  schema.security ??= securityOf(access);
}

// ---- the document -------------------------------------------------------------------------------

type Json = Record<string, unknown>;

const HEADERS: Json = {
  RateLimit: {
    description: 'IETF RateLimit fields for the token\'s bucket: `"burst";r=<remaining>;t=<seconds until a request can pass>`. Sent on answers to API tokens.',
    schema: { type: 'string', maxLength: 100, examples: ['"burst";r=119;t=0'] },
  },
  'RateLimit-Policy': {
    description: 'The token\'s bucket: `"burst";q=<burst>;w=60`. Sent on answers to API tokens.',
    schema: { type: 'string', maxLength: 100, examples: ['"burst";q=120;w=60'] },
  },
  'Retry-After': {
    description: 'Seconds to wait before retrying.',
    schema: { type: 'integer', format: 'int32', minimum: 1, maximum: 86400 },
  },
  'WWW-Authenticate': {
    description: 'The challenge of a 401 (RFC 9110): `Bearer realm="planning-service"`, with `error="invalid_token"` when a token was presented and refused.',
    schema: { type: 'string', maxLength: 500 },
  },
};

const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });
const schemaRef = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const INT32 = 2 ** 31;

/** Every integer schema says its width (`int32` when its bounds fit, else `int64`), as generators want. */
function withIntegerFormats(node: unknown): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const item of node) withIntegerFormats(item);
    return;
  }
  const schema = node as Json;
  const integer = schema.type === 'integer' || (Array.isArray(schema.type) && schema.type.includes('integer'));
  if (integer && schema.format === undefined) {
    const fits = typeof schema.minimum === 'number' && typeof schema.maximum === 'number' && schema.minimum >= -INT32 && schema.maximum < INT32;
    schema.format = fits ? 'int32' : 'int64';
  }
  for (const value of Object.values(schema)) withIntegerFormats(value);
}

/**
 * The last pass over the generated document: error responses as `oneOf` their per-code schemas,
 * response headers, the per-code components. Operations are as `documentRoute` left them.
 */
export function finishDocument(document: Json): Json {
  const schemas = ((document.components as Json).schemas ??= {}) as Json;
  for (const code of ERROR_CODES) {
    schemas[errorComponentName(code)] = {
      description: `\`${code}\` (HTTP ${ERROR_TABLE[code].http}): ${CODE_TEXT[code]}.`,
      examples: [{ error: { code, ...ERROR_EXAMPLES[code] } }],
      allOf: [
        schemaRef(ERROR_BODY_ID),
        {
          type: 'object',
          properties: {
            error: {
              type: 'object',
              properties: { code: { const: code } },
              ...(code === 'work-already-claimed' ? { required: ['reason'] } : code === 'quota-exceeded' ? { required: ['quota'] } : {}),
            },
          },
        },
      ],
    };
  }
  (document.components as Json).headers = HEADERS;
  withIntegerFormats(document);

  for (const operations of Object.values((document.paths ?? {}) as Record<string, Json>)) {
    for (const operation of Object.values(operations) as Json[]) {
      if (typeof operation !== 'object' || operation === null || !('responses' in operation)) continue;
      const codes = (operation['x-error-codes'] ?? {}) as Record<string, ErrorCode[]>;
      delete operation['x-error-codes'];
      // fastify-swagger marks every body required; one whose schema accepts null may be left out.
      const body = operation.requestBody as { required?: boolean; content?: Record<string, { schema?: { type?: unknown } }> } | undefined;
      const bodyType = body?.content?.['application/json']?.schema?.type;
      if (body && Array.isArray(bodyType) && bodyType.includes('null')) body.required = false;
      const security = JSON.stringify(operation.security ?? []);
      const tokens = security.includes('bearerToken');
      for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
        const list = codes[status];
        if (list && list.length > 0) {
          const refs = list.map((code) => schemaRef(errorComponentName(code)));
          response.content = { 'application/json': { schema: refs.length === 1 ? refs[0] : { oneOf: refs } } };
        }
        const headers = (response.headers ?? {}) as Json;
        if (tokens && /^[24]/.test(status) && status !== '401') {
          headers.RateLimit = headerRef('RateLimit');
          headers['RateLimit-Policy'] = headerRef('RateLimit-Policy');
        }
        if (status === '429') headers['Retry-After'] = headerRef('Retry-After');
        if (status === '401') headers['WWW-Authenticate'] = headerRef('WWW-Authenticate');
        if (Object.keys(headers).length > 0) response.headers = headers;
        // An answer the service gave (scripts/capture-openapi-examples.mjs); Spectral checks it against the schema.
        const example = SUCCESS_EXAMPLES[operation.operationId as string];
        const media = (response.content as Record<string, Json> | undefined)?.['application/json'];
        if (example && example.status === status && media) media.example = example.body;
      }
    }
  }
  return document;
}

/** Success answers of the main flow, captured from the running service, by operationId. */
const SUCCESS_EXAMPLES = successExamples as Record<string, { status: string; body: unknown }>;

/** Registers the shared schemas, the route documenter and the OpenAPI document and UI. Call before any route. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  // Routes that document an error response as a reference (`ErrorBody#`) need it at run time; the
  // other components are only for the document (added to it directly: as run-time schemas every
  // route's serializer would compile them all, and the gateway would take seconds longer to start).
  app.addSchema({ ...errorBodySchema, $id: ERROR_BODY_ID });
  app.addHook('onRoute', (route) => {
    documentRoute(route);
    const tags = (route.schema as { tags?: string[] } | undefined)?.tags ?? [];
    for (const tag of tags) if (!TAG_NAMES.has(tag)) throw new Error(`route ${route.url} has the undeclared tag '${tag}' (add it to TAGS in openapi.ts)`);
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Planning service API',
        version: '1',
        description:
          'Work planning for AI coding agents and the people who direct them. Every success is `{ data }` ' +
          '(lists add `page`), every failure `{ error: { code, message, field?, reason? } }`. ' +
          'See docs/api.md and docs/auth.md in the repository.',
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      },
      servers: [
        {
          url: '{scheme}://{host}',
          description: 'Where the service runs (the all-in-one default is http://localhost:8080)',
          variables: { scheme: { enum: ['https', 'http'], default: 'https' }, host: { default: 'localhost:8080' } },
          // OWASP API9: say who the server is for (the public API, not an internal one).
          ...({ 'x-internal': false } as object),
        },
      ],
      tags: [...TAGS],
      components: {
        schemas: componentSchemas() as never,
        securitySchemes: {
          sessionCookie: { type: 'apiKey', in: 'cookie', name: 'service_session', description: 'The session cookie `POST /api/auth/login` sets.' },
          bearerToken: { type: 'http', scheme: 'bearer', bearerFormat: 'svc_ API token', description: 'An API token (`svc_...`) as `Authorization: Bearer <token>`.' },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The same API token in the `x-api-key` header.' },
          oauth2: {
            type: 'oauth2',
            description:
              'MCP sign-in: OAuth 2.1 authorization code with PKCE on the built-in authorization server (its metadata at ' +
              '`/.well-known/oauth-authorization-server`; URLs here are relative to the server), or on the external issuer ' +
              'the deployment trusts (`/.well-known/oauth-protected-resource/api/mcp` names it). The access token goes in ' +
              '`Authorization: Bearer` and carries the scopes an API token would; see docs/mcp.md. The built-in server\'s ' +
              'tokens are opaque; an external issuer\'s JWTs are handled per RFC8725 (JWT best current practices): the ' +
              'signature is checked against the issuer\'s JWKS with the key\'s own algorithm (never `none`), and the ' +
              'issuer, the audience (the MCP URL) and the expiry are checked.',
            flows: {
              authorizationCode: {
                authorizationUrl: '/oauth/authorize',
                tokenUrl: '/oauth/token',
                refreshUrl: '/oauth/token',
                scopes: Object.fromEntries(SCOPES.map((scope) => [scope, SCOPE_TEXT[scope]])),
              },
            },
          },
        },
      },
    },
    refResolver: {
      buildLocalReference(json, _baseUri, _fragment, i) {
        return typeof json.$id === 'string' ? json.$id : `def-${i}`;
      },
    },
    transform: ({ schema, url }) => ({ schema: referenced(schema) as typeof schema, url }),
    transformObject: (documentObject) => finishDocument((documentObject as { openapiObject: Json }).openapiObject),
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
}
