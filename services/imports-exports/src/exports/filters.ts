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
 * `h:` and 12 hex digits of an HMAC keyed by the workspace id: the same filter value gives the
 * same hash within a workspace (entries can be compared), different workspaces differ, and the
 * value itself cannot be read back. Ids are random (80 bits), so the short hash does not make
 * guessing practical.
 */
export function shortHash(workspaceId: string, value: string): string {
  return `h:${createHmac('sha256', `export-filter:${workspaceId}`).update(value).digest('hex').slice(0, 12)}`;
}

export function redactFilters(workspaceId: string, filters: ExportFilterValues): RedactedFilter[] {
  const out: RedactedFilter[] = [];
  for (const name of HASHED) {
    const value = filters[name];
    if (value) out.push({ name, values: [shortHash(workspaceId, value)] });
  }
  if (filters.status.length > 0) out.push({ name: 'status', values: [...filters.status] });
  if (filters.priority.length > 0) out.push({ name: 'priority', values: [...filters.priority] });
  // Labels are free text of the workspace: hashed like ids.
  if (filters.labels.length > 0) out.push({ name: 'label', values: filters.labels.map((l) => shortHash(workspaceId, l)) });
  if (filters.q) out.push({ name: 'q', values: [REDACTED_TEXT] });
  for (const name of PLAIN) {
    const value = filters[name];
    if (value) out.push({ name, values: [value] });
  }
  return out;
}

/** True when any filter narrows the task set (a backup takes none). */
export function hasFilters(filters: ExportFilterValues): boolean {
  return redactFilters('', filters).some((f) => f.name !== 'sort' && f.name !== 'direction');
}
