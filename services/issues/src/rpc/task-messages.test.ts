import { create } from '@bufbuild/protobuf';
import { TaskViewSchema } from '@planning/proto/planning/issues/v1/tasks_pb';
import { deepFreeze } from '@planning/store';
import { describe, expect, it } from 'vitest';
import type { DoneStatus } from '../domain/done-policy.js';
import { healthOf } from '../domain/task-health.js';
import { healthInput, type TaskRecord } from '../store/task-documents.js';
import { sharedTaskView, toHealthMessage, toTaskMessage, toTaskView } from './task-messages.js';

const NOW = new Date('2026-06-10T12:00:00.000Z');

function record(overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    _id: 'iss_1',
    workspaceId: 'ws_1',
    projectId: 'prj_1',
    title: 'Parse the envelope',
    description: '',
    status: 'ready',
    priority: 'high',
    labels: ['imports'],
    dependencies: [],
    acceptanceChecks: [],
    agent: { instructions: { objective: '', constraints: [], expectedOutput: '', verification: [], permissions: [], escalation: '' } },
    createdAt: '2026-06-01T00:00:00.000Z',
    updatedAt: '2026-06-01T00:00:00.000Z',
    createdBy: 'usr_1',
    version: 1,
    openDependencyCount: 0,
    dependentCount: 0,
    timeLoggedMinutes: 0,
    evidenceCount: 0,
    lastActivityAt: '2026-06-01T00:00:00.000Z',
    searchText: 'parse the envelope',
    sortKeys: { priority: 'a', updatedAt: 'b', createdAt: 'c', dueDate: 'd', title: 'e' },
    queueKey: 'q',
    ...overrides,
  } as TaskRecord;
}

const DONE: DoneStatus = {
  requires: 'evidence',
  gate: 'done',
  missingCheckIds: ['chk_2'],
  evidencedChecks: 1,
  approval: 'not-required',
  ready: false,
  nextStep: 'Attach evidence for chk_2',
  evidenceCount: 1,
};

const CASES: [string, TaskRecord, DoneStatus?][] = [
  ['a bare ready task', record()],
  [
    'every optional field set',
    record({
      milestoneId: 'ms_1',
      initiativeId: 'ini_1',
      parentId: 'iss_0',
      dueDate: '2026-06-01',
      estimate: 2.5,
      description: 'A long description',
      dependencies: ['iss_7', 'iss_8'],
      openDependencyCount: 1,
      dependentCount: 3,
      timeLoggedMinutes: 30,
      evidenceCount: 2,
      acceptanceChecks: [
        { id: 'chk_1', title: 'Tests pass', done: true },
        { id: 'chk_2', title: 'Docs', done: false },
      ],
      agent: {
        assignedAgentId: 'agent-a',
        instructions: { objective: 'Ship it', constraints: ['no new deps'], expectedOutput: 'A PR', verification: ['pnpm test'], permissions: ['repo:write'], escalation: 'Ask' },
      },
      approvalGates: [
        { id: 'apr_1', for: 'done', status: 'pending', requestedBy: 'key_1', requestedAt: '2026-06-01T00:00:00.000Z', expiresAt: '2026-06-02T00:00:00.000Z' },
        { id: 'apr_2', for: 'merge', status: 'approved', requestedBy: 'key_1', requestedAt: '2026-06-01T00:00:00.000Z', expiresAt: '2026-07-02T00:00:00.000Z', decidedAt: '2026-06-03T00:00:00.000Z' },
      ],
    } as Partial<TaskRecord>),
    DONE,
  ],
  ['in progress under a claim', record({ status: 'in-progress', claim: { claimId: 'clm_1', agentId: 'agent-b', fencingToken: 4, expiresAt: '2026-06-10T12:05:00.000Z' } } as Partial<TaskRecord>)],
  ['a check whose state was never set', record({ acceptanceChecks: [{ id: 'chk_1', title: 'Tests pass' }] } as Partial<TaskRecord>)],
  ['done', record({ status: 'done', dueDate: '2026-01-01' })],
];

