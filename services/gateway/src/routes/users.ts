import { requireSystemAdmin } from '@planning/access';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { hashPassword } from '../identity/passwords.js';
import { ok, userSchema } from '../openapi.js';
import { toPublicUser } from '../store/users.js';

const createBody = {
  type: 'object',
  required: ['email', 'name'],
  additionalProperties: false,
  properties: {
    email: { type: 'string', format: 'email', maxLength: 320 },
    name: { type: 'string', minLength: 1, maxLength: 200 },
    password: {
      type: 'string',
      minLength: 12,
      maxLength: 1024,
      description: 'For the `local` provider. Without one the user can only sign in through Cognito.',
    },
    isAdmin: { type: 'boolean', default: false },
  },
} as const;

export async function userRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.post<{ Body: { email: string; name: string; password?: string; isAdmin: boolean } }>(
    '/api/users',
    {
      schema: {
        summary: 'Create a user (system administrators)',
        body: createBody,
        response: { 201: ok(userSchema, 'The new user (never its password hash)') },
      },
      config: { access: { auth: 'session' } },
    },
    async (request, reply) => {
      requireSystemAdmin(request.principal);
      const { email, name, password, isAdmin } = request.body;
      const user = await deps.users.create(
        { email, name: name.trim(), passwordHash: password === undefined ? null : await hashPassword(password), isAdmin },
        deps.clock(),
      );
      await deps.outbox.add({
        type: 'user.created',
        actor: { type: 'user', id: request.principal.id },
        data: { subject: { type: 'user', id: user._id }, changedFields: isAdmin ? ['isAdmin'] : [] },
      });
      void reply.status(201);
      return { data: toPublicUser(user) };
    },
  );
}
