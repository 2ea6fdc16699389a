import { ServiceError } from '@planning/errors';
import { AuditService } from '@planning/proto/planning/audit/v1/audit_pb';
import type { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { callOptionsFrom, type CallContext, type RpcClient, type ServiceImplementation } from '@planning/rpc';
import type { AuditEventRepository, AuditScope } from '../store/audit-events.js';

export { AuditService };

const DAY_MS = 24 * 60 * 60 * 1000;

export interface AuditServiceDeps {
  events: AuditEventRepository;
  workspaces: RpcClient<typeof WorkspaceService>;
  clock: () => Date;
}

/**
 * The workspaces whose audit trail the caller may read: the ones it administers (system
 * administrators and services: all; an API token with the `admin` scope: its own workspace).
 */
async function scopeOf(ctx: CallContext, workspaces: RpcClient<typeof WorkspaceService>): Promise<AuditScope> {
  const principal = ctx.principal;
  if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
  if (principal.type === 'system' || (principal.type === 'user' && principal.isAdmin)) {
    return { all: true, workspaceIds: [] };
  }
  if (principal.type === 'api-key') {
    if (!principal.scopes.includes('admin')) throw new ServiceError('forbidden', "The token lacks the 'admin' scope");
    return { all: false, workspaceIds: principal.workspaceId ? [principal.workspaceId] : [] };
  }
  const memberships = await workspaces.listMemberships({ minRole: 'admin' }, callOptionsFrom(ctx));
  if (memberships.allWorkspaces) return { all: true, workspaceIds: [] };
  const ids = memberships.memberships.map((m) => m.workspaceId);
  if (ids.length === 0) throw new ServiceError('forbidden', 'Diagnostics are for workspace administrators');
  return { all: false, workspaceIds: ids };
}

/** Narrows a scope to the requested workspaces; asking for one outside it is refused. */
function narrow(scope: AuditScope, requested: readonly string[]): AuditScope {
  if (requested.length === 0) return scope;
  if (!scope.all) {
    const outside = requested.filter((id) => !scope.workspaceIds.includes(id));
    if (outside.length > 0) throw new ServiceError('forbidden', 'Not an administrator of every requested workspace');
  }
  return { all: false, workspaceIds: [...requested] };
}

function encodeCursor(id: string): string {
  return Buffer.from(id, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string | undefined): string | undefined {
  if (!cursor) return undefined;
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^evt_[0-9A-Z]{26}$/.test(id)) throw new ServiceError('invalid-input', "'cursor' is not a valid cursor", { field: 'cursor' });
  return id;
}

export function createAuditService(deps: AuditServiceDeps): ServiceImplementation<typeof AuditService> {
  return {
    async getDiagnostics(request, ctx) {
      const scope = narrow(await scopeOf(ctx, deps.workspaces), request.workspaceIds);
      const now = deps.clock();
      const [total, denied] = await Promise.all([
        deps.events.count(scope),
        deps.events.countDeniedSince(scope, new Date(now.getTime() - DAY_MS)),
      ]);
      return {
        generatedAt: now.toISOString(),
        audit: { totalEvents: BigInt(total), recentDeniedEvents: BigInt(denied) },
      };
    },

    async listAuditEvents(request, ctx) {
      const scope = await scopeOf(ctx, deps.workspaces);
      const limit = request.limit ?? 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > 200) {
        throw new ServiceError('invalid-input', "'limit' must be an integer from 1 to 200", { field: 'limit' });
      }
      const rows = await deps.events.list(request.workspaceId ? narrow(scope, [request.workspaceId]) : scope, {
        ...(request.type ? { type: request.type } : {}),
        limit: limit + 1,
        before: decodeCursor(request.cursor),
      });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        events: page.map((e) => ({
          id: e._id,
          type: e.type,
          ...(e.workspaceId ? { workspaceId: e.workspaceId } : {}),
          actor: e.actor,
          subject: e.subject,
          outcome: e.outcome,
          ...(e.reason ? { reason: e.reason } : {}),
          at: e.at,
          changedFields: e.changedFields ?? [],
        })),
        ...(rows.length > limit && last ? { nextCursor: encodeCursor(last._id) } : {}),
      };
    },
  };
}
