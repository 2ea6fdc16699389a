import { describe, expect, it } from 'vitest';
import { emptyInstructions } from './task-contract.js';
import { agentReadiness, claimBlockers, healthOf, healthStableUntil, remindersOf, type HealthTask } from './task-health.js';

const NOW = new Date('2025-06-10T12:00:00.000Z');
const daysAgo = (d: number, extraMs = 0) => new Date(NOW.getTime() - d * 86_400_000 - extraMs).toISOString();
const brief = { ...emptyInstructions(), objective: 'g', expectedOutput: 'o', verification: ['v'] };

function task(overrides: Partial<HealthTask> = {}): HealthTask {
  return {
    id: 'iss_1',
    status: 'ready',
    dueDate: '2025-06-20',
    dependencies: [],
    openDependencyCount: 0,
    timeLoggedMinutes: 0,
    lastActivityAt: daysAgo(1),
    instructions: brief,
    acceptanceChecks: [],
    ...overrides,
  };
}

const kinds = (t: HealthTask, now = NOW) => remindersOf(t, now).map((r) => r.kind);

describe('task health: reminders', () => {
  it('task health: a fresh task with a future due date raises nothing', () => {
    expect(kinds(task())).toEqual([]);
  });

  it('task health: missing-dates when there is no due date', () => {
    const { dueDate: _none, ...rest } = task();
    expect(kinds(rest as HealthTask)).toEqual(['missing-dates']);
  });

  it('task health: overdue once the due date has passed (not on the day itself), and not when done or cancelled', () => {
    expect(kinds(task({ dueDate: '2025-06-10' }))).toEqual([]);
    expect(kinds(task({ dueDate: '2025-06-09' }))).toEqual(['overdue']);
    expect(kinds(task({ dueDate: '2025-06-09', status: 'done' }))).toEqual([]);
    expect(kinds(task({ dueDate: '2025-06-09', status: 'cancelled' }))).toEqual([]);
  });

  it('task health: stale-update after 7 days while in progress or in review, 14 days otherwise', () => {
    const active = { status: 'in-progress' as const, timeLoggedMinutes: 30 };
    expect(kinds(task({ ...active, lastActivityAt: daysAgo(7) }))).toEqual([]);
    expect(kinds(task({ ...active, lastActivityAt: daysAgo(7, 1) }))).toEqual(['stale-update']);
    expect(kinds(task({ status: 'in-review', timeLoggedMinutes: 5, lastActivityAt: daysAgo(8) }))).toEqual(['stale-update']);
    expect(kinds(task({ lastActivityAt: daysAgo(13) }))).toEqual([]);
    expect(kinds(task({ lastActivityAt: daysAgo(14, 1) }))).toEqual(['stale-update']);
    expect(kinds(task({ status: 'backlog', lastActivityAt: daysAgo(15) }))).toEqual(['stale-update']);
  });

  it('task health: missing-time only while in progress or in review with nothing logged', () => {
    expect(kinds(task({ status: 'in-progress' }))).toEqual(['missing-time']);
    expect(kinds(task({ status: 'in-review' }))).toEqual(['missing-time']);
    expect(kinds(task({ status: 'in-progress', timeLoggedMinutes: 1 }))).toEqual([]);
    expect(kinds(task({ status: 'ready' }))).toEqual([]);
    expect(kinds(task({ status: 'blocked' }))).toEqual([]);
  });

  it('task health: every reminder at once comes most urgent first; closed tasks raise none', () => {
    const { dueDate: _none, ...undated } = task({ status: 'in-progress', lastActivityAt: daysAgo(30) });
    expect(kinds(undated as HealthTask)).toEqual(['stale-update', 'missing-time', 'missing-dates']);
    expect(kinds(task({ status: 'in-progress', lastActivityAt: daysAgo(30), dueDate: '2025-01-01' }))).toEqual(['overdue', 'stale-update', 'missing-time']);
    expect(kinds(task({ status: 'done', lastActivityAt: daysAgo(300), dueDate: '2025-01-01' }))).toEqual([]);
  });
});

