/**
 * Reads what an export contains from the issues service, page by page over gRPC (other services
 * never read issues' collections). Calls are made as the system principal, for one workspace
 * only, after the caller was authorized for that workspace (ExportsCore): a token with scope
 * `admin` need not also hold `issues:read`.
 */
import { toJson } from '@bufbuild/protobuf';
import { ServiceError } from '@planning/errors';
import { MilestoneSchema, ProjectSchema, type ProjectService } from '@planning/proto/planning/issues/v1/projects_pb';
import { InitiativeSchema, ProgramSchema, type ProgramService } from '@planning/proto/planning/issues/v1/programs_pb';
import type { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import { CommentSchema, EvidenceSchema, TimeEntrySchema, type Task, type TaskService } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { SYSTEM_PRINCIPAL, type RpcClient } from '@planning/rpc';
import type { ExportFilterValues } from './filters.js';
import type { BackupIssue, BackupRecords, ExportIssue } from './formats.js';

export interface IssuesClients {
  workspaces: RpcClient<typeof WorkspaceService>;
  tasks: RpcClient<typeof TaskService>;
  taskRecords: RpcClient<typeof TaskRecordService>;
  projects: RpcClient<typeof ProjectService>;
  programs: RpcClient<typeof ProgramService>;
}

/** The largest page the issues service serves (DECISIONS §11). */
const PAGE = 200;
/** Per call: a slow page fails the export rather than hanging it. */
const CALL_DEADLINE_MS = 30_000;
/** Sub-record lists fetched at once during a backup. */
const BACKUP_CONCURRENCY = 4;

/**
 * When the export must stop: its signal (the caller went away, or the export's own deadline
 * passed) and its deadline. Every call to the issues service carries both, and pages are not
 * fetched once the signal has fired.
 */
export interface ReadControl {
  signal?: AbortSignal | undefined;
  deadline?: Date | undefined;
}

const system = (control: ReadControl = {}) => {
  control.signal?.throwIfAborted();
  return {
    principal: SYSTEM_PRINCIPAL,
    deadlineMs: CALL_DEADLINE_MS,
    ...(control.deadline ? { deadline: control.deadline } : {}),
    ...(control.signal ? { signal: control.signal } : {}),
  };
};

/** Thrown (as 413) when what is being read would make the artifact larger than allowed. */
export function tooLarge(maxBytes: number): ServiceError {
  return new ServiceError(
    'payload-too-large',
    `The export would be larger than ${maxBytes} bytes; narrow it with filters (project, milestone, status, ...)`,
  );
}

/** A running estimate of the artifact's size, checked while reading so a huge workspace stops early. */
export class SizeBudget {
  private used = 0;
  constructor(private readonly maxBytes: number) {}
  add(value: unknown): void {
    this.used += Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
    if (this.used > this.maxBytes) throw tooLarge(this.maxBytes);
  }
}

export function exportIssue(task: Task): ExportIssue {
  const issue: ExportIssue = {
    id: task.id,
    workspaceId: task.workspaceId,
    projectId: task.projectId,
    title: task.title,
    description: task.description,
    status: task.status,
    priority: task.priority,
    labels: [...task.labels],
    dependencies: [...task.dependencies],
    acceptanceChecks: task.acceptanceChecks.map((c) => ({ id: c.id, title: c.title, done: c.done ?? false })),
    agent: {},
    createdAt: task.createdAt,
    updatedAt: task.updatedAt,
    version: task.version,
  };
  if (task.milestoneId) issue.milestoneId = task.milestoneId;
  if (task.initiativeId) issue.initiativeId = task.initiativeId;
  if (task.parentId) issue.parentId = task.parentId;
  if (task.dueDate) issue.dueDate = task.dueDate;
  if (task.estimate !== undefined) issue.estimate = task.estimate;
  if (task.agent?.assignedAgentId) issue.agent.assignedAgentId = task.agent.assignedAgentId;
  return issue;
}

/**
 * The workspace named by id or slug (an exact lookup of the unique slug), as the system sees it:
 * callers authorize before they reveal anything about it.
 */
export async function findWorkspace(
  clients: IssuesClients,
  by: { id?: string; slug?: string },
): Promise<{ id: string; slug: string; name: string } | undefined> {
  try {
    const found = by.id
      ? await clients.workspaces.getWorkspace({ id: by.id }, system())
      : await clients.workspaces.getWorkspaceBySlug({ slug: by.slug ?? '' }, system());
    const ws = found.workspace;
    return ws ? { id: ws.id, slug: ws.slug, name: ws.name } : undefined;
  } catch (err) {
    if (err instanceof ServiceError && (err.code === 'not-found' || err.code === 'invalid-input')) return undefined;
    throw err;
  }
}

/** The workspace's tasks matching the filters, in the search's order, page by page. */
export async function readIssues(
  clients: IssuesClients,
  workspaceId: string,
  filters: ExportFilterValues,
  budget: SizeBudget,
  control: ReadControl = {},
): Promise<ExportIssue[]> {
  const issues: ExportIssue[] = [];
  for await (const task of searchAll(clients, workspaceId, filters, control)) {
    const issue = exportIssue(task);
    budget.add(issue);
    issues.push(issue);
  }
  return issues;
}

async function* searchAll(clients: IssuesClients, workspaceId: string, filters: ExportFilterValues, control: ReadControl): AsyncGenerator<Task> {
  let cursor: string | undefined;
  for (;;) {
    const page = await clients.tasks.searchTasks(
      {
        workspaceId,
        projectId: filters.projectId,
        milestoneId: filters.milestoneId,
        initiativeId: filters.initiativeId,
        parentId: filters.parentId,
        status: filters.status,
        priority: filters.priority,
        labels: filters.labels,
        assignedAgentId: filters.assignedAgentId,
        dependencyState: filters.dependencyState,
        q: filters.q,
        sort: filters.sort,
        direction: filters.direction,
        includeDependencyGraph: false,
        limit: PAGE,
        ...(cursor ? { cursor } : {}),
      },
      system(control),
    );
    for (const view of page.tasks) if (view.task) yield view.task;
    if (!page.nextCursor) return;
    cursor = page.nextCursor;
  }
}

/** Every page of a cursor-paged list. */
async function collect<T>(fetch: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor?: string | undefined }>): Promise<T[]> {
  const all: T[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await fetch(cursor);
    all.push(...page.items);
    if (!page.nextCursor) return all;
    cursor = page.nextCursor;
  }
}

