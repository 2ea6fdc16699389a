import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';

const auditQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    workspaceId: { type: 'string', minLength: 1, maxLength: 64 },
    type: { type: 'string', minLength: 1, maxLength: 100 },
    limit: { type: 'integer', minimum: 1, maximum: 200 },
    cursor: { type: 'string', maxLength: 400 },
  },
} as const;

export async function adminRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.get('/api/admin/diagnostics', { config: { access: { auth: 'session-or-token', scope: 'admin' } } }, async (request) => {
    const diagnostics = await deps.rpc.audit.getDiagnostics({}, { principal: request.principal });
    return {
      data: {
        generatedAt: diagnostics.generatedAt,
        audit: {
          totalEvents: Number(diagnostics.audit?.totalEvents ?? 0n),
          recentDeniedEvents: Number(diagnostics.audit?.recentDeniedEvents ?? 0n),
        },
        redacted: true,
      },
    };
  });

  /** The redacted audit trail of the workspaces the caller administers, newest first. */
  app.get<{ Querystring: { workspaceId?: string; type?: string; limit?: number; cursor?: string } }>(
    '/api/admin/audit-events',
    { schema: { querystring: auditQuery }, config: { access: { auth: 'session-or-token', scope: 'admin' } } },
    async (request) => {
      const result = await deps.rpc.audit.listAuditEvents(request.query, { principal: request.principal });
      return {
        data: result.events.map((e) => ({
          id: e.id,
          type: e.type,
          workspaceId: e.workspaceId ?? null,
          actor: e.actor ? { type: e.actor.type, id: e.actor.id } : null,
          subject: e.subject ? { type: e.subject.type, id: e.subject.id } : null,
          outcome: e.outcome,
          reason: e.reason ?? null,
          at: e.at,
        })),
        page: { nextCursor: result.nextCursor ?? null },
      };
    },
  );
}
