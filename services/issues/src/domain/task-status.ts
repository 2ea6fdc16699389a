import { ServiceError } from '@planning/errors';

/** Task statuses (DECISIONS §5). */
export const TASK_STATUSES = ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** Statuses in which a task is finished: no reminders, not counted as open work. */
export const CLOSED_STATUSES: readonly TaskStatus[] = ['done', 'cancelled'];

export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === 'string' && (TASK_STATUSES as readonly string[]).includes(value);
}

export function isClosed(status: TaskStatus): boolean {
  return CLOSED_STATUSES.includes(status);
}

/**
 * The allowed moves (DECISIONS §5): backlog↔ready; ready→in-progress; in-progress→in-review,
 * ready (release), blocked; in-review→done, in-progress; blocked→ready; done→ready (reopen);
 * any→cancelled; cancelled→backlog.
 */
const MOVES: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  backlog: ['ready', 'cancelled'],
  ready: ['backlog', 'in-progress', 'cancelled'],
  'in-progress': ['in-review', 'ready', 'blocked', 'cancelled'],
  'in-review': ['done', 'in-progress', 'cancelled'],
  blocked: ['ready', 'cancelled'],
  done: ['ready', 'cancelled'],
  cancelled: ['backlog'],
};

/** Who asks for a move: agents (API tokens) start work only by claiming it. */
export type MoveActor = 'human' | 'agent' | 'claim' | 'system';

export function allowedMoves(from: TaskStatus): readonly TaskStatus[] {
  return MOVES[from];
}

/** Why a move is refused, or undefined when it is allowed. Staying put is not a move. */
export function moveRefusal(from: TaskStatus, to: TaskStatus, actor: MoveActor = 'human'): string | undefined {
  if (from === to) return undefined;
  if (!MOVES[from].includes(to)) {
    const allowed = MOVES[from];
    return `A task cannot move from '${from}' to '${to}' (from '${from}' it can move to ${allowed.map((s) => `'${s}'`).join(', ')})`;
  }
  if (from === 'ready' && to === 'in-progress' && actor === 'agent') {
    return "An agent starts a task by claiming it (POST /api/agents/claim), not by setting 'in-progress'";
  }
  return undefined;
}

/**
 * THE status rule: every status change (single PATCH, bulk update, MCP, claims) passes here.
 * Refusals are 409 `work-already-claimed` with reason `invalid-transition`, naming the move.
 */
export function assertMove(from: TaskStatus, to: TaskStatus, actor: MoveActor = 'human'): void {
  const refusal = moveRefusal(from, to, actor);
  if (refusal) throw new ServiceError('work-already-claimed', refusal, { reason: 'invalid-transition' });
}