const JSON_OPTIONS = { alwaysEmitImplicit: true } as const;

/** The whole workspace for a backup: planning records, then tasks with their comments, time and evidence. */
export async function readBackup(
  clients: IssuesClients,
  workspace: { id: string; slug: string; name: string; planId: string },
  budget: SizeBudget,
  control: ReadControl = {},
): Promise<BackupRecords> {
  const workspaceId = workspace.id;
  const call = () => system(control);
  const page = (cursor: string | undefined) => ({ workspaceId, limit: PAGE, ...(cursor ? { cursor } : {}) });
  const track = <T>(rows: T[]): T[] => {
    for (const row of rows) budget.add(row);
    return rows;
  };
  const projects = track(
    (await collect(async (c) => {
      const r = await clients.projects.listProjects(page(c), call());
      return { items: r.projects, nextCursor: r.nextCursor };
    })).map((p) => toJson(ProjectSchema, p, JSON_OPTIONS) as Record<string, unknown>),
  );
  const milestones = track(
    (await collect(async (c) => {
      const r = await clients.projects.listMilestones(page(c), call());
      return { items: r.milestones, nextCursor: r.nextCursor };
    })).map((m) => toJson(MilestoneSchema, m, JSON_OPTIONS) as Record<string, unknown>),
  );
  const programs = track(
    (await collect(async (c) => {
      const r = await clients.programs.listPrograms(page(c), call());
      return { items: r.programs, nextCursor: r.nextCursor };
    })).map((p) => toJson(ProgramSchema, p, JSON_OPTIONS) as Record<string, unknown>),
  );
  const initiatives = track(
    (await collect(async (c) => {
      const r = await clients.programs.listInitiatives(page(c), call());
      return { items: r.initiatives, nextCursor: r.nextCursor };
    })).map((i) => toJson(InitiativeSchema, i, JSON_OPTIONS) as Record<string, unknown>),
  );
  const tasks: Task[] = [];
  for await (const task of searchAll(clients, workspaceId, { status: [], priority: [], labels: [], sort: 'createdAt', direction: 'asc' }, control)) {
    // Counted as they arrive, so a huge workspace stops before its sub-records are fetched.
    budget.add(exportIssue(task));
    budget.add(task.agent?.instructions ?? {});
    tasks.push(task);
  }
  const issues: BackupIssue[] = new Array<BackupIssue>(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++;
      const task = tasks[index]!;
      const issueId = task.id;
      const records = (cursor: string | undefined) => ({ issueId, limit: PAGE, ...(cursor ? { cursor } : {}) });
      const comments = await collect(async (c) => {
        const r = await clients.taskRecords.listComments(records(c), call());
        return { items: r.comments, nextCursor: r.nextCursor };
      });
      // Counts on the task spare a call per task that has none.
      const timeEntries =
        task.timeLoggedMinutes > 0
          ? await collect(async (c) => {
              const r = await clients.taskRecords.listTimeEntries(records(c), call());
              return { items: r.timeEntries, nextCursor: r.nextCursor };
            })
          : [];
      const evidence =
        task.evidenceCount > 0
          ? await collect(async (c) => {
              const r = await clients.taskRecords.listEvidence(records(c), call());
              return { items: r.evidence, nextCursor: r.nextCursor };
            })
          : [];
      const instructions = task.agent?.instructions;
      const base = exportIssue(task);
      const issue: BackupIssue = {
        ...base,
        agent: {
          ...base.agent,
          instructions: {
            objective: instructions?.objective ?? '',
            constraints: [...(instructions?.constraints ?? [])],
            expectedOutput: instructions?.expectedOutput ?? '',
            verification: [...(instructions?.verification ?? [])],
            permissions: [...(instructions?.permissions ?? [])],
            escalation: instructions?.escalation ?? '',
          },
        },
        comments: comments.map((c) => toJson(CommentSchema, c, JSON_OPTIONS) as Record<string, unknown>),
        timeEntries: timeEntries.map((t) => toJson(TimeEntrySchema, t, JSON_OPTIONS) as Record<string, unknown>),
        evidence: evidence.map((e) => toJson(EvidenceSchema, e, JSON_OPTIONS) as Record<string, unknown>),
      };
      budget.add(issue.comments);
      budget.add(issue.timeEntries);
      budget.add(issue.evidence);
      issues[index] = issue;
    }
  };
  await Promise.all(Array.from({ length: Math.min(BACKUP_CONCURRENCY, tasks.length) }, worker));
  return {
    workspace: { slug: workspace.slug, name: workspace.name, planId: workspace.planId },
    projects,
    milestones,
    programs,
    initiatives,
    issues,
  };
}
