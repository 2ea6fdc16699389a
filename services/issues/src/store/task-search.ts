/**
 * Task search as a store query: the filter, sort and indexes of `GET /api/issues`. Each sort has
 * one unique key per task (`sortKeys.<sort>`), so a page is "the next `limit` keys after the
 * cursor's key": one range condition the index walk starts from, no duplicates, no gaps.
 */
import { escapeRegExp, type Filter, type IndexSpec, type SortSpec } from '@planning/store';
import { normalizeForSearch } from '../domain/fields.js';
import type { Direction, SortName } from '../domain/ranking.js';
import type { TaskStatus } from '../domain/task-status.js';
import type { Priority } from '../domain/tasks.js';
import type { WorkspaceScope } from './planning.js';

export interface TaskSearch {
  scope: WorkspaceScope;
  projectId?: string;
  milestoneId?: string;
  initiativeId?: string;
  parentId?: string;
  statuses?: readonly TaskStatus[];
  priorities?: readonly Priority[];
  /** Any of these labels. */
  labels?: readonly string[];
  assignedAgentId?: string;
  dependencyState?: 'blocked' | 'unblocked';
  /** Literal text, matched case-insensitively in title and description. */
  q?: string;
  sort: SortName;
  direction: Direction;
  /** The sort key of the last task of the previous page. */
  after?: string;
  /** A further condition (e.g. the reminder kinds' prefilter). */
  where?: Filter;
}

/**
 * The indexes search relies on: every sort within a workspace, and the common filters followed by
 * the default sort, so that a filtered first page is an ordered index walk that stops after
 * `limit` matches. Labels (an array) get an equality index; text gets a substring index.
 */
export const TASK_INDEXES: readonly IndexSpec[] = [
  { name: 'ws_priority', keys: { workspaceId: 1, 'sortKeys.priority': 1 } },
  { name: 'ws_updated', keys: { workspaceId: 1, 'sortKeys.updatedAt': 1 } },
  { name: 'ws_created', keys: { workspaceId: 1, 'sortKeys.createdAt': 1 } },
  { name: 'ws_due', keys: { workspaceId: 1, 'sortKeys.dueDate': 1 } },
  { name: 'ws_title', keys: { workspaceId: 1, 'sortKeys.title': 1 } },
  { name: 'ws_status_priority', keys: { workspaceId: 1, status: 1, 'sortKeys.priority': 1 } },
  { name: 'ws_project_priority', keys: { workspaceId: 1, projectId: 1, 'sortKeys.priority': 1 } },
  { name: 'ws_milestone_priority', keys: { workspaceId: 1, milestoneId: 1, 'sortKeys.priority': 1 } },
  { name: 'ws_agent_priority', keys: { workspaceId: 1, 'agent.assignedAgentId': 1, 'sortKeys.priority': 1 } },
  { name: 'ws_labels', keys: { workspaceId: 1, labels: 1 } },
  { name: 'ws_open_dependencies', keys: { workspaceId: 1, openDependencyCount: 1 } },
  { name: 'ws_initiative', keys: { workspaceId: 1, initiativeId: 1 } },
  { name: 'ws_parent', keys: { workspaceId: 1, parentId: 1 } },
  // Text: a literal `q` is a substring of the case-folded `searchText`. The embedded store answers it
  // from a trigram full-text index (three characters or more) kept in the same transaction as the
  // task; MongoDB scans the index keys of the workspace for the regular expression.
  { name: 'ws_text', keys: { workspaceId: 1, searchText: 1 }, substring: true },
  // Reverse dependency lookups (dependents of a task); task ids are unique across workspaces.
  { name: 'dependencies', keys: { dependencies: 1 } },
];

const anyOf = <T>(values: readonly T[]): T | { $in: T[] } => (values.length === 1 ? (values[0] as T) : { $in: [...values] });

/** The store filter and sort of a search. */
export function searchQuery(search: TaskSearch): { filter: Filter; sort: SortSpec } {
  const filter: Filter = {};
  if (!search.scope.all) filter.workspaceId = anyOf(search.scope.ids);
  if (search.projectId !== undefined) filter.projectId = search.projectId;
  if (search.milestoneId !== undefined) filter.milestoneId = search.milestoneId;
  if (search.initiativeId !== undefined) filter.initiativeId = search.initiativeId;
  if (search.parentId !== undefined) filter.parentId = search.parentId;
  if (search.statuses?.length) filter.status = anyOf(search.statuses);
  if (search.priorities?.length) filter.priority = anyOf(search.priorities);
  if (search.labels?.length) filter.labels = anyOf(search.labels);
  if (search.assignedAgentId !== undefined) filter['agent.assignedAgentId'] = search.assignedAgentId;
  if (search.dependencyState === 'blocked') filter.openDependencyCount = { $gt: 0 };
  if (search.dependencyState === 'unblocked') filter.openDependencyCount = 0;
  if (search.q !== undefined) filter.searchText = { $regex: escapeRegExp(normalizeForSearch(search.q)) };
  if (search.where !== undefined) filter.$and = [search.where];
  const key = `sortKeys.${search.sort}`;
  const dir = search.direction === 'asc' ? 1 : -1;
  if (search.after !== undefined) filter[key] = dir === 1 ? { $gt: search.after } : { $lt: search.after };
  return { filter, sort: { [key]: dir } };
}
