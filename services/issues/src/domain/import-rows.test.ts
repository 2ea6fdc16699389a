import { describe, expect, it } from 'vitest';
import { importedTaskId, newTaskOf, parseImportRow } from './import-rows.js';

describe('imports: row validation (issues rules)', () => {
  it('imports: a valid row parses into a patch and a new task', () => {
    const row = parseImportRow({
      projectId: 'prj_1',
      title: '  Ship it  ',
      priority: 'high',
      labels: ['a', 'b'],
      dueDate: '2026-12-01',
      estimate: 3,
      externalId: 'JIRA-12',
      updatedAt: '2026-01-01T10:00:00+01:00',
    });
    expect(row.errors).toEqual([]);
    expect(row.externalId).toBe('JIRA-12');
    expect(row.updatedAt).toBe('2026-01-01T09:00:00.000Z');
    const made = newTaskOf(row);
    expect(made.errors).toEqual([]);
    expect(made.task).toMatchObject({ projectId: 'prj_1', priority: 'high', status: 'ready', labels: ['a', 'b'], dueDate: '2026-12-01', estimate: 3 });
  });

  it('imports: every bad field is reported with field and code, not only the first', () => {
    const row = parseImportRow({ projectId: 'bad id!', priority: 'sky-high', status: 'later', dueDate: '2026-02-30', estimate: -1, labels: 'x', externalId: '', updatedAt: 'yesterday' });
    expect(row.errors.map((e) => `${e.field}:${e.code}`).sort()).toEqual(
      ['dueDate:invalid', 'estimate:invalid', 'externalId:invalid', 'labels:invalid', 'priority:invalid', 'projectId:invalid', 'status:invalid', 'updatedAt:invalid'].sort(),
    );
  });

  it('imports: a new task needs a project and a title', () => {
    expect(newTaskOf(parseImportRow({})).errors).toEqual([
      { field: 'projectId', code: 'required' },
      { field: 'title', code: 'required' },
    ]);
  });

  it('imports: problems never carry the row content', () => {
    const row = parseImportRow({ title: 'x'.repeat(10_000), priority: 'TOP SECRET' });
    expect(JSON.stringify(row.errors)).not.toContain('SECRET');
    expect(row.errors).toContainEqual({ field: 'title', code: 'invalid' });
  });

  it('imports: created task ids are derived from commit and row, shaped like task ids', () => {
    const a = importedTaskId('imc_1', 1);
    expect(a).toMatch(/^iss_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(importedTaskId('imc_1', 1)).toBe(a);
    expect(importedTaskId('imc_1', 2)).not.toBe(a);
    expect(importedTaskId('imc_2', 1)).not.toBe(a);
  });
});
