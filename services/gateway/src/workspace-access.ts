import { createRemoteAccess, type AccessClient, type WorkspaceAccess } from '@planning/access';
import type { Principal } from '@planning/rpc';

/**
 * What the gateway needs to know about a token's workspace on every token request (plan and
 * status), from the issues service's GetAccess, kept for `ttlMs` so a burst of requests costs one
 * call. This replica forgets a workspace as soon as it changes it (PATCH); other replicas see a
 * plan or status change within `ttlMs`.
 */
export interface WorkspaceAccessCache {
  forToken(principal: Principal, workspaceId: string): Promise<WorkspaceAccess>;
  invalidate(workspaceId: string): void;
}

export function createWorkspaceAccessCache(client: AccessClient, options: { ttlMs: number; clock?: () => number; maxEntries?: number }): WorkspaceAccessCache {
  const lookup = createRemoteAccess(client);
  const clock = options.clock ?? Date.now;
  const maxEntries = options.maxEntries ?? 10_000;
  const entries = new Map<string, { value: Promise<WorkspaceAccess>; expiresAt: number }>();
  return {
    forToken(principal, workspaceId) {
      const now = clock();
      const cached = entries.get(workspaceId);
      if (cached && cached.expiresAt > now) return cached.value;
      const value = lookup(principal, workspaceId);
      if (options.ttlMs > 0) {
        if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
        entries.set(workspaceId, { value, expiresAt: now + options.ttlMs });
        // A failed lookup is not remembered.
        value.catch(() => entries.delete(workspaceId));
      }
      return value;
    },
    invalidate(workspaceId) {
      entries.delete(workspaceId);
    },
  };
}
