import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import { SESSION_COOKIE } from '../auth.js';
import type { GatewayDeps } from '../deps.js';
import { decoyHash, verifyPassword } from '../identity/passwords.js';
import { hashSessionToken, newSessionRecord, newSessionToken } from '../store/sessions.js';
import { safeRedirect } from './redirect.js';

const loginBody = {
  type: 'object',
  required: ['email', 'password'],
  additionalProperties: false,
  properties: {
    email: { type: 'string', minLength: 1, maxLength: 320 },
    password: { type: 'string', minLength: 1, maxLength: 1024 },
    returnTo: { type: 'string', maxLength: 2048 },
  },
} as const;

interface LoginBody {
  email: string;
  password: string;
  returnTo?: string;
}

export async function authRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.post<{ Body: LoginBody }>('/api/auth/login', { schema: { body: loginBody }, config: { access: { auth: 'public' } } }, async (request, reply) => {
    const { email, password, returnTo } = request.body;
    const user = await deps.users.findByEmail(email);
    // Unknown emails verify against a decoy hash so both failures take the same time.
    const ok =
      user && !user.disabled && user.passwordHash
        ? await verifyPassword(user.passwordHash, password)
        : (await verifyPassword(await decoyHash(), password), false);
    if (!user || !ok) {
      await deps.outbox.add({
        type: 'auth.login.denied',
        actor: { type: 'anonymous', id: 'anonymous' },
        data: { subject: { type: 'user', id: user?._id ?? 'unknown' }, outcome: 'denied', reason: 'invalid-credentials' },
      });
      throw new ServiceError('unauthorized', 'Invalid email or password');
    }
    const token = newSessionToken();
    const session = newSessionRecord(user._id, 'local', deps.settings.SESSION_TTL_SECONDS * 1000, deps.clock());
    await deps.sessions.create(hashSessionToken(token), session);
    void reply.setCookie(SESSION_COOKIE, token, {
      httpOnly: true,
      sameSite: 'lax',
      path: '/',
      secure: request.protocol === 'https' || deps.settings.SERVICE_COOKIE_SECURE,
      maxAge: deps.settings.SESSION_TTL_SECONDS,
    });
    return { data: { redirectTo: safeRedirect(returnTo), mode: 'local' } };
  });
}
