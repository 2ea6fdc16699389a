/**
 * Task health (DECISIONS §5): whether a claim would fail now and why, the reminders a task
 * raises (missing dates, stale updates, missing time, overdue), what is safe to do next, and
 * the agent-facing readiness. Everything is computed from the task and an explicit `now`.
 */
import { completeness, type Instructions } from './task-contract.js';
import { isClosed, type TaskStatus } from './task-status.js';

export const REMINDER_KINDS = ['overdue', 'stale-update', 'missing-time', 'missing-dates'] as const;
export type ReminderKind = (typeof REMINDER_KINDS)[number];

/** No change for this many days makes an active task stale (in-progress, in-review). */
export const STALE_DAYS_ACTIVE = 7;
/** ... and any other open task. */
export const STALE_DAYS_OTHER = 14;

const DAY_MS = 86_400_000;

/** What health needs to know about a task. */
export interface HealthTask {
  id: string;
  status: TaskStatus;
  dueDate?: string;
  dependencies: readonly string[];
  openDependencyCount: number;
  assignedAgentId?: string;
  timeLoggedMinutes: number;
  /** The latest change, comment, time entry, evidence or approval. */
  lastActivityAt: string;
  instructions: Instructions;
  acceptanceChecks: readonly { done: boolean }[];
  /** The claim the task is in progress under (its mirror on the task), expired or not. */
  claim?: { agentId: string; expiresAt: string };
}

/**
 * Facts about the caller and the world that are not part of the task. A claim the task itself
 * mirrors counts while unexpired; `activeClaim` adds one known from elsewhere.
 */
export interface HealthContext {
  now: Date;
  /** The calling agent, for an API token that names one. */
  agentId?: string;
  activeClaim?: { agentId: string };
}

export interface Reminder {
  kind: ReminderKind;
  message: string;
}

export interface SafeAction {
  action: string;
  description: string;
}

export type BlockReason = 'status-not-ready' | 'dependencies-open' | 'assigned-to-another-agent' | 'active-claim';

export interface TaskHealth {
  blocksAgentClaim: boolean;
  reasons: BlockReason[];
  firstReminder: Reminder | null;
  reminders: Reminder[];
  safeNextActions: SafeAction[];
  nextAction: string;
}

export type AgentReadiness = 'ready' | 'blocked' | 'needs-brief' | 'not-ready' | 'closed';

/** `YYYY-MM-DD` of `now` in UTC: due dates are calendar dates, compared in UTC. */
export function today(now: Date): string {
  return now.toISOString().slice(0, 10);
}

/** The reminders a task raises now, most urgent first. Closed tasks raise none. */
export function remindersOf(task: HealthTask, now: Date): Reminder[] {
  if (isClosed(task.status)) return [];
  const out: Reminder[] = [];
  if (task.dueDate !== undefined && task.dueDate < today(now)) {
    out.push({ kind: 'overdue', message: `Due ${task.dueDate} and not done` });
  }
  const active = task.status === 'in-progress' || task.status === 'in-review';
  const staleDays = active ? STALE_DAYS_ACTIVE : STALE_DAYS_OTHER;
  const idleMs = now.getTime() - Date.parse(task.lastActivityAt);
  if (idleMs > staleDays * DAY_MS) {
    out.push({ kind: 'stale-update', message: `No update for ${Math.floor(idleMs / DAY_MS)} days (limit ${staleDays} while ${task.status})` });
  }
  if (active && task.timeLoggedMinutes === 0) {
    out.push({ kind: 'missing-time', message: `No time logged while ${task.status}` });
  }
  if (task.dueDate === undefined) {
    out.push({ kind: 'missing-dates', message: 'No due date' });
  }
  return out;
}

/** Why a claim by the caller would fail now (empty: it would not). */
export function claimBlockers(task: HealthTask, context: HealthContext): BlockReason[] {
  const reasons: BlockReason[] = [];
  if (task.status !== 'ready') reasons.push('status-not-ready');
  if (task.openDependencyCount > 0) reasons.push('dependencies-open');
  if (task.assignedAgentId !== undefined && context.agentId !== undefined && task.assignedAgentId !== context.agentId) {
    reasons.push('assigned-to-another-agent');
  }
  const mirrored = task.claim !== undefined && task.claim.expiresAt > context.now.toISOString();
  if (context.activeClaim || mirrored) reasons.push('active-claim');
  return reasons;
}

const REMINDER_ACTIONS: Readonly<Record<ReminderKind, SafeAction>> = {
  overdue: {
    action: 'reschedule-or-escalate',
    description: 'Agree a new due date (PATCH /api/issues/{id} dueDate) or request an approval to continue late',
  },
  'stale-update': { action: 'post-status', description: 'Post a status update as a comment (POST /api/issues/{id}/comments)' },
  'missing-time': { action: 'log-time', description: 'Log the time spent so far (POST /api/issues/{id}/time-entries)' },
  'missing-dates': { action: 'set-due-date', description: 'Set a due date (PATCH /api/issues/{id} dueDate)' },
};

