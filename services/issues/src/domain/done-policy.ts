/**
 * Proof before done, and approvals that gate (docs/planning.md, "Done policy and approvals").
 *
 * A workspace (and optionally a project) sets `doneRequires`: `nothing` (the default),
 * `evidence` (every acceptance check of the task has evidence naming it by `checkId`; a task
 * without checks needs at least one evidence record) or `evidence-and-approval` (also an approval
 * approved after the last evidence, requested for `done` or for the gated move). `doneGate` says
 * which moves it gates: `done` (moves to done) or `in-review` (moves to in-review and to done).
 * Independently, a pending approval requested `for` a move (done or in-review) blocks that move
 * until a member decides it or it expires. Every one of these refusals is 409
 * `work-already-claimed` (DECISIONS §5) with its reason; a member may move anyway with an override.
 */
import { ServiceError, invalidInput } from '@planning/errors';
import type { TaskStatus } from './task-status.js';

export const DONE_REQUIREMENTS = ['nothing', 'evidence', 'evidence-and-approval'] as const;
export type DoneRequirement = (typeof DONE_REQUIREMENTS)[number];

export const DONE_GATES = ['done', 'in-review'] as const;
export type DoneGate = (typeof DONE_GATES)[number];

/** What an approval can be requested for: the two gated moves, or steps outside the service. */
export const APPROVAL_FORS = ['done', 'in-review', 'merge', 'custom'] as const;
export type ApprovalFor = (typeof APPROVAL_FORS)[number];

export const APPROVAL_GATE_STATUSES = ['pending', 'approved', 'rejected', 'expired'] as const;
export type ApprovalGateStatus = (typeof APPROVAL_GATE_STATUSES)[number];

/** The default lifetime of a pending approval request (`APPROVAL_TTL_SECONDS`). */
export const DEFAULT_APPROVAL_TTL_SECONDS = 7 * 86_400;

/** Pending approval requests one task may hold at once. */
export const MAX_PENDING_APPROVALS = 20;

export interface DonePolicy {
  requires: DoneRequirement;
  gate: DoneGate;
}

export const DEFAULT_DONE_POLICY: DonePolicy = { requires: 'nothing', gate: 'done' };

/** A policy as stored on a workspace or a project (a project's unset fields fall back to its workspace's). */
export interface StoredDonePolicy {
  doneRequires?: DoneRequirement;
  doneGate?: DoneGate;
}

/** The policy in force for a task: its project's settings, else its workspace's, else the default. */
export function effectiveDonePolicy(workspace: StoredDonePolicy | null | undefined, project?: StoredDonePolicy | null): DonePolicy {
  return {
    requires: project?.doneRequires ?? workspace?.doneRequires ?? DEFAULT_DONE_POLICY.requires,
    gate: project?.doneGate ?? workspace?.doneGate ?? DEFAULT_DONE_POLICY.gate,
  };
}

export function validateDoneRequires(value: unknown, field = 'doneRequires'): DoneRequirement {
  if (typeof value !== 'string' || !(DONE_REQUIREMENTS as readonly string[]).includes(value)) {
    throw invalidInput(field, `'${field}' must be one of ${DONE_REQUIREMENTS.join(', ')}`);
  }
  return value as DoneRequirement;
}

export function validateDoneGate(value: unknown, field = 'doneGate'): DoneGate {
  if (typeof value !== 'string' || !(DONE_GATES as readonly string[]).includes(value)) {
    throw invalidInput(field, `'${field}' must be one of ${DONE_GATES.join(', ')}`);
  }
  return value as DoneGate;
}

export function validateApprovalFor(value: unknown, field = 'for'): ApprovalFor {
  if (typeof value !== 'string' || !(APPROVAL_FORS as readonly string[]).includes(value)) {
    throw invalidInput(field, `'${field}' must be one of ${APPROVAL_FORS.join(', ')}`);
  }
  return value as ApprovalFor;
}

