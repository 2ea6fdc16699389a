import type { AccessLookup } from '@planning/access';
import { usageAuthorizer, type UsageProvider } from '@planning/metering';

/** The issues service's quota kinds: stored tasks (a standing count of the workspace's tasks). */
export function createIssuesUsageProvider(deps: {
  access: AccessLookup;
  countStoredTasks: (workspaceId: string) => Promise<number>;
}): UsageProvider {
  return {
    owner: 'issues',
    kinds: ['stored-tasks'],
    authorize: usageAuthorizer(deps.access),
    async usage(workspaceId) {
      return [{ kind: 'stored-tasks', used: await deps.countStoredTasks(workspaceId), period: '' }];
    },
  };
}
