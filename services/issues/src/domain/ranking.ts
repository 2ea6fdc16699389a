/**
 * Ordering of tasks: the search sorts (each with one sortable key per task, so pages can be cut
 * by key without duplicates or gaps), their cursors, and the work-queue rank (priority, then due
 * date, then age) used for launch readiness and reminders.
 */
import { invalidInput } from '@planning/errors';
import { normalizeForSearch } from './fields.js';
import { PRIORITY_RANK, type Priority } from './tasks.js';

export const SORTS = ['priority', 'updatedAt', 'createdAt', 'dueDate', 'title'] as const;
export type SortName = (typeof SORTS)[number];
export const DIRECTIONS = ['asc', 'desc'] as const;
export type Direction = (typeof DIRECTIONS)[number];

export const DEFAULT_SORT: SortName = 'priority';

/** Most urgent, newest first; earliest due date and A–Z first. */
export function defaultDirection(sort: SortName): Direction {
  return sort === 'dueDate' || sort === 'title' ? 'asc' : 'desc';
}

/** Separates a key's value from the task id; below every character a title may contain. */
const SEP = '\u0001';
/** Sorts after every date: tasks without a due date come last in ascending order. */
const NO_DUE_DATE = '~';

export interface SortableTask {
  id: string;
  priority: Priority;
  title: string;
  dueDate?: string;
  createdAt: string;
  updatedAt: string;
}

export type SortKeys = Record<SortName, string>;

/**
 * One string per sort: the sort value then the task id, so every key is unique and comparing
 * keys as strings gives the sort order with ties broken by id. Timestamps are fixed-width ISO
 * strings and priorities one digit, so string order is value order.
 */
export function sortKeysOf(task: SortableTask): SortKeys {
  return {
    priority: `${PRIORITY_RANK[task.priority]}${SEP}${task.id}`,
    updatedAt: `${task.updatedAt}${SEP}${task.id}`,
    createdAt: `${task.createdAt}${SEP}${task.id}`,
    dueDate: `${task.dueDate ?? NO_DUE_DATE}${SEP}${task.id}`,
    title: `${normalizeForSearch(task.title)}${SEP}${task.id}`,
  };
}

export interface SearchCursor {
  sort: SortName;
  direction: Direction;
  /** The sort key of the last task on the previous page. */
  after: string;
}

export function encodeSearchCursor(cursor: SearchCursor): string {
  return Buffer.from(JSON.stringify([cursor.sort, cursor.direction, cursor.after]), 'utf8').toString('base64url');
}

/** Decodes a cursor; it must come from a search with the same sort and direction. */
export function decodeSearchCursor(raw: string, sort: SortName, direction: Direction, field = 'cursor'): SearchCursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw invalidInput(field, `'${field}' is not a valid cursor`);
  }
  if (!Array.isArray(parsed) || parsed.length !== 3 || typeof parsed[2] !== 'string' || parsed[2].length > 2_000) {
    throw invalidInput(field, `'${field}' is not a valid cursor`);
  }
  if (parsed[0] !== sort || parsed[1] !== direction) {
    throw invalidInput(field, `'${field}' belongs to another sort or direction; start again without a cursor`);
  }
  return { sort, direction, after: parsed[2] };
}

export interface QueueTask {
  id: string;
  priority: Priority;
  dueDate?: string;
  createdAt: string;
}

/** Work-queue order: priority (urgent first), then due date (earliest first, undated last), then age (oldest first). */
export function compareQueue(a: QueueTask, b: QueueTask): number {
  const p = PRIORITY_RANK[b.priority] - PRIORITY_RANK[a.priority];
  if (p !== 0) return p;
  const da = a.dueDate ?? NO_DUE_DATE;
  const db = b.dueDate ?? NO_DUE_DATE;
  if (da !== db) return da < db ? -1 : 1;
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