describe('toTaskView', () => {
  it.each(CASES)('is the message create() makes of the init shape: %s', (_name, task, done) => {
    for (const context of [{ now: NOW }, { now: NOW, agentId: 'agent-a' }, { now: NOW, agentId: 'agent-z' }]) {
      const init = {
        task: toTaskMessage(task, { now: NOW, ...(done ? { done } : {}) }),
        health: toHealthMessage(healthOf(healthInput(task), context)),
      };
      expect(toTaskView(task, context, done)).toStrictEqual(create(TaskViewSchema, init));
    }
  });

  it('shares no object with the health constants (a later page cannot see a change made to an earlier one)', () => {
    const first = toTaskView(record(), { now: NOW });
    first.health!.safeNextActions[0]!.description = 'changed';
    const second = toTaskView(record(), { now: NOW });
    expect(second.health!.safeNextActions[0]!.description).not.toBe('changed');
  });
});

describe('shared task views', () => {
  const HOUR = 3_600_000;
  const at = (ms: number) => new Date(NOW.getTime() + ms);
  const gate = { id: 'apr_1', for: 'done' as const, status: 'pending' as const, requestedBy: 'agt_a', requestedAt: NOW.toISOString(), expiresAt: at(2 * HOUR).toISOString() };
  const claim = { claimId: 'clm_1', agentId: 'agt_b', expiresAt: at(HOUR).toISOString(), fencingToken: 3 };

  it('a frozen record gets one frozen view per kind of caller while the view holds, equal to toTaskView', () => {
    const brief = { objective: 'o', constraints: [], expectedOutput: 'e', verification: ['v'], permissions: [], escalation: '' };
    const frozen = deepFreeze(
      record({ status: 'in-progress', dueDate: '2026-06-11', approvalGates: [gate], claim, agent: { assignedAgentId: 'agt_a', instructions: brief } }),
    );
    const a = sharedTaskView(frozen, { now: NOW, agentId: 'agt_a' });
    expect(Object.isFrozen(a) && Object.isFrozen(a.task) && Object.isFrozen(a.health!.reasons)).toBe(true);
    expect(a).toEqual(toTaskView(frozen, { now: NOW, agentId: 'agt_a' }));
    expect(sharedTaskView(frozen, { now: at(HOUR - 1), agentId: 'agt_a' })).toBe(a);
    // Another agent than the assignee, no agent, a claim known from elsewhere: views of their own.
    const b = sharedTaskView(frozen, { now: NOW, agentId: 'agt_b' });
    expect(b).not.toBe(a);
    expect(b.health!.reasons).toContain('assigned-to-another-agent');
    expect(sharedTaskView(frozen, { now: NOW, agentId: 'agt_c' })).toBe(b);
    const anyone = sharedTaskView(frozen, { now: NOW });
    expect(anyone).not.toBe(a);
    expect(anyone).not.toBe(b);
    expect(sharedTaskView(frozen, { now: NOW, agentId: 'agt_a', activeClaim: { agentId: 'agt_c' } })).not.toBe(a);
    // With no assignee every caller sees the same view.
    const open = deepFreeze(record());
    expect(sharedTaskView(open, { now: NOW, agentId: 'agt_a' })).toBe(sharedTaskView(open, { now: NOW, agentId: 'agt_b' }));
    expect(sharedTaskView(open, { now: NOW })).toBe(sharedTaskView(open, { now: NOW, agentId: 'agt_b' }));
    // The claim mirror expires at its instant: a new view, without the active claim.
    const later = sharedTaskView(frozen, { now: at(HOUR), agentId: 'agt_a' });
    expect(later).not.toBe(a);
    expect(later).toEqual(toTaskView(frozen, { now: at(HOUR), agentId: 'agt_a' }));
    expect(later.health!.reasons).not.toContain('active-claim');
    expect(sharedTaskView(frozen, { now: at(2 * HOUR - 1), agentId: 'agt_a' })).toBe(later);
    // The approval gate expires: the task shows it expired.
    const expired = sharedTaskView(frozen, { now: at(2 * HOUR), agentId: 'agt_a' });
    expect(expired).not.toBe(later);
    expect(expired.task!.approvals[0]!.status).toBe('expired');
    // A clock that goes back is not served a view made later.
    expect(sharedTaskView(frozen, { now: at(-1), agentId: 'agt_a' })).not.toBe(a);
    expect(sharedTaskView(frozen, { now: at(-1), agentId: 'agt_a' })).toEqual(toTaskView(frozen, { now: at(-1), agentId: 'agt_a' }));
  });

  it('a record that is not frozen (a copy its reader may change) gets a fresh view each time', () => {
    const copy = record();
    const first = sharedTaskView(copy, { now: NOW });
    expect(Object.isFrozen(first)).toBe(false);
    expect(sharedTaskView(copy, { now: NOW })).not.toBe(first);
  });
});
