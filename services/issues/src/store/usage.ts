import type { DocumentStore } from '@planning/store';

/**
 * Stored tasks of a workspace: a standing count (not monthly) of the documents in the `tasks`
 * collection, which the task repository owns.
 */
export function storedTaskCounter(store: DocumentStore): (workspaceId: string) => Promise<number> {
  const tasks = store.collection('tasks');
  return (workspaceId) => tasks.countDocuments({ workspaceId });
}
