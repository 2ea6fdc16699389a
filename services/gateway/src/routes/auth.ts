import { ServiceError } from '@planning/errors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { markDenial, SESSION_COOKIE } from '../auth.js';
import type { GatewayDeps } from '../deps.js';
import { errorResponse, ok, userSchema } from '../openapi.js';
import { hashPassword, verifyPassword } from '../identity/passwords.js';
import { hashSessionToken, newSessionRecord, newSessionToken } from '../store/sessions.js';
import { toPublicUser, type UserRecord } from '../store/users.js';
import { safeRedirect } from './redirect.js';
import { passwordSchema } from './users.js';

const loginBody = {
  type: 'object',
  required: ['email', 'password'],
  examples: [{ email: 'admin@example.com', password: 'correct horse battery staple', returnTo: '/docs' }],
  additionalProperties: false,
  properties: {
    email: { type: 'string', minLength: 1, maxLength: 320 },
    password: { type: 'string', minLength: 1, maxLength: 1024 },
    returnTo: { type: 'string', maxLength: 2048, description: 'A same-site path to return to; anything else becomes `/`.' },
  },
} as const;

interface LoginBody {
  email: string;
  password: string;
  returnTo?: string;
}

function cookieOptions(request: FastifyRequest, deps: GatewayDeps) {
  return {
    httpOnly: true,
    sameSite: 'lax' as const,
    path: '/',
    secure: request.protocol === 'https' || deps.settings.SERVICE_COOKIE_SECURE,
  };
}

function clearSessionCookie(reply: FastifyReply, request: FastifyRequest, deps: GatewayDeps): void {
  void reply.clearCookie(SESSION_COOKIE, cookieOptions(request, deps));
}

/**
 * A new session with a new cookie value (no session fixation); the session of the cookie the
 * request presented, if any, ends.
 */
async function startSession(request: FastifyRequest, reply: FastifyReply, deps: GatewayDeps, userId: string): Promise<void> {
  const previous = request.cookies[SESSION_COOKIE];
  if (previous) await deps.sessions.delete(hashSessionToken(previous));
  const token = newSessionToken();
  const session = newSessionRecord(userId, deps.identity.mode, deps.settings.SESSION_TTL_SECONDS * 1000, deps.clock());
  await deps.sessions.create(hashSessionToken(token), session);
  void reply.setCookie(SESSION_COOKIE, token, { ...cookieOptions(request, deps), maxAge: deps.settings.SESSION_TTL_SECONDS });
}

/**
 * Signs a user in (the identity provider: local passwords or Cognito) with the failure throttle,
 * and starts a session on the reply. A refusal is marked for the audit (`auth.login.denied`) and
 * thrown: 429 while throttled, else one 401 for every kind of failure. `POST /api/auth/login` and
 * the MCP sign-in page both use it.
 */
export async function signIn(request: FastifyRequest, reply: FastifyReply, deps: GatewayDeps, email: string, password: string): Promise<UserRecord> {
  const subject = { type: 'user', id: 'unknown' };
  try {
    await deps.loginThrottle.check(email, request.ip);
  } catch (err) {
    markDenial(request, { type: 'auth.login.denied', reason: 'login-throttled', subject });
    throw err;
  }
  const user = await deps.identity.authenticate(email, password);
  if (!user) {
    await deps.loginThrottle.failed(email, request.ip);
    markDenial(request, { type: 'auth.login.denied', reason: 'invalid-credentials', subject });
    throw new ServiceError('unauthorized', 'Invalid email or password');
  }
  await startSession(request, reply, deps, user._id);
  return user;
}

