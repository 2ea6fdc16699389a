import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { component, entityRefSchema, ok, page } from '../openapi.js';

const ref = entityRefSchema;

const auditEventSchema = component('AuditEvent', {
  type: 'object',
  required: ['id', 'type', 'workspaceId', 'actor', 'subject', 'outcome', 'reason', 'changedFields', 'at'],
  properties: {
    id: { type: 'string' },
    type: { type: 'string' },
    workspaceId: { type: ['string', 'null'] },
    actor: { anyOf: [ref, { type: 'null' }] },
    subject: { anyOf: [ref, { type: 'null' }] },
    outcome: { type: 'string', enum: ['allowed', 'denied'] },
    reason: { type: ['string', 'null'] },
    changedFields: { type: 'array', items: { type: 'string' }, description: 'Names (never values) of the fields a change touched.' },
    at: { type: 'string', format: 'date-time' },
  },
});

// Permissive: diagnostics grow (product readiness) and a strict schema would silently drop new fields.
const diagnosticsSchema = component('Diagnostics', {
  type: 'object',
  additionalProperties: true,
  required: ['generatedAt', 'audit', 'redacted'],
  properties: {
    generatedAt: { type: 'string', format: 'date-time' },
    audit: {
      type: 'object',
      required: ['totalEvents', 'recentDeniedEvents'],
      properties: { totalEvents: { type: 'integer' }, recentDeniedEvents: { type: 'integer' } },
    },
    redacted: { type: 'boolean' },
    productReadiness: {
      type: 'object',
      description: 'Launch readiness (DECISIONS §10): launch-blocker tasks and evidence (proof packets) of the administered workspaces.',
      required: ['implementation', 'launchProof'],
      properties: {
        implementation: {
          type: 'object',
          required: ['completionPercent', 'verifiedCount'],
          properties: { completionPercent: { type: 'integer' }, verifiedCount: { type: 'integer' } },
        },
        launchProof: {
          type: 'object',
          required: ['readyForPublicLaunch', 'nextProof', 'summary'],
          properties: {
            readyForPublicLaunch: { type: 'boolean' },
            nextProof: {
              anyOf: [
                { type: 'object', required: ['id', 'nextAction'], properties: { id: { type: 'string' }, nextAction: { type: 'string' } } },
                { type: 'null' },
              ],
            },
            summary: {
              type: 'object',
              required: ['publicLaunchBlockerCount', 'proofPacketCount'],
              properties: { publicLaunchBlockerCount: { type: 'integer' }, proofPacketCount: { type: 'integer' } },
            },
          },
        },
      },
    },
  },
});

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
  app.get(
    '/api/admin/diagnostics',
    {
      schema: { operationId: 'getDiagnostics', summary: 'Redacted audit summary and launch readiness for the workspaces the caller administers', response: { 200: ok(diagnosticsSchema) } },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const [diagnostics, readiness] = await Promise.all([
        deps.rpc.audit.getDiagnostics({}, { principal: request.principal }),
        deps.rpc.tasks.getProductReadiness({}, { principal: request.principal }),
      ]);
      const launch = readiness.launchProof;
      return {
        data: {
          generatedAt: diagnostics.generatedAt,
          audit: {
            totalEvents: Number(diagnostics.audit?.totalEvents ?? 0n),
            recentDeniedEvents: Number(diagnostics.audit?.recentDeniedEvents ?? 0n),
          },
          productReadiness: {
            implementation: {
              completionPercent: readiness.implementation?.completionPercent ?? 0,
              verifiedCount: readiness.implementation?.verifiedCount ?? 0,
            },
            launchProof: {
              readyForPublicLaunch: launch?.readyForPublicLaunch ?? true,
              nextProof: launch?.nextProof ? { id: launch.nextProof.id, nextAction: launch.nextProof.nextAction } : null,
              summary: {
                publicLaunchBlockerCount: launch?.summary?.publicLaunchBlockerCount ?? 0,
                proofPacketCount: launch?.summary?.proofPacketCount ?? 0,
              },
            },
          },
          redacted: true,
        },
      };
    },
  );

  /** The redacted audit trail of the workspaces the caller administers, newest first. */
  app.get<{ Querystring: { workspaceId?: string; type?: string; limit?: number; cursor?: string } }>(
    '/api/admin/audit-events',
    {
      schema: {
        operationId: 'listAuditEvents',
        summary: 'The redacted audit trail, newest first',
        querystring: auditQuery,
        response: { 200: page(auditEventSchema) },
      },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const principal = request.principal;
      // A token never learns about another workspace: its own, or 404.
      if (principal.type === 'api-key' && request.query.workspaceId !== undefined && request.query.workspaceId !== principal.workspaceId) {
        throw new ServiceError('not-found', 'Workspace not found');
      }
      const result = await deps.rpc.audit.listAuditEvents(request.query, { principal });
      return {
        data: result.events.map((e) => ({
          id: e.id,
          type: e.type,
          workspaceId: e.workspaceId ?? null,
          actor: e.actor ? { type: e.actor.type, id: e.actor.id } : null,
          subject: e.subject ? { type: e.subject.type, id: e.subject.id } : null,
          outcome: e.outcome,
          reason: e.reason ?? null,
          changedFields: e.changedFields,
          at: e.at,
        })),
        page: { nextCursor: result.nextCursor ?? null },
      };
    },
  );
}
