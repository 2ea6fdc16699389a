import { ServiceError } from '@planning/errors';
import { isScope, type Scope } from '@planning/plans';
import type { Principal } from '@planning/rpc';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayDeps } from './deps.js';
import { hashSessionToken } from './store/sessions.js';
import { sessionAllowed, type UserRecord } from './store/users.js';

export const SESSION_COOKIE = 'service_session';

/**
 * Who may call a route, declared on every `/api` route as `config.access`:
 * - `public`: anyone (login);
 * - `session`: a signed-in user only (a token gets 403: the endpoint is session-only);
 * - `token`: an API token only, holding `scope` (a session gets 403);
 * - `session-or-token`: a signed-in user, or an API token holding `scope`.
 * Workspace-level checks (membership, role, the token's workspace) happen in the service that
 * owns the resource; this is only the gateway's first gate.
 */
export type RouteAccess =
  | { auth: 'public' }
  | { auth: 'session' }
  | { auth: 'token'; scope: Scope | readonly Scope[] }
  | { auth: 'session-or-token'; scope: Scope | readonly Scope[] };

/** Why a request was denied, for its audit event; set where the decision is made. */
export interface DenialNote {
  /** Default `access.denied`. */
  type?: string;
  /** Kebab-case. */
  reason: string;
  actor?: { type: string; id: string };
  subject?: { type: string; id: string };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling; `anonymous` until a credential was accepted. */
    principal: Principal;
    denial?: DenialNote;
    /** The error the request failed with, as thrown (before the error handler). */
    failure?: unknown;
  }
  interface FastifyContextConfig {
    access?: RouteAccess;
    /**
     * A check that runs before authentication (and so before the rate limiter): it must neither
     * need nor spend a credential, e.g. the MCP endpoint's `Origin` check. It may throw.
     */
    beforeAuth?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
}

export const ANONYMOUS: Principal = { type: 'anonymous', id: 'anonymous', isAdmin: false, scopes: [] };

export function userPrincipal(user: UserRecord): Principal {
  return { type: 'user', id: user._id, userId: user._id, email: user.email, isAdmin: user.isAdmin, scopes: [] };
}

/** The user a session cookie stands for, or why it stands for nobody (an audit reason). */
export async function sessionUser(deps: GatewayDeps, cookie: string): Promise<{ user: UserRecord } | { denied: string }> {
  const session = await deps.sessions.get(hashSessionToken(cookie), deps.clock());
  const user = session ? await deps.users.findById(session.userId) : null;
  if (session && user && sessionAllowed(user, session.createdAt)) return { user };
  return { denied: !user ? 'invalid-session' : user.disabled ? 'user-disabled' : 'session-revoked' };
}

/** Resolves a presented API token to its principal, or throws `unauthorized`. */
export type TokenResolver = (token: string, request: FastifyRequest, reply: FastifyReply) => Promise<Principal>;

/** Notes why `request` is being denied (the audit event's reason); the caller throws the error. */
export function markDenial(request: FastifyRequest, note: DenialNote): void {
  request.denial = note;
}

/** The token a request presents: `Authorization: Bearer <token>` or `x-api-key: <token>`. */
export function presentedToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header === 'string' && header.length > 0) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) {
      markDenial(request, { type: 'auth.token.denied', reason: 'malformed-authorization' });
      throw new ServiceError('unauthorized', 'Authorization header must be "Bearer <token>"');
    }
    return match[1];
  }
  const apiKey = request.headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey.length > 0) return apiKey.trim();
  return undefined;
}

function scopesOf(access: RouteAccess): readonly Scope[] {
  if (access.auth !== 'token' && access.auth !== 'session-or-token') return [];
  return typeof access.scope === 'string' ? [access.scope] : access.scope;
}

/**
 * Registers authentication: every `/api` route must declare `config.access` (the app refuses to
 * start otherwise, so no endpoint is ever left open by accident); each request is authenticated
 * from its session cookie or API token and checked against the route's declaration.
 */
