import { requireSystemAdmin } from '@planning/access';
import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { hashPassword } from '../identity/passwords.js';
import { ok, page, userSchema } from '../openapi.js';
import { toPublicUser, type UserChange } from '../store/users.js';
import { decodeCursor, encodeCursor } from './paging.js';
import { idSchema } from './planning-input.js';

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

export const passwordSchema = { type: 'string', minLength: 12, maxLength: 1024 } as const;

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    q: { type: 'string', maxLength: 200, description: 'Text in the email or name (literal, case-insensitive).' },
    limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
    cursor: { type: 'string', maxLength: 400 },
  },
} as const;

const patchBody = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200 },
    isAdmin: { type: 'boolean' },
    disabled: { type: 'boolean', description: 'A disabled user cannot sign in; their sessions stop working at once.' },
    password: { ...passwordSchema, description: 'A new password (`local` provider); every session of the user ends.' },
  },
} as const;

interface PatchBody {
  name?: string;
  isAdmin?: boolean;
  disabled?: boolean;
  password?: string;
}

export async function userRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.post<{ Body: { email: string; name: string; password?: string; isAdmin: boolean } }>(
    '/api/users',
    {
      schema: {
        operationId: 'createUser',
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

  app.get<{ Querystring: { q?: string; limit: number; cursor?: string } }>(
    '/api/users',
    {
      schema: { operationId: 'listUsers', summary: 'Users (system administrators)', querystring: listQuery, response: { 200: page(userSchema) } },
      config: { access: { auth: 'session' } },
    },
    async (request) => {
      requireSystemAdmin(request.principal);
      const { q, limit, cursor } = request.query;
      const rows = await deps.users.list({ ...(q ? { q } : {}), limit: limit + 1, after: decodeCursor(cursor) });
      const items = rows.slice(0, limit);
      const last = items[items.length - 1];
      return { data: items.map(toPublicUser), page: { nextCursor: rows.length > limit && last ? encodeCursor(last._id) : null } };
    },
  );

  app.patch<{ Params: { id: string }; Body: PatchBody }>(
    '/api/users/:id',
    {
      schema: {
        operationId: 'updateUser',
        summary: 'Change a user (system administrators)',
        description:
          'Rename, grant or withdraw system administration, disable or enable, or set a new password. ' +
          'Disabling ends the user\'s sessions at once (their API keys are the workspace\'s and stay; revoke them separately); ' +
          'a new password ends every session the user had. A system administrator cannot disable or demote themselves.',
        params: { type: 'object', required: ['id'], properties: { id: idSchema } },
        body: patchBody,
        response: { 200: ok(userSchema, 'The user as it is now') },
      },
      config: { access: { auth: 'session' } },
    },
    async (request) => {
      requireSystemAdmin(request.principal);
      const { name, isAdmin, disabled, password } = request.body;
      if (request.params.id === request.principal.id) {
        if (disabled === true) throw new ServiceError('invalid-input', 'You cannot disable yourself', { field: 'disabled' });
        if (isAdmin === false) throw new ServiceError('invalid-input', 'You cannot withdraw your own administration', { field: 'isAdmin' });
      }
      const change: UserChange = {
        ...(name !== undefined ? { name: name.trim() } : {}),
        ...(isAdmin !== undefined ? { isAdmin } : {}),
        ...(disabled !== undefined ? { disabled } : {}),
        ...(password !== undefined ? { passwordHash: await hashPassword(password) } : {}),
      };
      if (change.name === '') throw new ServiceError('invalid-input', "'name' must not be blank", { field: 'name' });
      const result = await deps.users.update(request.params.id, change, deps.clock());
      if (!result) throw new ServiceError('not-found', 'User not found');
      const { before, after } = result;
      const changedFields = [
        ...(after.name !== before.name ? ['name'] : []),
        ...(after.isAdmin !== before.isAdmin ? ['isAdmin'] : []),
        ...(after.disabled !== before.disabled ? ['disabled'] : []),
        ...(password !== undefined ? ['password'] : []),
      ];
      if (changedFields.length > 0) {
        await deps.outbox.add({
          type: 'user.updated',
          actor: { type: 'user', id: request.principal.id },
          data: { subject: { type: 'user', id: after._id }, changedFields },
        });
      }
      return { data: toPublicUser(after) };
    },
  );
}
