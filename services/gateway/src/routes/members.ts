import type { MessageShape } from '@bufbuild/protobuf';
import { authorizeWorkspace, createRemoteAccess } from '@planning/access';
import { ServiceError } from '@planning/errors';
import type { MemberSchema } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { agentSchema, memberSchema, ok, page, errors } from '../openapi.js';
import type { UserRecord } from '../store/users.js';

const ROLE_ENUM = ['owner', 'admin', 'member', 'viewer'];

function memberJson(m: MessageShape<typeof MemberSchema>, user: UserRecord | null) {
  return {
    workspaceId: m.workspaceId,
    userId: m.userId,
    role: m.role,
    email: user?.email ?? null,
    name: user?.name ?? null,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}

const params = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 64 } },
} as const;

const memberParams = {
  type: 'object',
  required: ['id', 'userId'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 64 }, userId: { type: 'string', minLength: 1, maxLength: 64 } },
} as const;

const addBody = {
  type: 'object',
  required: ['role'],
  additionalProperties: false,
  properties: {
    userId: { type: 'string', minLength: 1, maxLength: 64 },
    email: { type: 'string', format: 'email', maxLength: 320 },
    role: { type: 'string', enum: ROLE_ENUM },
  },
} as const;

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { limit: { type: 'integer', minimum: 1, maximum: 200 }, cursor: { type: 'string', maxLength: 400 } },
} as const;

/** Workspace members (DECISIONS §1): kept by the issues service; the gateway adds names and emails from its user directory. */
export async function memberRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const access = createRemoteAccess(deps.rpc.workspaces);
  const usersById = async (ids: string[]): Promise<Map<string, UserRecord | null>> =>
    new Map(await Promise.all(ids.map(async (id) => [id, await deps.users.findById(id)] as const)));

  app.get<{ Params: { id: string }; Querystring: { limit?: number; cursor?: string } }>(
    '/api/workspaces/:id/members',
    {
      schema: { operationId: 'listMembers', summary: 'Members of a workspace', params, querystring: listQuery, response: { 200: page(memberSchema) } },
      config: { access: { auth: 'session' } },
    },
    async (request) => {
      const result = await deps.rpc.workspaces.listMembers(
        { workspaceId: request.params.id, limit: request.query.limit, cursor: request.query.cursor },
        { principal: request.principal },
      );
      const users = await usersById(result.members.map((m) => m.userId));
      return {
        data: result.members.map((m) => memberJson(m, users.get(m.userId) ?? null)),
        page: { nextCursor: result.nextCursor ?? null },
      };
    },
  );

  app.post<{ Params: { id: string }; Body: { userId?: string; email?: string; role: string } }>(
    '/api/workspaces/:id/members',
    {
      schema: {
        operationId: 'putMember',
        summary: "Add a member or change a member's role",
        description:
          'Name the user by `userId` or `email` (exactly one). Admins manage viewers, members and admins; making, changing or ' +
          'removing an owner is for owners. The last owner cannot be demoted (409 `last-owner`). 201 when added, 200 when changed.',
        params,
        body: addBody,
        response: { ...errors('work-already-claimed'), 200: ok(memberSchema, 'The role changed (or was already so)'), 201: ok(memberSchema, 'Added') },
      },
      config: { access: { auth: 'session' } },
    },
    async (request, reply) => {
      const { userId, email, role } = request.body;
      if ((userId === undefined) === (email === undefined)) {
        throw new ServiceError('invalid-input', "Name the user by exactly one of 'userId' and 'email'", { field: userId ? 'email' : 'userId' });
      }
      const workspaceId = request.params.id;
      // Only someone who may manage members learns whether a user exists.
      await authorizeWorkspace(access, { principal: request.principal }, workspaceId, { action: 'manage' });
      const user = userId !== undefined ? await deps.users.findById(userId) : await deps.users.findByEmail(email!);
      if (!user) throw new ServiceError('not-found', 'User not found');
      const result = await deps.rpc.workspaces.addMember({ workspaceId, userId: user._id, role }, { principal: request.principal });
      if (!result.member) throw new ServiceError('internal', 'Internal error');
      void reply.status(result.created ? 201 : 200);
      return { data: memberJson(result.member, user) };
    },
  );

  app.delete<{ Params: { id: string; userId: string } }>(
    '/api/workspaces/:id/members/:userId',
    {
      schema: {
        operationId: 'removeMember',
        summary: 'Remove a member',
        description: 'Admins remove viewers, members and admins; owners remove owners; anyone may leave. The last owner stays (409 `last-owner`).',
        params: memberParams,
        response: { ...errors('work-already-claimed'), 200: ok(memberSchema, 'The removed membership') },
      },
      config: { access: { auth: 'session' } },
    },
    async (request) => {
      const result = await deps.rpc.workspaces.removeMember(
        { workspaceId: request.params.id, userId: request.params.userId },
        { principal: request.principal },
      );
      if (!result.member) throw new ServiceError('internal', 'Internal error');
      return { data: memberJson(result.member, await deps.users.findById(result.member.userId)) };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { limit?: number; cursor?: string } }>(
    '/api/workspaces/:id/agents',
    {
      schema: {
        operationId: 'listAgents',
        summary: "The workspace's agents",
        description: 'Agents are created with the first API key that names them.',
        params,
        querystring: listQuery,
        response: {
          200: page(agentSchema),
        },
      },
      config: { access: { auth: 'session-or-token', scope: 'agents:read' } },
    },
    async (request) => {
      const result = await deps.rpc.agents.listAgents(
        { workspaceId: request.params.id, limit: request.query.limit, cursor: request.query.cursor },
        { principal: request.principal },
      );
      return {
        data: result.agents.map((a) => ({ workspaceId: a.workspaceId, agentId: a.agentId, createdAt: a.createdAt, createdBy: a.createdBy })),
        page: { nextCursor: result.nextCursor ?? null },
      };
    },
  );
}
