import { describe, expect, it } from 'vitest';
import { hasFilters, redactFilters, REDACTED_TEXT, shortHash, type ExportFilterValues } from './filters.js';

const none: ExportFilterValues = { status: [], priority: [], labels: [] };

describe('exports: filter redaction', () => {
  it('exports: ids, labels and agent ids become short workspace-keyed hashes; q is never kept', () => {
    const filters: ExportFilterValues = {
      ...none,
      projectId: 'prj_01SECRETPROJECT',
      milestoneId: 'ms_01SECRET',
      initiativeId: 'ini_01SECRET',
      parentId: 'iss_01PARENT',
      assignedAgentId: 'agent-007',
      labels: ['customer-acme'],
      q: 'merger with globex',
      status: ['ready', 'blocked'],
      priority: ['urgent'],
      dependencyState: 'blocked',
      sort: 'dueDate',
      direction: 'asc',
    };
    const redacted = redactFilters('ws_1', filters);
    const text = JSON.stringify(redacted);
    for (const raw of ['prj_01SECRETPROJECT', 'ms_01SECRET', 'ini_01SECRET', 'iss_01PARENT', 'agent-007', 'customer-acme', 'merger', 'globex']) {
      expect(text).not.toContain(raw);
    }
    const byName = Object.fromEntries(redacted.map((f) => [f.name, f.values]));
    expect(byName.projectId).toEqual([shortHash('ws_1', 'prj_01SECRETPROJECT')]);
    expect(byName.projectId![0]).toMatch(/^h:[0-9a-f]{12}$/);
    expect(byName.label).toEqual([shortHash('ws_1', 'customer-acme')]);
    expect(byName.q).toEqual([REDACTED_TEXT]);
    expect(byName.status).toEqual(['ready', 'blocked']);
    expect(byName.priority).toEqual(['urgent']);
    expect(byName.dependencyState).toEqual(['blocked']);
    expect(byName.sort).toEqual(['dueDate']);
  });

  it('exports: the same filter hashes alike within a workspace and differently across workspaces', () => {
    expect(shortHash('ws_1', 'prj_1')).toBe(shortHash('ws_1', 'prj_1'));
    expect(shortHash('ws_1', 'prj_1')).not.toBe(shortHash('ws_2', 'prj_1'));
    expect(shortHash('ws_1', 'prj_1')).not.toBe(shortHash('ws_1', 'prj_2'));
  });

  it('exports: no filters redact to nothing; sort alone does not narrow', () => {
    expect(redactFilters('ws_1', none)).toEqual([]);
    expect(hasFilters(none)).toBe(false);
    expect(hasFilters({ ...none, sort: 'title' })).toBe(false);
    expect(hasFilters({ ...none, status: ['ready'] })).toBe(true);
    expect(hasFilters({ ...none, q: 'x' })).toBe(true);
  });
});
