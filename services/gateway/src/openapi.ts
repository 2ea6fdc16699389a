import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { ERROR_CODES } from '@planning/errors';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { RouteAccess } from './auth.js';

/**
 * The OpenAPI document at `/docs/json` (UI at `/docs`), built from the route schemas. Every
 * `/api` route gets the error responses its access declaration implies (401, 403, 404, 429, 400,
 * 500, 503) in the one error envelope, unless it declares them itself, so the document covers
 * every endpoint's errors even when a route author only wrote the success schema.
 *
 * Response schemas also serialize: a success schema lists every property the route returns
 * (undeclared ones would be dropped), which the route tests check against real responses.
 */

export const ERROR_BODY_ID = 'ErrorBody';

const errorBodySchema = {
  $id: ERROR_BODY_ID,
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
        reason: { type: 'string', description: 'Refines the code, e.g. `missing-scope`, `active-claim`.' },
        field: { type: 'string', description: 'The request field that was wrong (invalid-input).' },
        quota: {
          type: 'object',
          description: 'With quota-exceeded: the redacted quota.',
          required: ['kind', 'limit', 'used', 'resetsAt'],
          properties: {
            kind: { type: 'string' },
            limit: { type: 'number' },
            used: { type: 'number' },
            resetsAt: { type: 'string', format: 'date-time' },
          },
        },
        failedIds: { type: 'array', items: { type: 'string' } },
        missingCheckIds: { type: 'array', items: { type: 'string' }, description: 'With reason evidence-missing: the acceptance checks without evidence.' },
      },
    },
  },
} as const;

/** `{ data: <schema> }`. */
export function ok(data: object, description = 'Success') {
  return { description, type: 'object', required: ['data'], properties: { data } };
}

/** `{ data: [<item>], page: { nextCursor } }` (DECISIONS §11). */
export function page(item: object, description = 'A page of results') {
  return {
    description,
    type: 'object',
    required: ['data', 'page'],
    properties: {
      data: { type: 'array', items: item },
      page: { type: 'object', required: ['nextCursor'], properties: { nextCursor: { type: ['string', 'null'] } } },
    },
  };
}

const str = { type: 'string' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const nullableTime = { type: ['string', 'null'], format: 'date-time' } as const;

export const userSchema = {
  type: 'object',
  required: ['id', 'email', 'name', 'isAdmin', 'disabled', 'createdAt', 'updatedAt'],
  properties: { id: str, email: str, name: str, isAdmin: { type: 'boolean' }, disabled: { type: 'boolean' }, createdAt: time, updatedAt: time },
} as const;

export const workspaceSchema = {
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
    version: { type: 'integer' },
    doneRequires: { type: 'string', enum: ['nothing', 'evidence', 'evidence-and-approval'], description: 'The done policy (docs/planning.md).' },
    doneGate: { type: 'string', enum: ['done', 'in-review'] },
  },
} as const;

export const memberSchema = {
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
} as const;

const rateLimitSchema = {
  type: 'object',
  required: ['requestsPerMinute', 'burst'],
  properties: { requestsPerMinute: { type: 'integer' }, burst: { type: 'integer' } },
} as const;

export const apiKeySchema = {
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
} as const;

export const agentSchema = {
  type: 'object',
  required: ['workspaceId', 'agentId', 'createdAt', 'createdBy'],
  properties: { workspaceId: str, agentId: str, createdAt: time, createdBy: str },
} as const;

const ERROR_TEXT: Record<number, string> = {
  400: 'invalid-input: a field is missing or malformed (`error.field` names it)',
  401: 'unauthorized: no, an invalid, revoked or disabled session or token',
  403: 'forbidden (role, scope, session-only, plan without API access) or quota-exceeded (with `error.quota`)',
  404: 'not-found: the resource does not exist, or belongs to a workspace the token cannot see',
  429: 'rate-limited: the token used up its burst; see `Retry-After` and the `RateLimit` fields',
  500: 'internal: an unexpected failure (no details)',
  503: 'unavailable: a backend cannot be reached',
};

/** The documented error response for `status`, in the shared envelope. */
export function errorResponse(status: number) {
  return { description: ERROR_TEXT[status], $ref: `${ERROR_BODY_ID}#` };
}

function scopesOf(access: RouteAccess): string[] {
  if (access.auth !== 'token' && access.auth !== 'session-or-token') return [];
  return typeof access.scope === 'string' ? [access.scope] : [...access.scope];
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

const ID_FIELD = /(^id$|Id$|Ids$)/;

function namesIds(schema: unknown): boolean {
  const properties = (schema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return !!properties && Object.keys(properties).some((k) => ID_FIELD.test(k));
}

/** Fills in the documented errors, security and tags of an `/api` route. */
export function documentRoute(route: RouteOptions): void {
  if (!route.url.startsWith('/api/')) return;
  const access = route.config?.access;
  if (!access) return;
  const schema = (route.schema ??= {}) as Record<string, unknown>;
  const response = { ...((schema.response as Record<string, unknown> | undefined) ?? {}) };
  const add = (status: number) => {
    if (response[status] === undefined && response[String(status)] === undefined) response[status] = errorResponse(status);
  };
  if (schema.body || schema.querystring || schema.params) add(400);
  if (access.auth !== 'public') {
    add(401);
    add(403);
    if (route.url.includes(':') || namesIds(schema.querystring) || namesIds(schema.body)) add(404);
  }
  if (access.auth === 'token' || access.auth === 'session-or-token') add(429);
  add(500);
  add(503);
  schema.response = response;
  const text = accessText(access);
  schema.description = schema.description ? `${String(schema.description)}\n\n${text}` : text;
  schema.tags ??= [route.url.split('/')[2] ?? 'api'];
  if (schema.security === undefined) {
    const session = [{ sessionCookie: [] }];
    const token = [{ bearerToken: [] }, { apiKeyHeader: [] }];
    schema.security =
      access.auth === 'public' ? [] : access.auth === 'session' ? session : access.auth === 'token' ? token : [...session, ...token];
  }
}

/** Registers the shared schemas, the route documenter and the OpenAPI document and UI. Call before any route. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  app.addSchema(errorBodySchema);
  app.addHook('onRoute', documentRoute);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Planning service API',
        version: '1',
        description: 'Work planning for AI coding agents and the people who direct them. See docs/auth.md for access rules.',
      },
      components: {
        securitySchemes: {
          sessionCookie: { type: 'apiKey', in: 'cookie', name: 'service_session' },
          bearerToken: { type: 'http', scheme: 'bearer', description: 'An API token (`svc_...`).' },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        },
      },
    },
    refResolver: {
      buildLocalReference(json, _baseUri, _fragment, i) {
        return typeof json.$id === 'string' ? json.$id : `def-${i}`;
      },
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
}
