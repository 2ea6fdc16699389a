/**
 * The gateway's response views (see `ResponseView` in @planning/rpc): REST JSON rendered from a
 * service's response message. In an all-in-one process the services' thread renders them where
 * the response is made, so this module loads nothing at run time (type imports only) and holds
 * only pure mappers. Over gRPC the gateway renders the same view itself: the same bytes either
 * way. The shapes are the ones the OpenAPI schemas in routes/planning-json.ts document.
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type {
  ActivitySchema,
  ApprovalSchema,
  CommentSchema,
  DoneStatusSchema,
  EvidenceSchema,
  GetTaskResponseSchema,
  SearchTasksResponseSchema,
  TaskRefSchema,
  TaskViewSchema,
} from '@planning/proto/planning/issues/v1/tasks_pb';
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

/**
 * The UTF-8 JSON of frozen issue views, by view. The issues service shares one frozen view per
 * stored version of a task, kind of caller and stretch of time the view holds for
 * (sharedTaskView), so a page read again joins bytes made before; a view that is not frozen is
 * rendered each time.
 */
const issueBytes = new WeakMap<Shape<typeof TaskViewSchema>, Uint8Array>();
const utf8 = new TextEncoder();

function issueUtf8(view: Shape<typeof TaskViewSchema>): Uint8Array {
  if (!Object.isFrozen(view)) return utf8.encode(JSON.stringify(issueJson(view)));
  let bytes = issueBytes.get(view);
  if (bytes === undefined) issueBytes.set(view, (bytes = utf8.encode(JSON.stringify(issueJson(view)))));
  return bytes;
}

type PageParts = { head: string; issues: readonly Shape<typeof TaskViewSchema>[]; tail: string };

/**
 * A page is the text `JSON.stringify` makes of `{ data: { issues, dependencyGraph? }, page }`:
 * `head`, the issues' texts joined by commas, `tail`.
 */
function pageParts(result: Shape<typeof SearchTasksResponseSchema>): PageParts {
  const graph = result.dependencyGraph;
  const edges = graph
    ? `,"dependencyGraph":${JSON.stringify({ edges: graph.edges.map((e) => ({ sourceIssueId: e.sourceIssueId, targetIssueId: e.targetIssueId })) })}`
    : '';
  return { head: '{"data":{"issues":[', issues: result.tasks, tail: `]${edges}},"page":${JSON.stringify({ nextCursor: result.nextCursor ?? null })}}` };
}

/**
 * `GET /api/issues`: the page of issues, the dependency graph when the search asked for it, the
 * cursor. In the services' thread it renders UTF-8 bytes joined from each issue's bytes, kept
 * while the issue's view is shared, into a buffer of its own the thread transfers.
 */
export const ISSUE_PAGE_VIEW: ResponseView<Shape<typeof SearchTasksResponseSchema>> = {
  name: 'gateway.issues.page',
  render(result) {
    const { head, issues, tail } = pageParts(result);
    return `${head}${issues.map((v) => JSON.stringify(issueJson(v))).join(',')}${tail}`;
  },
  renderBytes(result, alloc) {
    const { head, issues, tail } = pageParts(result);
    const parts = issues.map(issueUtf8);
    const headBytes = utf8.encode(head);
    const tailBytes = utf8.encode(tail);
    let size = headBytes.length + tailBytes.length + Math.max(0, parts.length - 1);
    for (const part of parts) size += part.length;
    // Every byte of `out` is written below: a reused buffer shows nothing of its last answer.
    const out = alloc ? alloc(size) : new Uint8Array(size);
    out.set(headBytes, 0);
    let at = headBytes.length;
    for (let i = 0; i < parts.length; i++) {
      if (i > 0) out[at++] = 0x2c; // ','
      const part = parts[i]!;
      out.set(part, at);
      at += part.length;
    }
    out.set(tailBytes, at);
    return out;
  },
};