describe('task health: claim blockers and next actions', () => {
  it('task health: a ready task without open dependencies can be claimed', () => {
    const h = healthOf(task(), { now: NOW });
    expect(h).toMatchObject({ blocksAgentClaim: false, reasons: [], firstReminder: null });
    expect(h.safeNextActions.map((a) => a.action)).toEqual(['claim']);
    expect(h.nextAction).toMatch(/Claim it/);
  });

  it('task health: status, open dependencies, another agent and an active claim each block a claim', () => {
    expect(claimBlockers(task({ status: 'backlog' }), { now: NOW })).toEqual(['status-not-ready']);
    expect(claimBlockers(task({ openDependencyCount: 2 }), { now: NOW })).toEqual(['dependencies-open']);
    expect(claimBlockers(task({ assignedAgentId: 'other' }), { now: NOW, agentId: 'me' })).toEqual(['assigned-to-another-agent']);
    expect(claimBlockers(task({ assignedAgentId: 'me' }), { now: NOW, agentId: 'me' })).toEqual([]);
    // A person (no calling agent) is not blocked by an assignment.
    expect(claimBlockers(task({ assignedAgentId: 'other' }), { now: NOW })).toEqual([]);
    expect(claimBlockers(task(), { now: NOW, activeClaim: { agentId: 'x' } })).toEqual(['active-claim']);
  });

  it('task health: safe next actions follow reminders, then blockers; first reminder is the most urgent', () => {
    const h = healthOf(task({ dueDate: '2025-06-01', openDependencyCount: 1 }), { now: NOW });
    expect(h.blocksAgentClaim).toBe(true);
    expect(h.firstReminder?.kind).toBe('overdue');
    expect(h.safeNextActions.map((a) => a.action)).toEqual(['reschedule-or-escalate', 'finish-dependencies']);
    expect(h.nextAction).toMatch(/1 open dependency/);
  });

  it('task health: the next action follows the status', () => {
    const next = (t: HealthTask) => healthOf(t, { now: NOW }).nextAction;
    expect(next(task({ status: 'done' }))).toMatch(/done/);
    expect(next(task({ status: 'cancelled' }))).toMatch(/cancelled/);
    expect(next(task({ status: 'backlog' }))).toMatch(/ready/);
    expect(next(task({ status: 'in-progress' }))).toMatch(/Log time/);
    expect(next(task({ status: 'in-progress', timeLoggedMinutes: 5, acceptanceChecks: [{ done: false }, { done: true }] }))).toMatch(/1 open acceptance check/);
    expect(next(task({ status: 'in-review' }))).toMatch(/Review the evidence/);
    expect(next(task({ instructions: emptyInstructions() }))).toMatch(/Complete the task contract/);
  });
});

describe('task health: agent readiness', () => {
  it('task health: readiness is ready only for an open, unblocked task with a ready brief', () => {
    expect(agentReadiness({ status: 'ready', openDependencyCount: 0, instructions: brief })).toBe('ready');
    expect(agentReadiness({ status: 'in-progress', openDependencyCount: 0, instructions: brief })).toBe('ready');
    expect(agentReadiness({ status: 'ready', openDependencyCount: 1, instructions: brief })).toBe('blocked');
    expect(agentReadiness({ status: 'blocked', openDependencyCount: 0, instructions: brief })).toBe('blocked');
    expect(agentReadiness({ status: 'ready', openDependencyCount: 0, instructions: emptyInstructions() })).toBe('needs-brief');
    expect(agentReadiness({ status: 'backlog', openDependencyCount: 0, instructions: brief })).toBe('not-ready');
    expect(agentReadiness({ status: 'done', openDependencyCount: 0, instructions: brief })).toBe('closed');
    expect(agentReadiness({ status: 'cancelled', openDependencyCount: 3, instructions: brief })).toBe('closed');
  });
});

describe('task health: how long it holds', () => {
  const DAY = 86_400_000;
  const STATUSES = ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] as const;
  /** A deterministic pseudo-random sequence (the same tasks every run). */
  const rng = (seed: number) => () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);

  it('task health: stays the same from now until healthStableUntil, and changes at that instant (600 random tasks)', () => {
    const random = rng(7);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
    let finite = 0;
    for (let n = 0; n < 600; n++) {
      const now = new Date(NOW.getTime() + Math.floor(random() * 3 * DAY));
      const claimed = random() < 0.4;
      const t = task({
        status: pick(STATUSES),
        ...(random() < 0.7 ? { dueDate: new Date(NOW.getTime() + Math.floor((random() - 0.5) * 6 * DAY)).toISOString().slice(0, 10) } : { dueDate: undefined }),
        lastActivityAt: new Date(now.getTime() - Math.floor(random() * 20 * DAY)).toISOString(),
        ...(claimed ? { claim: { agentId: pick(['agt_a', 'agt_b']), expiresAt: new Date(now.getTime() + Math.floor((random() - 0.3) * DAY)).toISOString() } } : {}),
        timeLoggedMinutes: pick([0, 5]),
      });
      const context = { now, ...(random() < 0.5 ? { agentId: 'agt_a' } : {}) };
      const health = healthOf(t, context);
      const until = healthStableUntil(t, now);
      expect(until).toBeGreaterThan(now.getTime());
      const last = Number.isFinite(until) ? until - 1 : now.getTime() + 30 * DAY;
      for (const at of [now.getTime() + 1, Math.floor(now.getTime() + random() * (last - now.getTime())), last]) {
        expect(healthOf(t, { ...context, now: new Date(at) })).toEqual(health);
      }
      if (Number.isFinite(until)) {
        finite++;
        expect(healthOf(t, { ...context, now: new Date(until) })).not.toEqual(health);
      }
    }
    expect(finite).toBeGreaterThan(300);
  });

  it('task health: a date it cannot read promises nothing (now itself)', () => {
    expect(healthStableUntil(task({ lastActivityAt: 'not a date' }), NOW)).toBe(NOW.getTime());
    expect(healthStableUntil(task({ status: 'done', lastActivityAt: 'not a date', claim: { agentId: 'a', expiresAt: daysAgo(-1) } }), NOW)).toBe(
      NOW.getTime() + DAY,
    );
  });
});
