/** The done status of tasks for the callers that show it (task detail, contract, ready queue, context packs). */
import { doneStatusOf, type DonePolicy, type DoneStatus, type StoredDonePolicy } from '../domain/done-policy.js';
import type { TaskRecord } from '../store/task-documents.js';
import type { TaskRepository } from '../store/tasks.js';

/**
 * Each task's done status at `now`, reading each project's policy once (`workspaceRead`: the
 * tasks' workspace as the request already read it, so it is not read again).
 */
export async function doneStatuses(
  tasks: Pick<TaskRepository, 'doneFacts' | 'donePolicy'>,
  list: readonly TaskRecord[],
  now: Date,
  workspaceRead?: StoredDonePolicy & { _id: string },
): Promise<Map<string, DoneStatus>> {
  const policies = new Map<string, Promise<DonePolicy>>();
  const out = new Map<string, DoneStatus>();
  await Promise.all(
    list.map(async (task) => {
      const key = `${task.workspaceId}/${task.projectId}`;
      let policy = policies.get(key);
      if (!policy) {
        policy = tasks.donePolicy(task, undefined, workspaceRead);
        policies.set(key, policy);
      }
      out.set(task._id, doneStatusOf(await tasks.doneFacts(task), await policy, now));
    }),
  );
  return out;
}

export async function doneStatusOfTask(
  tasks: Pick<TaskRepository, 'doneFacts' | 'donePolicy'>,
  task: TaskRecord,
  now: Date,
  workspaceRead?: StoredDonePolicy & { _id: string },
): Promise<DoneStatus> {
  return (await doneStatuses(tasks, [task], now, workspaceRead)).get(task._id) as DoneStatus;
}
