import { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import { emptyInstructions } from './task-contract.js';
import { applyPatch, validateNewTask, validatePatch, type RawTaskPatch, type TaskFields } from './tasks.js';

const base: TaskFields = {
  workspaceId: 'ws_1',
  projectId: 'prj_1',
  title: 'Task',
  description: 'Body',
  status: 'ready',
  priority: 'medium',
  labels: ['a'],
  dependencies: [],
  acceptanceChecks: [{ id: 'chk_1', title: 'Check', done: false }],
  agent: { instructions: emptyInstructions() },
};

let n = 0;
const newId = () => `chk_new_${++n}`;

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'invalid-input') return err.details.field;
    throw err;
  }
  throw new Error('expected invalid-input');
}

describe('tasks: validation', () => {
  it('tasks: a new task gets defaults (ready, medium) and trimmed, deduplicated values', () => {
    const t = validateNewTask({ projectId: 'prj_1', title: '  Fix   the bug ', labels: ['x', 'x', ' y '] });
    expect(t).toMatchObject({ projectId: 'prj_1', title: 'Fix the bug', status: 'ready', priority: 'medium', labels: ['x', 'y'], description: '' });
  });

  it('tasks: bad new-task input names the field', () => {
    expect(fieldOf(() => validateNewTask({ projectId: undefined, title: 'x' }))).toBe('projectId');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: '' }))).toBe('title');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x'.repeat(301) }))).toBe('title');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', status: 'open' }))).toBe('status');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', priority: 'p1' }))).toBe('priority');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', dueDate: '2025-02-30' }))).toBe('dueDate');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', dueDate: '30.01.2025' }))).toBe('dueDate');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', estimate: -1 }))).toBe('estimate');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', labels: ['a,b'] }))).toBe('labels[0]');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', labels: Array.from({ length: 21 }, (_, i) => `l${i}`) }))).toBe('labels');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', dependencies: ['bad id!'] }))).toBe('dependencies[0]');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', assignedAgentId: 'Agent One' }))).toBe('agent.assignedAgentId');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'x', acceptanceChecks: [{ title: '' }] }))).toBe('acceptanceChecks[0].title');
    expect(fieldOf(() => validateNewTask({ projectId: 'p', title: 'a\u0000b' }))).toBe('title');
  });

  it('tasks: a patch may unset optional fields with null, but not required ones', () => {
    expect(validatePatch({ dueDate: null, estimate: null, milestoneId: null, assignedAgentId: null })).toEqual({
      dueDate: null,
      estimate: null,
      milestoneId: null,
      assignedAgentId: null,
    });
    expect(fieldOf(() => validatePatch({ title: null } as RawTaskPatch))).toBe('title');
    expect(fieldOf(() => validatePatch({ status: null } as RawTaskPatch))).toBe('status');
    expect(fieldOf(() => validatePatch({ labels: ['a'], addLabels: ['b'] }))).toBe('labels');
  });
});

describe('tasks: applying patches', () => {
  it('tasks: only fields that differ are changes; an identical patch changes nothing', () => {
    const same = applyPatch(base, { title: 'Task', priority: 'medium', labels: ['a'], status: 'ready' }, 'human', newId);
    expect(same.changes).toEqual([]);
    const changed = applyPatch(base, { title: 'New', priority: 'high', dueDate: '2025-01-01' }, 'human', newId);
    expect(changed.changes).toEqual([
      { field: 'title', from: 'Task', to: 'New' },
      { field: 'priority', from: 'medium', to: 'high' },
      { field: 'dueDate', from: null, to: '2025-01-01' },
    ]);
    expect(changed.next).toMatchObject({ title: 'New', priority: 'high', dueDate: '2025-01-01' });
    expect(base.title).toBe('Task');
  });

  it('tasks: long text keeps only the field name in the change', () => {
    const { changes } = applyPatch(base, { description: 'secret plan', instructions: { objective: 'do it' } }, 'human', newId);
    expect(changes).toEqual([{ field: 'description' }, { field: 'agent.instructions.objective' }]);
  });

  it('tasks: null unsets; labels can be added and removed', () => {
    const dated = applyPatch(base, { dueDate: '2025-01-01', estimate: 3 }, 'human', newId).next;
    const cleared = applyPatch(dated, { dueDate: null, estimate: null }, 'human', newId);
    expect(cleared.next.dueDate).toBeUndefined();
    expect('estimate' in cleared.next).toBe(false);
    expect(applyPatch(base, { addLabels: ['b', 'a'], removeLabels: [] }, 'human', newId).next.labels).toEqual(['a', 'b']);
    expect(applyPatch(base, { removeLabels: ['a'] }, 'human', newId).next.labels).toEqual([]);
  });

  it('tasks: status changes go through the allowed moves', () => {
    expect(applyPatch(base, { status: 'in-progress' }, 'human', newId).changes).toEqual([{ field: 'status', from: 'ready', to: 'in-progress' }]);
    expect(() => applyPatch(base, { status: 'done' }, 'human', newId)).toThrow(/'ready' to 'done'/);
    expect(() => applyPatch(base, { status: 'in-progress' }, 'agent', newId)).toThrow(ServiceError);
  });

  it('tasks: acceptance checks keep ids, keep done when not given, and new ones get ids', () => {
    const { next } = applyPatch(base, { acceptanceChecks: [{ id: 'chk_1', title: 'Renamed' }, { title: 'Another', done: true }] }, 'human', newId);
    expect(next.acceptanceChecks).toEqual([
      { id: 'chk_1', title: 'Renamed', done: false },
      { id: expect.stringMatching(/^chk_new_/), title: 'Another', done: true },
    ]);
    expect(fieldOf(() => applyPatch(base, { acceptanceChecks: [{ id: 'chk_unknown', title: 'x' }] }, 'human', newId))).toBe('acceptanceChecks[0].id');
  });

  it('tasks: reordering the same dependencies is not a change', () => {
    const withDeps = { ...base, dependencies: ['a', 'b'] };
    expect(applyPatch(withDeps, { dependencies: ['b', 'a'] }, 'human', newId).changes).toEqual([]);
  });
});
