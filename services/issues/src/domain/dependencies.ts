/**
 * Dependency and parent graphs: a task may not (transitively) depend on itself, nor be its own
 * ancestor. The walk reads the graph through a loader so the rule stays independent of storage.
 */
import { invalidInput } from '@planning/errors';

export interface GraphNode {
  id: string;
  dependencies: readonly string[];
}

/** How many tasks a cycle check may visit before it refuses the change as too deep to verify. */
export const MAX_GRAPH_VISIT = 5_000;

/**
 * Whether making `taskId` depend on `dependencies` closes a cycle: walks from the new
 * dependencies along their own dependencies and looks for `taskId`. Returns the cycle's path
 * (`[taskId, ..., taskId]`) or undefined.
 */
export async function findDependencyCycle(
  taskId: string,
  dependencies: readonly string[],
  load: (ids: string[]) => Promise<GraphNode[]>,
  maxVisit = MAX_GRAPH_VISIT,
): Promise<string[] | undefined> {
  if (dependencies.includes(taskId)) return [taskId, taskId];
  const parentOf = new Map<string, string>();
  const seen = new Set<string>(dependencies);
  for (const d of dependencies) parentOf.set(d, taskId);
  let frontier = [...dependencies];
  while (frontier.length > 0) {
    if (seen.size > maxVisit) {
      throw invalidInput('dependencies', `The dependency graph is too large to check (more than ${maxVisit} tasks)`);
    }
    const nodes = await load(frontier);
    const next: string[] = [];
    for (const node of nodes) {
      for (const dep of node.dependencies) {
        if (dep === taskId) {
          const chain: string[] = [];
          for (let cur: string | undefined = node.id; cur !== undefined && cur !== taskId; cur = parentOf.get(cur)) chain.unshift(cur);
          return [taskId, ...chain, taskId];
        }
        if (!seen.has(dep)) {
          seen.add(dep);
          parentOf.set(dep, node.id);
          next.push(dep);
        }
      }
    }
    frontier = next;
  }
  return undefined;
}

/** Refuses a dependency change that closes a cycle (400 naming `dependencies`). */
export async function assertNoDependencyCycle(
  taskId: string,
  dependencies: readonly string[],
  load: (ids: string[]) => Promise<GraphNode[]>,
): Promise<void> {
  const cycle = await findDependencyCycle(taskId, dependencies, load);
  if (cycle) throw invalidInput('dependencies', `Dependencies would form a cycle: ${cycle.join(' -> ')}`);
}

/** How deep a parent chain may be walked. */
export const MAX_PARENT_DEPTH = 100;

/** Refuses a parent that is the task itself or one of its descendants. */
export async function assertNoParentCycle(
  taskId: string,
  parentId: string,
  parentOf: (id: string) => Promise<string | undefined>,
): Promise<void> {
  let cur: string | undefined = parentId;
  for (let depth = 0; cur !== undefined; depth++) {
    if (cur === taskId) throw invalidInput('parentId', 'A task cannot be its own ancestor');
    if (depth >= MAX_PARENT_DEPTH) throw invalidInput('parentId', `Parent chains are limited to ${MAX_PARENT_DEPTH} levels`);
    cur = await parentOf(cur);
  }
}
