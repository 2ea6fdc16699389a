/**
 * The stored shapes of tasks and what accumulates on them, and the fields the repository derives
 * from a task's own fields for searching and sorting.
 */
import type { StoredDocument } from '@planning/store';
import { APPROVAL_GATE_STATUSES, type ApprovalFor, type ApprovalGate, type ApprovalGateStatus } from '../domain/done-policy.js';
import { queueKeyOf, type ClaimEnd, type ClaimMirror, type EndedClaim } from '../domain/claims.js';
import { normalizeForSearch } from '../domain/fields.js';
import { sortKeysOf, type SortKeys } from '../domain/ranking.js';
import type { HealthTask } from '../domain/task-health.js';
import type { FieldChange, TaskFields } from '../domain/tasks.js';

export type Actor = { type: string; id: string };

export interface TaskRecord extends StoredDocument, TaskFields {
  createdAt: string;
  updatedAt: string;
  /** The user or API key id that created the task. */
  createdBy: string;
  /** Incremented on every change of the task's own fields. */
  version: number;
  /** Dependencies that are not done (kept current when a dependency's status changes). */
  openDependencyCount: number;
  /** Tasks that depend on this one. Every dependency change writes this document, so concurrent graph changes conflict. */
  dependentCount: number;
  timeLoggedMinutes: number;
  evidenceCount: number;
  lastActivityAt: string;
  /** Title and description, case folded: `q` is a literal substring test on it. */
  searchText: string;
  /** One unique, comparable key per sort (see `sortKeysOf`). */
  sortKeys: SortKeys;
  /** The work-queue order (priority, due date, age) as one unique key (see `queueKeyOf`). */
  queueKey: string;
  /**
   * Whose ready queue holds the task: its assigned agent, or `ANY_AGENT` (every agent's). A
   * top-level key beside `queueKey`, so an agent's queue is two ordered index walks and its counts
   * are index-only, instead of an `$or` with a missing-field test on `agent.assignedAgentId`.
   */
  queueAgent: string;
  /** The claim the task is in progress under (set and cleared with the status; see domain/claims). */
  claim?: ClaimMirror;
  /** The fencing token of the task's latest claim; the next claim gets one more. */
  lastFencingToken?: number;
  /**
   * Claims that ended here while their start could still land (until their `startBy`): a start of
   * one of them is refused. Bookkeeping of the claim protocol only: never part of a task message
   * (REST, MCP, events), and not a change of the task (no version, no activity).
   */
  endedClaims?: EndedClaim[];
  /**
   * The last claim that left the task and how (set in the same write): agents-claims ends a claim
   * the way the task saw it end (a completion that beat the lease's expiry stays a completion).
   */
  lastClaimEnd?: { claimId: string; end: ClaimEnd };
  /**
   * What the done policy reads, kept with the task in the same transactions as the evidence and
   * approvals they summarise (so a status move checks them atomically): the acceptance checks
   * evidence names, the latest evidence's time, and the task's approval requests (pending ones,
   * and the latest decided per `for`). Absent on tasks from before they were kept: read from the
   * evidence collection then (see TaskRepository.doneFacts).
   */
  evidencedCheckIds?: string[];
  lastEvidenceAt?: string;
  approvalGates?: ApprovalGate[];
}

export interface ActivityRecord extends StoredDocument {
  workspaceId: string;
  issueId: string;
  actor: Actor;
  kind: string;
  changes: FieldChange[];
  at: string;
}

export interface CommentRecord extends StoredDocument {
  workspaceId: string;
  issueId: string;
  authorId: string;
  authorType: string;
  body: string;
  createdAt: string;
}

export interface TimeEntryRecord extends StoredDocument {
  workspaceId: string;
  issueId: string;
  actorId: string;
  minutes: number;
  note: string;
  loggedAt: string;
  createdAt: string;
}

export const EVIDENCE_KINDS = ['link', 'log', 'test-result', 'artifact', 'note'] as const;
export type EvidenceKind = (typeof EVIDENCE_KINDS)[number];

export interface EvidenceRecord extends StoredDocument {
  workspaceId: string;
  issueId: string;
  kind: EvidenceKind;
  title: string;
  url?: string;
  body?: string;
  checkId?: string;
  createdBy: string;
  createdAt: string;
}

export const APPROVAL_STATUSES = APPROVAL_GATE_STATUSES;
export type ApprovalStatus = ApprovalGateStatus;

export interface ApprovalRecord extends StoredDocument {
  workspaceId: string;
  issueId: string;
  requestedBy: string;
  reason: string;
  status: ApprovalStatus;
  /** The move (or outside step) it was requested for; absent on requests from before `for` existed: custom. */
  for?: ApprovalFor;
  /** When a pending request expires; absent on old requests: `createdAt` + the approval TTL. */
  expiresAt?: string;
  decidedBy?: string;
  decidedAt?: string;
  decisionNote?: string;
  createdAt: string;
}

/** The task's own fields, as the domain sees them. */
export function fieldsOf(task: TaskRecord): TaskFields {
  const fields: TaskFields = {
    workspaceId: task.workspaceId,
    projectId: task.projectId,
    title: task.title,
    description: task.description,
    status: task.status,
    priority: task.priority,
    labels: task.labels,
    dependencies: task.dependencies,
    acceptanceChecks: task.acceptanceChecks,
    agent: task.agent,
  };
  for (const key of ['milestoneId', 'initiativeId', 'parentId', 'dueDate', 'estimate'] as const) {
    if (task[key] !== undefined) (fields as unknown as Record<string, unknown>)[key] = task[key];
  }
  return fields;
}

/** `queueAgent` of a task assigned to nobody (no agent id is empty). */
export const ANY_AGENT = '';

/** Whose ready queue holds a task (see `TaskRecord.queueAgent`). */
export function queueAgentOf(task: Pick<TaskRecord, 'agent'>): string {
  return task.agent.assignedAgentId ?? ANY_AGENT;
}

/** Search text, sort keys, the queue key and the queue's agent from the task's current fields. */
export function derivedFields(task: Pick<TaskRecord, '_id' | 'title' | 'description' | 'priority' | 'dueDate' | 'createdAt' | 'updatedAt' | 'agent'>): {
  searchText: string;
  sortKeys: SortKeys;
  queueKey: string;
  queueAgent: string;
} {
  return {
    searchText: normalizeForSearch(`${task.title}\n${task.description}`),
    sortKeys: sortKeysOf({ ...task, id: task._id }),
    queueKey: queueKeyOf({ ...task, id: task._id }),
    queueAgent: queueAgentOf(task),
  };
}

/** What health needs from a stored task. */
export function healthInput(task: TaskRecord): HealthTask {
  return {
    id: task._id,
    status: task.status,
    ...(task.dueDate !== undefined ? { dueDate: task.dueDate } : {}),
    dependencies: task.dependencies,
    openDependencyCount: task.openDependencyCount,
    ...(task.agent.assignedAgentId !== undefined ? { assignedAgentId: task.agent.assignedAgentId } : {}),
    timeLoggedMinutes: task.timeLoggedMinutes,
    lastActivityAt: task.lastActivityAt,
    instructions: task.agent.instructions,
    acceptanceChecks: task.acceptanceChecks,
    ...(task.claim ? { claim: { agentId: task.claim.agentId, expiresAt: task.claim.expiresAt } } : {}),
  };
}
