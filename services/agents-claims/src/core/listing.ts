/** Listing claims, and the workspace's claim policy (its lease). */
import { authorizeWorkspace } from '@planning/access';
import { invalidInput } from '@planning/errors';
import type { CallContext } from '@planning/rpc';
import {
  actorOf,
  requireAgent,
  storedFilterOf,
  validateAgentId,
  validateId,
  validateLeaseSeconds,
  PUBLIC_STATES,
  type PublicState,
} from '../domain/claims.js';
import type { ClaimPolicy } from '../store/policies.js';
import { READ_SCOPES, type CoreDeps } from './context.js';
import { claimView, type ClaimView } from './views.js';

export class ClaimListing {
  constructor(private readonly deps: CoreDeps) {}

  async listClaims(
    ctx: CallContext,
    request: { workspaceId?: string; issueId?: string; agentId?: string; states: readonly string[]; limit?: number; cursor?: string },
  ): Promise<{ claims: ClaimView[]; nextCursor?: string }> {
    const principal = ctx.principal;
    let workspaceId = request.workspaceId ? validateId(request.workspaceId, 'workspaceId') : undefined;
    if (principal.type === 'api-key') {
      requireAgent(principal, READ_SCOPES);
      workspaceId ??= principal.workspaceId;
    }
    if (!workspaceId) throw invalidInput('workspaceId', "'workspaceId' is required");
    await authorizeWorkspace(this.deps.access, ctx, workspaceId, { action: 'read', scope: 'agents:read' });
    const states = request.states.map((s) => {
      if (!(PUBLIC_STATES as readonly string[]).includes(s)) throw invalidInput('state', `'state' must be one of ${PUBLIC_STATES.join(', ')}`);
      return s as PublicState;
    });
    const limit = request.limit ?? 200;
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw invalidInput('limit', "'limit' must be an integer from 1 to 200");
    const before = request.cursor ? decodeClaimCursor(request.cursor) : undefined;
    const now = this.deps.clock();
    const filter: Record<string, unknown> = { workspaceId, $or: storedFilterOf(states.length > 0 ? states : ['starting', 'active'], now) };
    if (request.issueId) filter.issueId = validateId(request.issueId, 'issueId');
    if (request.agentId) filter.agentId = validateAgentId(request.agentId);
    const rows = await this.deps.claims.list(filter, limit + 1, before);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { claims: page.map((c) => claimView(c, now)), ...(rows.length > limit && last ? { nextCursor: Buffer.from(last._id, 'utf8').toString('base64url') } : {}) };
  }

  async getPolicy(ctx: CallContext, rawWorkspaceId: string): Promise<ClaimPolicy> {
    const workspaceId = validateId(rawWorkspaceId, 'workspaceId');
    await authorizeWorkspace(this.deps.access, ctx, workspaceId, { action: 'read', scope: 'agents:read' });
    return this.deps.policies.get(workspaceId);
  }

  async setPolicy(ctx: CallContext, rawWorkspaceId: string, leaseSeconds: number | undefined): Promise<ClaimPolicy> {
    const workspaceId = validateId(rawWorkspaceId, 'workspaceId');
    const lease = leaseSeconds === undefined ? null : validateLeaseSeconds(leaseSeconds);
    await authorizeWorkspace(this.deps.access, ctx, workspaceId, { action: 'manage', scope: 'admin' });
    return this.deps.policies.set(workspaceId, lease, actorOf(ctx.principal).id, this.deps.clock());
  }
}

function decodeClaimCursor(cursor: string): string {
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[A-Za-z0-9_:.-]{1,64}$/.test(decoded)) throw invalidInput('cursor', "'cursor' is not a valid cursor");
  return decoded;
}