export const OVERRIDE_REASON_MAX = 2_000;

/** A member's override: a reason is required (400 naming `override.reason` otherwise). */
export function validateOverride(value: { reason?: unknown } | undefined): { reason: string } | undefined {
  if (value === undefined) return undefined;
  const reason = typeof value.reason === 'string' ? value.reason.trim() : '';
  if (reason.length === 0) throw invalidInput('override.reason', "'override.reason' is required: say why the done policy is set aside");
  if (reason.length > OVERRIDE_REASON_MAX) throw invalidInput('override.reason', `'override.reason' must be at most ${OVERRIDE_REASON_MAX} characters`);
  return { reason };
}

/** An approval request as the task keeps it (every pending one, and the latest decided per `for`). */
export interface ApprovalGate {
  id: string;
  for: ApprovalFor;
  status: ApprovalGateStatus;
  requestedBy: string;
  requestedAt: string;
  /** RFC 3339; a pending request stops blocking at this instant. */
  expiresAt: string;
  decidedAt?: string;
}

/** Whether a pending request still blocks at `now` (past its expiry it does not, swept or not). */
export function isLivePending(gate: ApprovalGate, now: Date): boolean {
  return gate.status === 'pending' && gate.expiresAt > now.toISOString();
}

/**
 * The task's list after a change of one request: pending requests stay, and of the decided (or
 * expired) ones only the latest per `for` is kept (what agents and the policy need).
 */
