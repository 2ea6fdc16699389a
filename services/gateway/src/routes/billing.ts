import { authorizeWorkspace, createRemoteAccess } from '@planning/access';
import { USAGE_REQUIREMENT } from '@planning/metering';
import { PLANS, QUOTA_KINDS, quotaPeriod, quotaResetsAt, type QuotaKind } from '@planning/plans';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { component, ok } from '../openapi.js';

const query = {
  type: 'object',
  required: ['workspaceId'],
  additionalProperties: false,
  properties: { workspaceId: { type: 'string', minLength: 1, maxLength: 64 } },
} as const;

const usageSchema = component('Usage', {
  type: 'object',
  required: ['workspaceId', 'planId', 'period', 'quotas'],
  properties: {
    workspaceId: { type: 'string' },
    planId: { type: 'string' },
    period: { type: 'string', description: 'The UTC month counted, `YYYY-MM`.' },
    quotas: {
      type: 'array',
      items: {
        type: 'object',
        required: ['kind', 'limit', 'used', 'resetsAt'],
        properties: {
          kind: { type: 'string', enum: [...QUOTA_KINDS] },
          limit: { type: ['integer', 'null'], description: 'Null: unlimited.' },
          used: { type: 'integer' },
          resetsAt: { type: ['string', 'null'], format: 'date-time', description: 'Null for stored-tasks (a standing count).' },
        },
      },
    },
  },
});

/** Quota usage (DECISIONS §2): each kind from the service that counts it. */
export async function billingRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const access = createRemoteAccess(deps.rpc.workspaces);

  app.get<{ Querystring: { workspaceId: string } }>(
    '/api/billing/usage',
    {
      schema: { operationId: 'getUsage', summary: "A workspace's quota limits and use this month", querystring: query, response: { 200: ok(usageSchema) } },
      config: { access: { auth: 'session-or-token', scope: 'billing:read' } },
    },
    async (request) => {
      const { workspaceId } = request.query;
      const workspace = await authorizeWorkspace(access, { principal: request.principal }, workspaceId, USAGE_REQUIREMENT);
      const now = deps.clock();
      const options = { principal: request.principal };
      const [apiRequests, issues, claims, transfers] = await Promise.all([
        deps.meter.used(workspaceId, 'api-requests', now),
        deps.rpc.usage.issues.getUsage({ workspaceId, kinds: ['stored-tasks'] }, options),
        deps.rpc.usage.agentsClaims.getUsage({ workspaceId, kinds: ['agent-runs'] }, options),
        deps.rpc.usage.importsExports.getUsage({ workspaceId, kinds: ['imports', 'exports'] }, options),
      ]);
      const used = new Map<string, number>([['api-requests', apiRequests]]);
      for (const line of [...issues.usage, ...claims.usage, ...transfers.usage]) used.set(line.kind, Number(line.used));
      const plan = PLANS[workspace.planId];
      const resetsAt = quotaResetsAt(now).toISOString();
      return {
        data: {
          workspaceId,
          planId: plan.id,
          period: quotaPeriod(now),
          quotas: QUOTA_KINDS.map((kind: QuotaKind) => ({
            kind,
            limit: plan.quotas[kind],
            used: used.get(kind) ?? 0,
            resetsAt: kind === 'stored-tasks' ? null : resetsAt,
          })),
        },
      };
    },
  );
}
