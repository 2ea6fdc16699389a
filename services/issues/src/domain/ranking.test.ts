import { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import { compareQueue, decodeSearchCursor, defaultDirection, encodeSearchCursor, sortKeysOf, type SortableTask } from './ranking.js';
import { PRIORITIES, type Priority } from './tasks.js';

function t(id: string, overrides: Partial<SortableTask> = {}): SortableTask {
  return { id, priority: 'medium', title: id, createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:00.000Z', ...overrides };
}

/** Sorts like the store does: by one sort key as a string. */
function order(tasks: SortableTask[], sort: keyof ReturnType<typeof sortKeysOf>, dir: 1 | -1): string[] {
  return [...tasks].sort((a, b) => (sortKeysOf(a)[sort] < sortKeysOf(b)[sort] ? -dir : dir)).map((x) => x.id);
}

describe('ranking: search sort keys', () => {
  it('ranking: priority descending is urgent > high > medium > low > none', () => {
    const tasks = (['none', 'low', 'urgent', 'medium', 'high'] as Priority[]).map((p) => t(`t-${p}`, { priority: p }));
    expect(order(tasks, 'priority', -1)).toEqual(PRIORITIES.map((p) => `t-${p}`));
    expect(order(tasks, 'priority', 1)).toEqual([...PRIORITIES].reverse().map((p) => `t-${p}`));
  });

  it('ranking: ties are broken by id in the direction of the sort, so every key is unique', () => {
    const tasks = [t('b'), t('a'), t('c')];
    expect(order(tasks, 'priority', 1)).toEqual(['a', 'b', 'c']);
    expect(order(tasks, 'priority', -1)).toEqual(['c', 'b', 'a']);
    expect(new Set(tasks.map((x) => sortKeysOf(x).priority)).size).toBe(3);
  });

  it('ranking: titles sort case-insensitively and a prefix comes before its longer titles', () => {
    const tasks = [t('1', { title: 'beta' }), t('2', { title: 'Alpha release' }), t('3', { title: 'alpha' }), t('4', { title: 'ALPHA' })];
    expect(order(tasks, 'title', 1)).toEqual(['3', '4', '2', '1']);
  });

  it('ranking: tasks without a due date come after every dated task in ascending order', () => {
    const tasks = [t('none'), t('late', { dueDate: '2025-12-31' }), t('early', { dueDate: '2025-01-02' })];
    expect(order(tasks, 'dueDate', 1)).toEqual(['early', 'late', 'none']);
  });

  it('ranking: timestamps sort chronologically', () => {
    const tasks = [t('b', { updatedAt: '2025-03-01T00:00:00.000Z' }), t('a', { updatedAt: '2025-02-01T10:00:00.000Z' }), t('c', { updatedAt: '2025-02-01T09:59:59.999Z' })];
    expect(order(tasks, 'updatedAt', 1)).toEqual(['c', 'a', 'b']);
  });

  it('ranking: default directions put the most useful first', () => {
    expect(defaultDirection('priority')).toBe('desc');
    expect(defaultDirection('updatedAt')).toBe('desc');
    expect(defaultDirection('createdAt')).toBe('desc');
    expect(defaultDirection('dueDate')).toBe('asc');
    expect(defaultDirection('title')).toBe('asc');
  });
});

describe('ranking: cursors', () => {
  it('ranking: a cursor round-trips its sort key', () => {
    const key = sortKeysOf(t('iss_1', { title: 'Ünïcode, commas & "quotes"' })).title;
    const cursor = encodeSearchCursor({ sort: 'title', direction: 'asc', after: key });
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeSearchCursor(cursor, 'title', 'asc')).toEqual({ sort: 'title', direction: 'asc', after: key });
  });

  it('ranking: a cursor of another sort or direction, or garbage, is refused as invalid input', () => {
    const cursor = encodeSearchCursor({ sort: 'priority', direction: 'desc', after: 'x' });
    for (const [raw, sort, dir] of [
      [cursor, 'title', 'desc'],
      [cursor, 'priority', 'asc'],
      ['not-a-cursor', 'priority', 'desc'],
      [Buffer.from('{"a":1}').toString('base64url'), 'priority', 'desc'],
    ] as const) {
      let error: unknown;
      try {
        decodeSearchCursor(raw, sort, dir);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ServiceError);
      expect((error as ServiceError).details.field).toBe('cursor');
    }
  });
});

describe('ranking: work queue', () => {
  it('ranking: priority first, then earliest due date (undated last), then oldest', () => {
    const q = [
      { id: 'low', priority: 'low' as const, createdAt: '2025-01-01' },
      { id: 'urgent-late', priority: 'urgent' as const, dueDate: '2025-09-01', createdAt: '2025-01-03' },
      { id: 'urgent-undated', priority: 'urgent' as const, createdAt: '2025-01-01' },
      { id: 'urgent-soon', priority: 'urgent' as const, dueDate: '2025-07-01', createdAt: '2025-01-05' },
      { id: 'urgent-soon-older', priority: 'urgent' as const, dueDate: '2025-07-01', createdAt: '2025-01-02' },
    ];
    expect([...q].sort(compareQueue).map((x) => x.id)).toEqual(['urgent-soon-older', 'urgent-soon', 'urgent-late', 'urgent-undated', 'low']);
  });
});