export function registerAuthentication(
  app: FastifyInstance,
  deps: GatewayDeps,
  options: { resolveToken?: TokenResolver } = {},
): void {
  app.decorateRequest('principal', null as unknown as Principal);

  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/api/')) return;
    const access = route.config?.access;
    if (!access) throw new Error(`route ${String(route.method)} ${route.url} declares no config.access`);
    for (const scope of scopesOf(access)) {
      if (!isScope(scope)) throw new Error(`route ${route.url} names unknown scope ${scope}`);
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    request.principal = ANONYMOUS;
    const beforeAuth = request.routeOptions.config.beforeAuth;
    if (beforeAuth) await beforeAuth(request, reply);
    const access = request.routeOptions.config.access;
    if (!access || access.auth === 'public') return;

    const token = presentedToken(request);
    if (token !== undefined) {
      if (!options.resolveToken) throw new ServiceError('unauthorized', 'API tokens are not accepted here');
      request.principal = await options.resolveToken(token, request, reply);
    } else {
      const cookie = request.cookies[SESSION_COOKIE];
      if (cookie) {
        const found = await sessionUser(deps, cookie);
        if ('user' in found) request.principal = userPrincipal(found.user);
        else markDenial(request, { type: 'auth.session.denied', reason: found.denied });
      }
    }

    const principal = request.principal;
    if (principal.type === 'anonymous') {
      if (!request.denial) markDenial(request, { reason: 'missing-credentials' });
      throw new ServiceError('unauthorized', access.auth === 'token' ? 'An API token is required' : 'Sign in first: a session is required');
    }
    if (access.auth === 'session' && principal.type !== 'user') {
      throw new ServiceError('forbidden', 'This endpoint needs a signed-in user session, not an API token', {
        reason: 'session-required',
      });
    }
    if (access.auth === 'token' && principal.type !== 'api-key') {
      throw new ServiceError('forbidden', 'This endpoint is for API tokens', { reason: 'token-required' });
    }
    if (principal.type === 'api-key') {
      const missing = scopesOf(access).filter((s) => !principal.scopes.includes(s));
      if (missing.length > 0) {
        throw new ServiceError('forbidden', `The token lacks the scope ${missing.map((s) => `'${s}'`).join(', ')}`, {
          reason: 'missing-scope',
        });
      }
    }
  });

  app.addHook('onError', (request, _reply, error, done) => {
    request.failure = error;
    done();
  });

  // Every 401 and 403 the gateway answers (its own, and those services return over gRPC) is an
  // audit event; the auditor bounds the volume.
  app.addHook('onResponse', (request, reply, done) => {
    const status = reply.statusCode;
    if ((status === 401 || status === 403 || request.denial) && request.url.startsWith('/api/')) {
      const denial = describeDenial(request, status);
      deps.audit.record(denial, request.ip).catch((err: unknown) => {
        request.log.error({ err }, 'could not record an audit event');
      });
    }
    done();
  });
}

const AUDIT_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

function actorOf(principal: Principal): { type: string; id: string } {
  if (principal.type === 'api-key') return { type: 'api-key', id: principal.keyId ?? principal.id };
  return { type: principal.type, id: principal.userId ?? principal.id };
}

/** The workspace a request names (path `:id` under /api/workspaces, or a `workspaceId` field), if it looks like an id. */
function workspaceNamed(request: FastifyRequest): string | undefined {
  const params = (request.params ?? {}) as Record<string, unknown>;
  const query = (request.query ?? {}) as Record<string, unknown>;
  const body = (request.body && typeof request.body === 'object' ? request.body : {}) as Record<string, unknown>;
  const route = request.routeOptions.url ?? '';
  const candidates = [route.startsWith('/api/workspaces/:id') ? params.id : undefined, query.workspaceId, body.workspaceId];
  return candidates.find((c): c is string => typeof c === 'string' && AUDIT_ID.test(c));
}

function describeDenial(request: FastifyRequest, status: number): Required<Pick<DenialNote, 'reason' | 'actor' | 'subject'>> & { type: string; workspaceId?: string } {
  const note = request.denial;
  const failure = request.failure;
  const fromError =
    failure instanceof ServiceError ? (failure.details.reason && /^[a-z0-9-]{1,64}$/.test(failure.details.reason) ? failure.details.reason : failure.code) : undefined;
  const reason = note?.reason ?? fromError ?? (status === 401 ? 'unauthorized' : 'forbidden');
  const principal = request.principal ?? ANONYMOUS;
  const workspaceId = principal.type === 'api-key' ? principal.workspaceId : workspaceNamed(request);
  const routeId = `${request.method.toLowerCase()}:${(request.routeOptions.url ?? 'unknown').replace(/^\/api\//, '').replace(/\//g, '.')}`;
  return {
    type: note?.type ?? 'access.denied',
    reason,
    actor: note?.actor ?? actorOf(principal),
    subject: note?.subject ?? (workspaceId ? { type: 'workspace', id: workspaceId } : { type: 'endpoint', id: routeId.slice(0, 128) }),
    ...(workspaceId ? { workspaceId } : {}),
  };
}
