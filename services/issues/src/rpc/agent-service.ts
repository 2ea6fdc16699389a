import type { MessageInitShape } from '@bufbuild/protobuf';
import { authorizeWorkspace, isAgentId, type AccessLookup } from '@planning/access';
import { ServiceError } from '@planning/errors';
import { AgentService, type AgentSchema } from '@planning/proto/planning/issues/v1/agents_pb';
import type { ServiceImplementation } from '@planning/rpc';
import type { AgentRecord, AgentRepository } from '../store/agents.js';
import { decodeCursor, encodeCursor, pageLimit } from './cursor.js';
import { actorOf } from './workspace-service.js';

export { AgentService };

export function toAgentMessage(record: AgentRecord): MessageInitShape<typeof AgentSchema> {
  return { workspaceId: record.workspaceId, agentId: record.agentId, createdAt: record.createdAt, createdBy: record.createdBy };
}

export interface AgentServiceDeps {
  agents: AgentRepository;
  access: AccessLookup;
  clock: () => Date;
}

function agentIdOf(value: string): string {
  if (!isAgentId(value)) {
    throw new ServiceError('invalid-input', "'agentId' must match ^[a-z0-9][a-z0-9._-]{0,63}$", { field: 'agentId' });
  }
  return value;
}

function workspaceIdOf(value: string): string {
  if (!value) throw new ServiceError('invalid-input', "'workspaceId' is required", { field: 'workspaceId' });
  return value;
}

/** The agent directory over gRPC. Creating agents is an admin's (it happens with key creation). */
export function createAgentService(deps: AgentServiceDeps): ServiceImplementation<typeof AgentService> {
  const { agents, access } = deps;
  return {
    async ensureAgent(request, ctx) {
      const workspaceId = workspaceIdOf(request.workspaceId);
      const agentId = agentIdOf(request.agentId);
      await authorizeWorkspace(access, ctx, workspaceId, { action: 'manage' });
      const result = await agents.ensure(workspaceId, agentId, actorOf(ctx.principal), deps.clock());
      return { agent: toAgentMessage(result.agent), created: result.created };
    },

    async getAgent(request, ctx) {
      const workspaceId = workspaceIdOf(request.workspaceId);
      const agentId = agentIdOf(request.agentId);
      await authorizeWorkspace(access, ctx, workspaceId, { action: 'read', scope: 'agents:read' });
      const agent = await agents.get(workspaceId, agentId);
      if (!agent) throw new ServiceError('not-found', 'Agent not found');
      return { agent: toAgentMessage(agent) };
    },

    async listAgents(request, ctx) {
      const workspaceId = workspaceIdOf(request.workspaceId);
      await authorizeWorkspace(access, ctx, workspaceId, { action: 'read', scope: 'agents:read' });
      const limit = pageLimit(request.limit);
      const after = decodeCursor(request.cursor);
      const rows = await agents.list(workspaceId, { limit: limit + 1, after });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        agents: page.map(toAgentMessage),
        ...(rows.length > limit && last ? { nextCursor: encodeCursor(last.agentId) } : {}),
      };
    },
  };
}