export async function authRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.post<{ Body: LoginBody }>(
    '/api/auth/login',
    {
      schema: {
        operationId: 'login',
        summary: 'Sign in',
        description:
          'Sets the `service_session` cookie (HttpOnly, SameSite=Lax, 12 h) with a new value at every sign-in. ' +
          'An unknown email and a wrong password get the same 401; repeated failures per email or client address get 429.',
        body: loginBody,
        response: {
          200: ok({
            type: 'object',
            required: ['redirectTo', 'mode'],
            properties: { redirectTo: { type: 'string' }, mode: { type: 'string', enum: ['local', 'cognito'] } },
          }),
          401: errorResponse(401),
          429: errorResponse(429),
        },
      },
      config: { access: { auth: 'public' } },
    },
    async (request, reply) => {
      const { email, password, returnTo } = request.body;
      await signIn(request, reply, deps, email, password);
      return { data: { redirectTo: safeRedirect(returnTo), mode: deps.identity.mode } };
    },
  );

  app.post(
    '/api/auth/logout',
    {
      schema: {
        operationId: 'logout',
        summary: 'Sign out',
        description: 'Ends the session of the presented cookie (if any) and clears the cookie. Always succeeds.',
        response: { 200: ok({ type: 'object', required: ['signedOut'], properties: { signedOut: { type: 'boolean' } } }) },
      },
      config: { access: { auth: 'public' } },
    },
    async (request, reply) => {
      const cookie = request.cookies[SESSION_COOKIE];
      if (cookie) await deps.sessions.delete(hashSessionToken(cookie));
      clearSessionCookie(reply, request, deps);
      return { data: { signedOut: true } };
    },
  );

  app.get(
    '/api/auth/session',
    {
      schema: {
        operationId: 'getSession',
        summary: 'The signed-in user and session',
        response: {
          200: ok({
            type: 'object',
            required: ['user', 'session'],
            properties: {
              user: userSchema,
              session: {
                type: 'object',
                required: ['id', 'provider', 'createdAt', 'expiresAt'],
                properties: {
                  id: { type: 'string' },
                  provider: { type: 'string' },
                  createdAt: { type: 'string', format: 'date-time' },
                  expiresAt: { type: 'string', format: 'date-time' },
                },
              },
            },
          }),
        },
      },
      config: { access: { auth: 'session' } },
    },
    async (request) => {
      const cookie = request.cookies[SESSION_COOKIE] ?? '';
      const session = await deps.sessions.get(hashSessionToken(cookie), deps.clock());
      const user = await deps.users.findById(request.principal.id);
      if (!session || !user) throw new ServiceError('unauthorized', 'Sign in first: a session is required');
      return {
        data: {
          user: toPublicUser(user),
          session: { id: session.id, provider: session.provider, createdAt: session.createdAt, expiresAt: session.expiresAt },
        },
      };
    },
  );

  app.post<{ Body: { currentPassword: string; newPassword: string } }>(
    '/api/auth/password',
    {
      schema: {
        operationId: 'changePassword',
        summary: 'Change your password',
        description:
          'For the `local` provider (with `cognito` the password is Cognito\'s: 403 reason `managed-by-identity-provider`). ' +
          'A wrong current password is 400 naming `currentPassword` and counts as a failed sign-in (429 after too many). ' +
          'Every other session of the user ends; this one continues under a new cookie value.',
        body: {
          type: 'object',
          required: ['currentPassword', 'newPassword'],
          additionalProperties: false,
          properties: { currentPassword: { type: 'string', minLength: 1, maxLength: 1024 }, newPassword: passwordSchema },
        },
        response: { 200: ok({ type: 'object', required: ['changed'], properties: { changed: { type: 'boolean' } } }), 429: errorResponse(429) },
      },
      config: { access: { auth: 'session' } },
    },
    async (request, reply) => {
      if (deps.identity.mode !== 'local') {
        throw new ServiceError('forbidden', 'Passwords are managed by the identity provider', { reason: 'managed-by-identity-provider' });
      }
      const user = await deps.users.findById(request.principal.id);
      if (!user) throw new ServiceError('unauthorized', 'Sign in first: a session is required');
      const { currentPassword, newPassword } = request.body;
      await deps.loginThrottle.check(user.email, request.ip);
      if (!user.passwordHash || !(await verifyPassword(user.passwordHash, currentPassword))) {
        await deps.loginThrottle.failed(user.email, request.ip);
        markDenial(request, { type: 'auth.password.denied', reason: 'invalid-credentials', subject: { type: 'user', id: user._id } });
        throw new ServiceError('invalid-input', 'The current password is not right', { field: 'currentPassword' });
      }
      if (newPassword === currentPassword) throw new ServiceError('invalid-input', 'The new password must differ from the current one', { field: 'newPassword' });
      await deps.users.update(user._id, { passwordHash: await hashPassword(newPassword) }, deps.clock());
      await startSession(request, reply, deps, user._id);
      await deps.outbox.add({
        type: 'user.updated',
        actor: { type: 'user', id: user._id },
        data: { subject: { type: 'user', id: user._id }, changedFields: ['password'] },
      });
      return { data: { changed: true } };
    },
  );
}
