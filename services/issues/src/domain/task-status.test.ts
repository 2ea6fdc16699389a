import { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import { allowedMoves, assertMove, moveRefusal, TASK_STATUSES, type TaskStatus } from './task-status.js';

/** The table of DECISIONS §5, written out independently of the implementation. */
const ALLOWED: Record<TaskStatus, TaskStatus[]> = {
  backlog: ['ready', 'cancelled'],
  ready: ['backlog', 'in-progress', 'cancelled'],
  'in-progress': ['in-review', 'ready', 'blocked', 'cancelled'],
  'in-review': ['done', 'in-progress', 'cancelled'],
  blocked: ['ready', 'cancelled'],
  done: ['ready', 'cancelled'],
  cancelled: ['backlog'],
};

const pairs = TASK_STATUSES.flatMap((from) => TASK_STATUSES.filter((to) => to !== from).map((to) => [from, to] as const));

describe('task status: moves', () => {
  it.each(pairs.filter(([from, to]) => ALLOWED[from].includes(to)))('task status: %s -> %s is allowed', (from, to) => {
    expect(() => assertMove(from, to)).not.toThrow();
    expect(allowedMoves(from)).toContain(to);
  });

  it.each(pairs.filter(([from, to]) => !ALLOWED[from].includes(to)))('task status: %s -> %s is refused with 409 invalid-transition naming the move', (from, to) => {
    let error: unknown;
    try {
      assertMove(from, to);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ServiceError);
    const e = error as ServiceError;
    expect(e.code).toBe('work-already-claimed');
    expect(e.httpStatus).toBe(409);
    expect(e.details.reason).toBe('invalid-transition');
    expect(e.message).toContain(`'${from}'`);
    expect(e.message).toContain(`'${to}'`);
  });

  it('task status: staying in the same status is not a move', () => {
    for (const s of TASK_STATUSES) expect(moveRefusal(s, s)).toBeUndefined();
  });

  it('task status: every status can be cancelled, and cancelled only goes back to backlog', () => {
    for (const s of TASK_STATUSES.filter((x) => x !== 'cancelled')) expect(moveRefusal(s, 'cancelled')).toBeUndefined();
    expect(allowedMoves('cancelled')).toEqual(['backlog']);
  });

  it('task status: an agent starts work only by claiming; people and claims may move ready -> in-progress', () => {
    expect(() => assertMove('ready', 'in-progress', 'agent')).toThrow(/claim/);
    expect(() => assertMove('ready', 'in-progress', 'human')).not.toThrow();
    expect(() => assertMove('ready', 'in-progress', 'claim')).not.toThrow();
    // Other moves are the same for agents.
    expect(() => assertMove('in-progress', 'in-review', 'agent')).not.toThrow();
    expect(() => assertMove('backlog', 'done', 'agent')).toThrow(ServiceError);
  });
});
