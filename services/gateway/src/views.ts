/**
 * The gateway's response views (see `ResponseView` in @planning/rpc): REST JSON rendered from a
 * service's response message. In an all-in-one process the services' thread renders them where
 * the response is made, so this module loads nothing at run time (type imports only) and holds
 * only pure mappers. Over gRPC the gateway renders the same view itself: the same bytes either
 * way. The shapes are the ones the OpenAPI schemas in routes/planning-json.ts document.
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type { SearchTasksResponseSchema, TaskViewSchema } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { ResponseView } from '@planning/rpc';

type Shape<S extends DescMessage> = MessageShape<S>;

/** An issue with its health and next action, as search, create, patch and detail return it. */
export function issueJson(view: Shape<typeof TaskViewSchema>) {
  const t = view.task;
  const h = view.health;
  if (!t) throw new Error('issue view without a task');
  const instructions = t.agent?.instructions;
  return {
    id: t.id,
    workspaceId: t.workspaceId,
    projectId: t.projectId,
    milestoneId: t.milestoneId ?? null,
    initiativeId: t.initiativeId ?? null,
    parentId: t.parentId ?? null,
    title: t.title,
    description: t.description,
    status: t.status,
    priority: t.priority,
    labels: t.labels,
    dueDate: t.dueDate ?? null,
    estimate: t.estimate ?? null,
    dependencies: t.dependencies,
    acceptanceChecks: t.acceptanceChecks.map((c) => ({ id: c.id, title: c.title, done: c.done ?? false })),
    agent: {
      assignedAgentId: t.agent?.assignedAgentId ?? null,
      readiness: t.agent?.readiness ?? 'not-ready',
      instructions: {
        objective: instructions?.objective ?? '',
        constraints: instructions?.constraints ?? [],
        expectedOutput: instructions?.expectedOutput ?? '',
        verification: instructions?.verification ?? [],
        permissions: instructions?.permissions ?? [],
        escalation: instructions?.escalation ?? '',
      },
    },
    openDependencyCount: t.openDependencyCount,
    dependentCount: t.dependentCount,
    timeLoggedMinutes: t.timeLoggedMinutes,
    evidenceCount: t.evidenceCount,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
    createdBy: t.createdBy,
    version: t.version,
    lastActivityAt: t.lastActivityAt,
    nextAction: h?.nextAction ?? '',
    taskHealth: {
      blocksAgentClaim: h?.blocksAgentClaim ?? false,
      reasons: h?.reasons ?? [],
      firstReminder: h?.firstReminder ? { kind: h.firstReminder.kind, message: h.firstReminder.message } : null,
      reminders: (h?.reminders ?? []).map((r) => ({ kind: r.kind, message: r.message })),
      safeNextActions: (h?.safeNextActions ?? []).map((a) => ({ action: a.action, description: a.description })),
    },
  };
}

/** `GET /api/issues`: the page of issues, the dependency graph when the search asked for it, the cursor. */
export const ISSUE_PAGE_VIEW: ResponseView<Shape<typeof SearchTasksResponseSchema>> = {
  name: 'gateway.issues.page',
  render(result) {
    const graph = result.dependencyGraph;
    return JSON.stringify({
      data: {
        issues: result.tasks.map(issueJson),
        ...(graph ? { dependencyGraph: { edges: graph.edges.map((e) => ({ sourceIssueId: e.sourceIssueId, targetIssueId: e.targetIssueId })) } } : {}),
      },
      page: { nextCursor: result.nextCursor ?? null },
    });
  },
};

/** Every view the gateway asks the services' thread for. */
export const GATEWAY_VIEWS: readonly ResponseView<never>[] = [ISSUE_PAGE_VIEW];
