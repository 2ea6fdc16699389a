/**
 * Export filters and their redacted form in history entries (DECISIONS §9, §10): ids, labels and
 * the agent id become short keyed hashes, the search text is never kept, enum values stay.
 */
import { createHmac } from 'node:crypto';

/** The filters of GET /api/issues an export takes (TaskService.SearchTasks). */
export interface ExportFilterValues {
  projectId?: string;
  milestoneId?: string;
  initiativeId?: string;
  parentId?: string;
  status: string[];
  priority: string[];
  labels: string[];
  assignedAgentId?: string;
  dependencyState?: string;
  q?: string;
  sort?: string;
  direction?: string;
}

export interface RedactedFilter {
  name: string;
  values: string[];
}

/** Filters whose values identify records or say what was searched for: hashed. */
const HASHED = ['projectId', 'milestoneId', 'initiativeId', 'parentId', 'assignedAgentId'] as const;
/** Closed sets of values (status names, sort keys): kept as given. */
const PLAIN = ['dependencyState', 'sort', 'direction'] as const;

/** What a history entry shows for a search text: that there was one, never the text or a hash of it. */
export const REDACTED_TEXT = '[redacted]';

/**
 * `h:` and 12 hex digits of an HMAC keyed by the workspace's secret filter key (random, kept in the
 * service's store, never shown; ExportHistoryRepository.filterKey): the same filter value gives the
 * same hash within a workspace (entries can be compared), different workspaces differ, and without
 * the key a hash can be neither recomputed nor matched against a list of likely labels or agent ids.
 */
export function shortHash(key: Buffer | string, value: string): string {
  return `h:${createHmac('sha256', key).update(value).digest('hex').slice(0, 12)}`;
}

export function redactFilters(key: Buffer | string, filters: ExportFilterValues): RedactedFilter[] {
  const out: RedactedFilter[] = [];
  for (const name of HASHED) {
    const value = filters[name];
    if (value) out.push({ name, values: [shortHash(key, value)] });
  }
  if (filters.status.length > 0) out.push({ name: 'status', values: [...filters.status] });
  if (filters.priority.length > 0) out.push({ name: 'priority', values: [...filters.priority] });
  // Labels are free text of the workspace: hashed like ids.
  if (filters.labels.length > 0) out.push({ name: 'label', values: filters.labels.map((l) => shortHash(key, l)) });
  if (filters.q) out.push({ name: 'q', values: [REDACTED_TEXT] });
  for (const name of PLAIN) {
    const value = filters[name];
    if (value) out.push({ name, values: [value] });
  }
  return out;
}

/** True when any filter narrows the task set. */
export function hasFilters(filters: ExportFilterValues): boolean {
  return redactFilters('', filters).some((f) => f.name !== 'sort' && f.name !== 'direction');
}

/** True when any filter or an order is given: a backup takes neither (it is the whole workspace, in creation order). */
export function hasFiltersOrOrder(filters: ExportFilterValues): boolean {
  return redactFilters('', filters).length > 0;
}