export function withGate(list: readonly ApprovalGate[] | undefined, gate: ApprovalGate): ApprovalGate[] {
  const all = [...(list ?? []).filter((g) => g.id !== gate.id), gate];
  const latestDecided = new Map<string, ApprovalGate>();
  for (const g of all) {
    if (g.status === 'pending') continue;
    const at = g.decidedAt ?? g.requestedAt;
    const seen = latestDecided.get(g.for);
    if (!seen || at >= (seen.decidedAt ?? seen.requestedAt)) latestDecided.set(g.for, g);
  }
  return all.filter((g) => g.status === 'pending' || latestDecided.get(g.for) === g).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** What the policy looks at on a task. */
export interface DoneFacts {
  checkIds: readonly string[];
  /** Checks named by evidence (`checkId`). */
  evidencedCheckIds: readonly string[];
  evidenceCount: number;
  /** RFC 3339 time of the latest evidence, if any. */
  lastEvidenceAt?: string;
  approvals: readonly ApprovalGate[];
}

export type ApprovalState = 'not-required' | 'missing' | 'pending' | 'approved' | 'rejected';

export interface DoneStatus {
  requires: DoneRequirement;
  gate: DoneGate;
  missingCheckIds: string[];
  evidencedChecks: number;
  evidenceCount: number;
  approval: ApprovalState;
  /** Every move the policy gates (and no pending approval) would pass now. */
  ready: boolean;
  /** What is still to do, in words (empty when ready). */
  nextStep: string;
}

/** The moves the policy gates. */
export function gatedMoves(policy: DonePolicy): TaskStatus[] {
  if (policy.requires === 'nothing') return [];
  return policy.gate === 'in-review' ? ['in-review', 'done'] : ['done'];
}

function missingChecks(facts: DoneFacts): string[] {
  const evidenced = new Set(facts.evidencedCheckIds);
  return facts.checkIds.filter((id) => !evidenced.has(id));
}

/** The checks the policy still needs evidence for; `none-yet` when the task has no checks and no evidence. */
function evidenceGap(facts: DoneFacts, policy: DonePolicy): { missing: string[]; noEvidence: boolean } {
  if (policy.requires === 'nothing') return { missing: [], noEvidence: false };
  return { missing: missingChecks(facts), noEvidence: facts.checkIds.length === 0 && facts.evidenceCount === 0 };
}

/** An approved request for done (or for another gated move), decided after the last evidence. */
function approvalOf(facts: DoneFacts, policy: DonePolicy, now: Date): ApprovalState {
  if (policy.requires !== 'evidence-and-approval') return 'not-required';
  const moves: readonly string[] = gatedMoves(policy);
  const relevant = facts.approvals.filter((g) => g.for === 'done' || moves.includes(g.for));
  const after = facts.lastEvidenceAt ?? '';
  if (relevant.some((g) => g.status === 'approved' && (g.decidedAt ?? '') > after)) return 'approved';
  if (relevant.some((g) => isLivePending(g, now))) return 'pending';
  if (relevant.some((g) => g.status === 'rejected' && (g.decidedAt ?? '') > after)) return 'rejected';
  return 'missing';
}

/**
 * Why the policy or a pending approval refuses moving the task to `to` now (409
 * `work-already-claimed` with reason `evidence-missing`, `approval-pending` or
 * `approval-required`), or undefined. In that order: proof first, then the people.
 */
export function doneMoveRefusal(to: TaskStatus, facts: DoneFacts, policy: DonePolicy, now: Date): ServiceError | undefined {
  const gated = gatedMoves(policy).includes(to);
  if (gated) {
    const gap = evidenceGap(facts, policy);
    if (gap.noEvidence) {
      return new ServiceError('work-already-claimed', `The done policy needs evidence before '${to}': attach at least one evidence record`, {
        reason: 'evidence-missing',
        missingCheckIds: [],
      });
    }
    if (gap.missing.length > 0) {
      return new ServiceError(
        'work-already-claimed',
        `The done policy needs evidence for every acceptance check before '${to}'; missing: ${gap.missing.join(', ')} (add evidence with checkId)`,
        { reason: 'evidence-missing', missingCheckIds: gap.missing },
      );
    }
  }
  const pending = facts.approvals.filter((g) => g.for === to && isLivePending(g, now));
  if (pending.length > 0) {
    return new ServiceError('work-already-claimed', `Approval ${pending.map((g) => g.id).join(', ')} for '${to}' is pending; a member must decide it first`, {
      reason: 'approval-pending',
    });
  }
  if (gated && policy.requires === 'evidence-and-approval' && approvalOf(facts, policy, now) !== 'approved') {
    return new ServiceError(
      'work-already-claimed',
      `The done policy needs an approval for done${policy.gate === 'in-review' ? ' (or in-review)' : ''} approved after the last evidence before '${to}'; request one and have a member approve it`,
      { reason: 'approval-required' },
    );
  }
  return undefined;
}

/** What the gated moves still need, for agents (ready work, the task contract, context packs). */
export function doneStatusOf(facts: DoneFacts, policy: DonePolicy, now: Date): DoneStatus {
  const gap = evidenceGap(facts, policy);
  const moves = gatedMoves(policy);
  const approval = approvalOf(facts, policy, now);
  const pending = facts.approvals.filter((g) => (g.for === 'done' || g.for === 'in-review') && isLivePending(g, now));
  const steps: string[] = [];
  if (gap.noEvidence) steps.push('attach at least one evidence record');
  if (gap.missing.length > 0) steps.push(`attach evidence for acceptance checks ${gap.missing.join(', ')} (add_evidence with checkId)`);
  if (pending.length > 0) steps.push(`wait for a member to decide approval ${pending.map((g) => `${g.id} (for ${g.for})`).join(', ')}`);
  else if (approval === 'missing' || approval === 'rejected') {
    steps.push(`request an approval for done (request_approval with for: done)${approval === 'rejected' ? ' again: the last one was rejected' : ''} and have a member approve it`);
  }
  const ready = steps.length === 0;
  return {
    requires: policy.requires,
    gate: policy.gate,
    missingCheckIds: gap.missing,
    evidencedChecks: facts.checkIds.length - missingChecks(facts).length,
    evidenceCount: facts.evidenceCount,
    approval,
    ready,
    nextStep: ready ? '' : `Before ${moves.length > 0 ? moves.join(' or ') : 'done'}: ${steps.join('; then ')}.`,
  };
}
