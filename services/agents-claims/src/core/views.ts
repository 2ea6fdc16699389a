/** Claims, metering and the ready queue as the API shows them. */
import type { MeterDecision } from '@planning/metering';
import type { ApprovalGate, Task } from '@planning/proto/planning/issues/v1/tasks_pb';
import { publicState, type PublicState, type QueueState, type QuotaState } from '../domain/claims.js';
import type { ClaimRecord } from '../store/claims.js';

export interface ClaimView {
  id: string;
  workspaceId: string;
  issueId: string;
  agentId: string;
  state: PublicState;
  fencingToken: number;
  expiresAt: string;
  leaseSeconds: number;
  createdAt: string;
  renewedAt?: string;
  endedAt?: string;
  endReason?: string;
}

export interface MeteringView {
  allowed: boolean;
  kind: 'agent-runs';
  used: number;
  /** null: unlimited. */
  limit: number | null;
  period: string;
  resetsAt: string;
}

/** The task a claim call answers about; heartbeats and status posts add its approval requests. */
export interface IssueRefView {
  id: string;
  status: string;
  approvals?: ApprovalGate[];
}

export interface ClaimResult {
  claim: ClaimView;
  issue: IssueRefView;
  metering: MeteringView;
  replayed: boolean;
}

export interface ReadyItem {
  task: Task;
  rank: number;
  state: QueueState;
  quotaState: QuotaState;
  nextAction: string;
  doneEvidence: DoneEvidenceView;
  whyNotClaimable?: { reason: string; message: string };
  claim?: ClaimView;
  approvals: ApprovalGate[];
}

/** Acceptance checks done over all (DECISIONS §7), and what the done policy still needs. */
export interface DoneEvidenceView {
  completed: number;
  total: number;
  requires: string;
  missingCheckIds: string[];
  approval: string;
  ready: boolean;
}

/** The done evidence of a task as the ready queue shows it. */
export function doneEvidenceOf(t: Task): DoneEvidenceView {
  return {
    completed: t.acceptanceChecks.filter((c) => c.done).length,
    total: t.acceptanceChecks.length,
    requires: t.done?.requires ?? 'nothing',
    missingCheckIds: t.done?.missingCheckIds ?? [],
    approval: t.done?.approval ?? 'not-required',
    ready: t.done?.ready ?? true,
  };
}

export interface ReadyWork {
  items: ReadyItem[];
  summary: { total: number; claimable: number; blocked: number; heldByYou: number; quotaState: QuotaState };
  nextCursor?: string;
  metering: MeteringView;
}

/** A claim as the API shows it at `now` (an active claim past its expiry shows as expired). */
export function claimView(c: ClaimRecord, now: Date): ClaimView {
  return {
    id: c._id,
    workspaceId: c.workspaceId,
    issueId: c.issueId,
    agentId: c.agentId,
    state: publicState(c, now),
    fencingToken: c.fencingToken,
    expiresAt: c.expiresAt.toISOString(),
    leaseSeconds: c.leaseSeconds,
    createdAt: c.createdAt.toISOString(),
    ...(c.renewedAt ? { renewedAt: c.renewedAt.toISOString() } : {}),
    ...(c.endedAt ? { endedAt: c.endedAt.toISOString() } : {}),
    ...(c.endReason ? { endReason: c.endReason } : {}),
  };
}

export function meteringView(d: Pick<MeterDecision, 'allowed' | 'used' | 'limit' | 'period' | 'resetsAt'>): MeteringView {
  return { allowed: d.allowed, kind: 'agent-runs', used: d.used, limit: d.limit, period: d.period, resetsAt: d.resetsAt };
}
