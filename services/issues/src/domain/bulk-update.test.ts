import { describe, expect, it } from 'vitest';
import { assertBulkPatch, bulkPlan, validateBulkIds } from './bulk-update.js';

describe('bulk update: rules', () => {
  it('bulk update: 1 to 200 ids; repeats count once', () => {
    expect(validateBulkIds(['a', 'b', 'a'])).toEqual(['a', 'b']);
    expect(() => validateBulkIds([])).toThrow(/at least one/);
    expect(() => validateBulkIds(Array.from({ length: 201 }, (_, i) => `i${i}`))).toThrow(/at most 200/);
    expect(() => validateBulkIds(Array.from({ length: 200 }, (_, i) => `i${i}`))).not.toThrow();
    expect(() => validateBulkIds(['ok', 'not ok'])).toThrow(/issueIds\[1\]/);
  });

  it('bulk update: only status, priority, labels, milestone, due date, estimate and agent change in bulk', () => {
    expect(() => assertBulkPatch({ status: 'done', dueDate: null, assignedAgentId: 'a' })).not.toThrow();
    expect(() => assertBulkPatch({ title: 'x' })).toThrow(/patch.title/);
    expect(() => assertBulkPatch({ instructions: {} })).toThrow(/patch.agent.instructions/);
    expect(() => assertBulkPatch({})).toThrow(/at least one/);
  });

  it('bulk update: the plan counts targets and skips and labels the changed fields in display order', () => {
    const plan = bulkPlan(4, [
      [{ field: 'dueDate' }, { field: 'status' }],
      [],
      [{ field: 'agent.assignedAgentId' }],
    ]);
    expect(plan).toEqual({ requestedCount: 4, targetCount: 3, skippedCount: 1, changedFieldLabels: ['Status', 'Due date', 'Agent'] });
  });
});
