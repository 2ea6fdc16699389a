/**
 * The fence of writes to tasks, for the issues service (ClaimService.CheckTaskWrites): the rule of
 * domain/write-fence.ts over this store's claims. Read-only: a claim found past its lease is left
 * to the sweeper (the rule treats it as expired either way).
 */
import { invalidInput, ServiceError } from '@planning/errors';
import type { CallContext } from '@planning/rpc';
import { validateFencingToken, validateId } from '../domain/claims.js';
import { writeFence, WRITE_KINDS, type FenceClaim, type WriteKind } from '../domain/write-fence.js';
import type { ClaimRecord } from '../store/claims.js';
import type { CoreDeps } from './context.js';

/** Tasks one call may ask about (a bulk update's limit). */
export const MAX_FENCED_ISSUES = 200;

export interface FenceAnswer {
  issueId: string;
  claimId?: string;
  refusal?: { reason: string; message: string };
}

const asFenceClaim = (c: ClaimRecord | null): FenceClaim | undefined =>
  c && c.state !== 'aborted'
    ? { id: c._id, agentId: c.agentId, state: c.state, fencingToken: c.fencingToken, expiresAt: c.expiresAt }
    : undefined;

export class ClaimFencing {
  constructor(private readonly deps: CoreDeps) {}

  async checkTaskWrites(ctx: CallContext, request: { issueIds: readonly string[]; kind: string; fencingToken?: number }): Promise<FenceAnswer[]> {
    const principal = ctx.principal;
    if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
    if (!(WRITE_KINDS as readonly string[]).includes(request.kind)) throw invalidInput('kind', `'kind' must be one of ${WRITE_KINDS.join(', ')}`);
    if (request.issueIds.length > MAX_FENCED_ISSUES) throw invalidInput('issueIds', `At most ${MAX_FENCED_ISSUES} issues per call`);
    const issueIds = request.issueIds.map((id) => validateId(id, 'issueId'));
    const fencingToken = validateFencingToken(request.fencingToken);
    const agentId = principal.type === 'api-key' ? principal.agentId : undefined;
    const now = this.deps.clock();
    const { claims } = this.deps;
    return Promise.all(
      issueIds.map(async (issueId): Promise<FenceAnswer> => {
        const latest = asFenceClaim(await claims.latestAnswered(issueId));
        const ownLatest = agentId !== undefined && latest && latest.agentId !== agentId ? asFenceClaim(await claims.latestAnswered(issueId, agentId)) : undefined;
        const fence = writeFence({
          kind: request.kind as WriteKind,
          now,
          ...(agentId !== undefined ? { agentId } : {}),
          ...(fencingToken !== undefined ? { fencingToken } : {}),
          ...(latest ? { latest } : {}),
          ...(ownLatest ? { ownLatest } : {}),
        });
        if (fence instanceof ServiceError) return { issueId, refusal: { reason: fence.details.reason ?? 'stale-claim', message: fence.message } };
        return { issueId, ...(fence.claimId ? { claimId: fence.claimId } : {}) };
      }),
    );
  }
}