const parseJson = (text: string | undefined): unknown => (text === undefined ? undefined : JSON.parse(text));

export function activityJson(a: Shape<typeof ActivitySchema>) {
  return {
    id: a.id || null,
    issueId: a.issueId,
    actor: { type: a.actor?.type ?? 'system', id: a.actor?.id ?? 'system' },
    kind: a.kind,
    changes: a.changes.map((c) => {
      const from = parseJson(c.fromJson);
      const to = parseJson(c.toJson);
      return { field: c.field, ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) };
    }),
    at: a.at,
  };
}

export function commentJson(c: Shape<typeof CommentSchema>) {
  return { id: c.id, issueId: c.issueId, authorId: c.authorId, authorType: c.authorType, body: c.body, createdAt: c.createdAt };
}

export function evidenceJson(e: Shape<typeof EvidenceSchema>) {
  return {
    id: e.id,
    issueId: e.issueId,
    kind: e.kind,
    title: e.title,
    url: e.url ?? null,
    body: e.body ?? null,
    checkId: e.checkId ?? null,
    createdBy: e.createdBy,
    createdAt: e.createdAt,
  };
}

export function approvalJson(a: Shape<typeof ApprovalSchema>) {
  return {
    id: a.id,
    issueId: a.issueId,
    requestedBy: a.requestedBy,
    reason: a.reason,
    status: a.status,
    decidedBy: a.decidedBy ?? null,
    decidedAt: a.decidedAt ?? null,
    decisionNote: a.decisionNote ?? null,
    createdAt: a.createdAt,
    for: a.approvalFor,
    expiresAt: a.expiresAt,
  };
}

/** What the done policy still needs (docs/planning.md): the task detail, the contract, context packs. */
export function doneStatusJson(d: Shape<typeof DoneStatusSchema> | undefined) {
  return {
    requires: d?.requires || 'nothing',
    gate: d?.gate || 'done',
    missingCheckIds: d?.missingCheckIds ?? [],
    evidencedChecks: d?.evidencedChecks ?? 0,
    evidenceCount: d?.evidenceCount ?? 0,
    approval: d?.approval || 'not-required',
    ready: d?.ready ?? true,
    nextStep: d?.nextStep ?? '',
  };
}

const refJson = (r: Shape<typeof TaskRefSchema>) => ({ id: r.id, title: r.title, status: r.status });

/**
 * `GET /api/issues/{id}`: the issue plus comments, activity, evidence, approvals and graph
 * context, as `{ data }`. The issue's JSON and the rest's are joined as text (the detail's keys
 * follow the issue's, as the IssueDetail schema's `allOf` orders them), so no object of both is
 * built.
 */
export const ISSUE_DETAIL_VIEW: ResponseView<Shape<typeof GetTaskResponseSchema>> = {
  name: 'gateway.issues.detail',
  render(d) {
    if (!d.task) throw new Error('issue detail without a task');
    const issue = JSON.stringify(issueJson(d.task));
    const rest = JSON.stringify({
      comments: d.comments.map(commentJson),
      commentCount: d.commentCount,
      activity: d.activity.map(activityJson),
      activityCount: d.activityCount,
      evidence: d.evidence.map(evidenceJson),
      approvals: d.approvals.map(approvalJson),
      done: doneStatusJson(d.task.task?.done),
      dependencyGraph: {
        dependencies: d.dependencies.map(refJson),
        dependents: d.dependents.map(refJson),
        edges: (d.dependencyGraph?.edges ?? []).map((e) => ({ sourceIssueId: e.sourceIssueId, targetIssueId: e.targetIssueId })),
      },
    });
    return `{"data":${issue.slice(0, -1)},${rest.slice(1)}}`;
  },
};

/** Every view the gateway asks the services' thread for. */
export const GATEWAY_VIEWS: readonly ResponseView<never>[] = [ISSUE_PAGE_VIEW, ISSUE_DETAIL_VIEW];
