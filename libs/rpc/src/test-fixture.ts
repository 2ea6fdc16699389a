// Shared by the rpc tests only (not exported): a WorkspaceService over loopback on a random port.
import { create } from '@bufbuild/protobuf';
import { createLogger, type Logger } from '@planning/telemetry';
import { WorkspaceSchema, WorkspaceService, type Workspace } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { ServiceError } from '@planning/errors';
import { createPrincipalSigner, createPrincipalVerifier, type Principal } from './principal.js';
import { createRpcServer, type RpcServer, type RpcServerOptions } from './server.js';
import type { ServiceImplementation } from './types.js';

export const SECRET = 'test-secret-0123456789abcdef-0123456789';
export const signer = createPrincipalSigner(SECRET);

export const USER: Principal = {
  type: 'user',
  id: 'user-1',
  userId: 'user-1',
  email: 'ada@example.test',
  isAdmin: false,
  scopes: ['issues:read', 'issues:write'],
};

export interface CapturedLogs {
  logger: Logger;
  lines(): Array<Record<string, unknown>>;
}

export function captureLogs(): CapturedLogs {
  const chunks: string[] = [];
  return {
    logger: createLogger({ name: 'rpc-test', level: 'debug', destination: { write: (chunk: string) => void chunks.push(chunk) } }),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

async function unsupported(): Promise<never> {
  throw new ServiceError('invalid-input', 'not supported by the rpc test fixture');
}

/** An in-memory WorkspaceService; tests override single handlers. */
export function workspaceImplementation(
  overrides: Partial<ServiceImplementation<typeof WorkspaceService>> = {},
): ServiceImplementation<typeof WorkspaceService> {
  const workspaces = new Map<string, Workspace>();
  return {
    async createWorkspace(request, ctx) {
      const at = '2025-01-02T03:04:05.000Z';
      const workspace = create(WorkspaceSchema, {
        id: `ws-${workspaces.size + 1}`,
        name: request.name,
        slug: request.name.toLowerCase().replace(/[^a-z0-9]+/g, '-'),
        status: 'active',
        ownerId: request.ownerId ?? ctx.principal.userId ?? ctx.principal.id,
        defaultSandbox: 'workspace-write',
        planId: request.planId ?? 'free',
        createdAt: at,
        updatedAt: at,
      });
      workspaces.set(workspace.id, workspace);
      return { workspace };
    },
    async listWorkspaces(request) {
      const all = [...workspaces.values()].filter((w) => !request.q || w.name.includes(request.q));
      const limit = request.limit ?? 50;
      return { workspaces: all.slice(0, limit), nextCursor: all.length > limit ? String(limit) : undefined };
    },
    async getWorkspace(request) {
      const workspace = workspaces.get(request.id);
      if (!workspace) throw new ServiceError('not-found', 'Workspace not found');
      return { workspace };
    },
    async listMemberships() {
      return { memberships: [...workspaces.keys()].map((workspaceId) => ({ workspaceId, role: 'owner' })) };
    },
    async getAccess(request) {
      const workspace = workspaces.get(request.workspaceId);
      return workspace
        ? { exists: true, role: 'owner', planId: workspace.planId, status: workspace.status }
        : { exists: false, planId: 'free', status: '' };
    },
    // Membership changes are not part of what the rpc tests exercise.
    getWorkspaceBySlug: unsupported,
    updateWorkspace: unsupported,
    listMembers: unsupported,
    addMember: unsupported,
    removeMember: unsupported,
    ...overrides,
  };
}

export async function startWorkspaceServer(
  implementation: ServiceImplementation<typeof WorkspaceService> = workspaceImplementation(),
  options: Partial<RpcServerOptions> & { configure?: (server: RpcServer) => void } = {},
): Promise<{ server: RpcServer; address: string; logs: CapturedLogs }> {
  const logs = captureLogs();
  const { configure, ...serverOptions } = options;
  const server = createRpcServer({
    host: '127.0.0.1',
    port: 0,
    logger: logs.logger,
    principalVerifier: createPrincipalVerifier(SECRET),
    ...serverOptions,
  });
  server.addService(WorkspaceService, implementation);
  configure?.(server);
  await server.start();
  return { server, address: server.address(), logs };
}
