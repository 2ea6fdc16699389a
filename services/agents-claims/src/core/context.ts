/**
 * What every part of the claims core shares: its dependencies, the scopes claims need, and the
 * calls to the issues service with the principal and deadline each kind of call runs under.
 */
import type { AccessLookup } from '@planning/access';
import type { IdempotencyKeys } from '@planning/idempotency';
import { conflict, ServiceError } from '@planning/errors';
import type { UsageMeter } from '@planning/metering';
import type { ClaimSupportService, ClaimTarget } from '@planning/proto/planning/issues/v1/claim_support_pb';
import { callOptionsFrom, SYSTEM_PRINCIPAL, type CallContext, type RpcCallOptions, type RpcClient } from '@planning/rpc';
import type { ClaimRepository } from '../store/claims.js';
import type { PolicyRepository } from '../store/policies.js';

export type IssuesClient = RpcClient<typeof ClaimSupportService>;

/** Claims and writes under them need both (DECISIONS §3, §7). */
export const CLAIM_SCOPES = ['issues:write', 'agents:execute'] as const;
export const READ_SCOPES = ['agents:read'] as const;

/** Where the claim requests' idempotency-key records live. */
export const IDEMPOTENCY_COLLECTION = 'idempotency_keys';

export const SYSTEM_ACTOR = { type: 'system', id: 'agents-claims' };

export interface CoreLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
}

export interface CoreDeps {
  claims: ClaimRepository;
  idempotency: IdempotencyKeys;
  policies: PolicyRepository;
  meter: UsageMeter;
  access: AccessLookup;
  issues: IssuesClient;
  clock: () => Date;
  logger: CoreLogger;
  startTimeoutMs: number;
  idempotencyLeaseMs: number;
}

export const staleClaim = (message = 'You hold no active claim on this issue (it expired, was released, completed or taken over)') =>
  conflict('stale-claim', message);

/** As the system, with a fresh deadline: clean-up must not die with the caller's request. */
export function asSystem(): RpcCallOptions {
  return { principal: SYSTEM_PRINCIPAL };
}

/** As the caller (its principal and deadline), but not cancelled with it: a started claim finishes or is undone. */
export function asCaller(ctx: CallContext): RpcCallOptions {
  return callOptionsFrom(ctx, { signal: undefined });
}

export async function claimTarget(issues: IssuesClient, issueId: string, options: RpcCallOptions): Promise<ClaimTarget> {
  const res = await issues.getClaimTarget({ issueId }, options);
  if (!res.target) throw new ServiceError('internal', 'Internal error');
  return res.target;
}

/** The task as the system sees it; null when it no longer exists. */
export async function systemTarget(issues: IssuesClient, issueId: string): Promise<ClaimTarget | null> {
  try {
    return await claimTarget(issues, issueId, asSystem());
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'not-found') return null;
    throw err;
  }
}