const BLOCKER_ACTIONS: Readonly<Record<BlockReason, SafeAction>> = {
  'status-not-ready': { action: 'check-status', description: "Only 'ready' tasks can be claimed; read the task before acting" },
  'dependencies-open': { action: 'finish-dependencies', description: 'Finish or unblock the open dependencies first' },
  'assigned-to-another-agent': { action: 'pick-other-work', description: 'The task is assigned to another agent; pick other ready work' },
  'active-claim': { action: 'pick-other-work', description: 'Another agent holds an active claim on this task' },
};

/** The agent-facing readiness of a task: can an agent pick it up and know what to do? */
export function agentReadiness(task: Pick<HealthTask, 'status' | 'openDependencyCount' | 'instructions'>): AgentReadiness {
  if (isClosed(task.status)) return 'closed';
  if (task.status === 'blocked' || task.openDependencyCount > 0) return 'blocked';
  if (!completeness(task.instructions).ready) return 'needs-brief';
  if (task.status === 'backlog') return 'not-ready';
  return 'ready';
}

/** One sentence on what to do with the task next. */
export function nextActionOf(task: HealthTask, reasons: readonly BlockReason[]): string {
  const checks = task.acceptanceChecks;
  const open = checks.filter((c) => !c.done).length;
  switch (task.status) {
    case 'done':
      return 'Nothing to do: the task is done (reopen it by moving it to ready).';
    case 'cancelled':
      return 'Nothing to do: the task is cancelled (move it to backlog to revive it).';
    case 'backlog':
      return 'Refine the task contract, then move the task to ready.';
    case 'blocked':
      return 'Resolve the blocker, then move the task back to ready.';
    case 'in-review':
      return 'Review the evidence, then move the task to done (or back to in-progress).';
    case 'in-progress':
      if (task.timeLoggedMinutes === 0) return 'Log time, attach evidence for the acceptance checks, then move the task to in-review.';
      if (open > 0) return `Attach evidence for the ${open} open acceptance check${open === 1 ? '' : 's'}, then move the task to in-review.`;
      return 'Move the task to in-review.';
    case 'ready':
      if (reasons.includes('dependencies-open')) return `Finish the ${task.openDependencyCount} open dependenc${task.openDependencyCount === 1 ? 'y' : 'ies'} first.`;
      if (reasons.includes('assigned-to-another-agent')) return 'Assigned to another agent: pick other ready work.';
      if (reasons.includes('active-claim')) return 'Claimed by another agent: pick other ready work.';
      if (!completeness(task.instructions).ready) return 'Complete the task contract (goal, expected output, verification), then claim it.';
      return 'Claim it (POST /api/agents/claim) and start work.';
  }
}

/**
 * Until when (milliseconds since the epoch) the task's health for a caller stays what it is at
 * `now`, by the passing of time alone: the first instant the claim mirror expires, the task
 * becomes overdue, stale, or a day staler (the stale reminder counts days). `now` itself when
 * some date cannot be read (nothing to promise); Infinity when nothing can change.
 */
export function healthStableUntil(task: HealthTask, now: Date): number {
  const at = now.getTime();
  let until = Infinity;
  const changesAt = (t: number): void => {
    if (Number.isNaN(t)) until = at;
    else if (t > at && t < until) until = t;
  };
  // claimBlockers: `expiresAt > now` while mirrored.
  if (task.claim) changesAt(Date.parse(task.claim.expiresAt));
  if (!isClosed(task.status)) {
    // remindersOf: overdue once `today(now)` is past the due date.
    if (task.dueDate !== undefined) changesAt(Date.parse(`${task.dueDate}T00:00:00.000Z`) + DAY_MS);
    // Stale after `staleDays` whole days of no activity; the message then counts the days.
    const last = Date.parse(task.lastActivityAt);
    const limit = (task.status === 'in-progress' || task.status === 'in-review' ? STALE_DAYS_ACTIVE : STALE_DAYS_OTHER) * DAY_MS;
    const idle = at - last;
    changesAt(idle <= limit ? last + limit + 1 : last + (Math.floor(idle / DAY_MS) + 1) * DAY_MS);
  }
  return until;
}

/** The health of a task for the caller, now. */
export function healthOf(task: HealthTask, context: HealthContext): TaskHealth {
  const reasons = claimBlockers(task, context);
  const reminders = remindersOf(task, context.now);
  const actions: SafeAction[] = [];
  const push = (a: SafeAction): void => {
    if (!actions.some((x) => x.action === a.action)) actions.push(a);
  };
  for (const r of reminders) push(REMINDER_ACTIONS[r.kind]);
  for (const r of reasons) push(BLOCKER_ACTIONS[r]);
  if (reasons.length === 0) push({ action: 'claim', description: 'Claim the task (POST /api/agents/claim) to start work' });
  return {
    blocksAgentClaim: reasons.length > 0,
    reasons,
    firstReminder: reminders[0] ?? null,
    reminders,
    safeNextActions: actions,
    nextAction: nextActionOf(task, reasons),
  };
}
