import { describe, expect, it } from 'vitest';
import { applyPatch, type TaskFields, type TaskPatch } from './tasks.js';

/** Freezes a value and everything in it: any change to it then throws (ES modules are strict). */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

const current = (): TaskFields => ({
  workspaceId: 'ws_1',
  projectId: 'prj_1',
  milestoneId: 'mil_1',
  title: 'Ship the thing',
  description: 'All of it',
  status: 'ready',
  priority: 'high',
  labels: ['backend', 'api'],
  dueDate: '2026-12-01',
  estimate: 3,
  dependencies: ['tsk_a'],
  acceptanceChecks: [{ id: 'chk_1', title: 'Tests pass', done: false }],
  agent: {
    assignedAgentId: 'agent-1',
    instructions: { objective: 'Do it', constraints: ['no new deps'], expectedOutput: 'a PR', verification: ['pnpm test'], permissions: [], escalation: '' },
  },
});

const PATCHES: [string, TaskPatch][] = [
  ['title', { title: 'Ship it now' }],
  ['status', { status: 'in-progress' }],
  ['labels', { addLabels: ['urgent'], removeLabels: ['api'] }],
  ['optional fields set and cleared', { milestoneId: null, dueDate: '2027-01-01', estimate: null, parentId: 'tsk_p' }],
  ['dependencies', { dependencies: ['tsk_b', 'tsk_a'] }],
  ['acceptance checks', { acceptanceChecks: [{ id: 'chk_1', title: 'Tests pass', done: true }, { title: 'Docs' }] }],
  ['assigned agent', { assignedAgentId: 'agent-2' }],
  ['assigned agent cleared', { assignedAgentId: null }],
  ['instructions', { instructions: { constraints: ['no new deps', 'keep it small'], objective: null } }],
  ['everything at once', { title: 'All', status: 'in-progress', labels: ['x'], assignedAgentId: 'agent-3', instructions: { escalation: 'ask' }, acceptanceChecks: [] }],
];

describe('applyPatch', () => {
  it.each(PATCHES)('never changes the task it patches, and shares only the values it leaves as they were (%s)', (_label, patch) => {
    const before = deepFreeze(current());
    const { next, changes } = applyPatch(before, patch, 'human', () => 'chk_new');
    expect(before).toEqual(current());
    expect(changes.length).toBeGreaterThan(0);
    const changed = new Set(changes.map((c) => c.field.split('.')[0]));
    for (const key of Object.keys(next) as (keyof TaskFields)[]) {
      if (changed.has(key) || (key === 'agent' && [...changed].some((f) => f === 'agent'))) expect(next[key], key).not.toBe(before[key]);
      else expect(next[key], key).toBe(before[key]);
    }
  });
});
