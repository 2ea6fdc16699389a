/**
 * The demo workspace of the all-in-one mode (DECISIONS §1): plan `pro`, owned by the system
 * administrator, with a program, an initiative, a project, a milestone and a handful of tasks
 * with dependencies (one labelled `launch-blocker`). Everything is created through the issues
 * service's own RPCs, as the system principal, and found again by name first: seeding twice (or
 * again after a crash half-way) never duplicates anything.
 */
import type { ProgramService } from '@planning/proto/planning/issues/v1/programs_pb';
import type { ProjectService } from '@planning/proto/planning/issues/v1/projects_pb';
import type { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import type { TaskService } from '@planning/proto/planning/issues/v1/tasks_pb';
import type { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { SYSTEM_PRINCIPAL, type RpcClient } from '@planning/rpc';

export interface DemoClients {
  workspaces: Pick<RpcClient<typeof WorkspaceService>, 'listWorkspaces' | 'createWorkspace'>;
  projects: Pick<RpcClient<typeof ProjectService>, 'listProjects' | 'createProject' | 'listMilestones' | 'createMilestone'>;
  programs: Pick<RpcClient<typeof ProgramService>, 'listPrograms' | 'createProgram' | 'listInitiatives' | 'createInitiative'>;
  tasks: Pick<RpcClient<typeof TaskService>, 'searchTasks' | 'createTask'>;
  taskRecords: Pick<RpcClient<typeof TaskRecordService>, 'listEvidence' | 'addEvidence'>;
}

export const DEMO_WORKSPACE_NAME = 'Demo workspace';
export const DEMO_WORKSPACE_SLUG = 'demo-workspace';

export interface DemoResult {
  workspaceId: string;
  /** Records this run created (0 on a repeat). */
  created: number;
}

const AS_SYSTEM = { principal: SYSTEM_PRINCIPAL };

/** `YYYY-MM-DD`, `days` after `now`. */
function dateAfter(now: Date, days: number): string {
  return new Date(now.getTime() + days * 86_400_000).toISOString().slice(0, 10);
}

interface DemoTask {
  key: string;
  title: string;
  description: string;
  status: string;
  priority: string;
  labels: string[];
  dueInDays?: number;
  dependsOn: string[];
  milestone: boolean;
  checks: string[];
  brief?: { objective: string; expectedOutput: string; verification: string[]; constraints?: string[] };
}

const TASKS: readonly DemoTask[] = [
  {
    key: 'checklist',
    title: 'Write the launch checklist',
    description: 'List what must be true before the public launch: data retention, on-call, status page.',
    status: 'done',
    priority: 'high',
    labels: ['docs'],
    dueInDays: -3,
    dependsOn: [],
    milestone: true,
    checks: ['Checklist reviewed by the team'],
    brief: { objective: 'A launch checklist the team agrees on', expectedOutput: 'docs/launch.md', verification: ['Reviewed in the weekly sync'] },
  },
  {
    key: 'indexes',
    title: 'Add search indexes for task queries',
    description: 'Task search must answer in milliseconds at 100,000 tasks per workspace.',
    status: 'ready',
    priority: 'urgent',
    labels: ['launch-blocker', 'backend'],
    dueInDays: 7,
    dependsOn: ['checklist'],
    milestone: true,
    checks: ['Benchmark shows p99 under 10 ms', 'No collection scan for filtered searches'],
    brief: {
      objective: 'Indexed task search for every documented filter and sort',
      expectedOutput: 'Indexes plus a benchmark in docs/benchmarks.md',
      verification: ['pnpm bench', 'explain() shows IXSCAN for each filter'],
      constraints: ['No change to the REST contract'],
    },
  },
  {
    key: 'load-test',
    title: 'Load-test the claim endpoint',
    description: 'Fifty agents racing for the same task must produce exactly one claim.',
    status: 'ready',
    priority: 'high',
    labels: ['launch-blocker'],
    dueInDays: 14,
    dependsOn: ['indexes'],
    milestone: true,
    checks: ['Exactly one claim per race over 200 races'],
    brief: { objective: 'Prove claims never double up', expectedOutput: 'A repeatable load test', verification: ['Zero duplicate claims'] },
  },
  {
    key: 'api-docs',
    title: 'Document the REST API',
    description: 'Publish the OpenAPI document and a getting-started page for agents.',
    status: 'backlog',
    priority: 'medium',
    labels: ['docs'],
    dependsOn: ['indexes'],
    milestone: false,
    checks: [],
  },
  {
    key: 'on-call',
    title: 'Set up the on-call rota',
    description: 'Two people per week, with an escalation path.',
    status: 'ready',
    priority: 'low',
    labels: ['ops'],
    dueInDays: 21,
    dependsOn: [],
    milestone: false,
    checks: [],
  },
];

/** Seeds the demo workspace for `ownerId` (the system administrator) unless it is complete already. */
export async function seedDemo(clients: DemoClients, ownerId: string, now: Date): Promise<DemoResult> {
  let created = 0;
  const found = await clients.workspaces.listWorkspaces({ q: DEMO_WORKSPACE_SLUG, limit: 200 }, AS_SYSTEM);
  let workspace = found.workspaces.find((w) => w.slug === DEMO_WORKSPACE_SLUG);
  if (!workspace) {
    workspace = (await clients.workspaces.createWorkspace({ name: DEMO_WORKSPACE_NAME, ownerId, planId: 'pro' }, AS_SYSTEM)).workspace;
    created++;
  }
  if (!workspace) throw new Error('demo workspace was not created');
  const workspaceId = workspace.id;

  const programName = 'Agent platform';
  let program = (await clients.programs.listPrograms({ workspaceId, q: programName }, AS_SYSTEM)).programs.find((p) => p.name === programName);
  if (!program) {
    program = (
      await clients.programs.createProgram(
        { workspaceId, name: programName, ownerId, description: 'Everything agents need to plan and ship work with people.' },
        AS_SYSTEM,
      )
    ).program;
    created++;
  }

  const initiativeName = 'Public launch';
  let initiative = (await clients.programs.listInitiatives({ workspaceId, q: initiativeName }, AS_SYSTEM)).initiatives.find(
    (i) => i.name === initiativeName,
  );
  if (!initiative && program) {
    initiative = (
      await clients.programs.createInitiative(
        {
          programId: program.id,
          name: initiativeName,
          ownerIds: [ownerId],
          goal: 'Open the planning API to the public with proof that it holds up.',
          startDate: dateAfter(now, -7),
          targetDate: dateAfter(now, 60),
          contextPack: [
            { kind: 'doc', title: 'Launch checklist', path: 'docs/launch.md' },
            { kind: 'file', title: 'Task search', path: 'services/issues/src/store/task-search.ts' },
            { kind: 'link', title: 'API contract', url: 'https://example.com/planning-service-api' },
          ],
        },
        AS_SYSTEM,
      )
    ).initiative;
    created++;
  }

  const projectName = 'Planning API';
  let project = (await clients.projects.listProjects({ workspaceId, q: projectName }, AS_SYSTEM)).projects.find((p) => p.name === projectName);
  if (!project) {
    project = (
      await clients.projects.createProject(
        {
          workspaceId,
          name: projectName,
          goal: 'A planning API agents can trust: fast search, safe claims, clear briefs.',
          ...(initiative ? { initiativeId: initiative.id } : {}),
          contextPack: [{ kind: 'doc', title: 'Architecture', path: 'docs/architecture.md' }],
        },
        AS_SYSTEM,
      )
    ).project;
    created++;
  }
  if (!project) throw new Error('demo project was not created');
  const projectId = project.id;

  const milestoneName = 'Beta';
  let milestone = (await clients.projects.listMilestones({ projectId }, AS_SYSTEM)).milestones.find((m) => m.name === milestoneName);
  if (!milestone) {
    milestone = (await clients.projects.createMilestone({ projectId, name: milestoneName, targetDate: dateAfter(now, 30) }, AS_SYSTEM)).milestone;
    created++;
  }

  const ids = new Map<string, string>();
  for (const spec of TASKS) {
    const existing = (await clients.tasks.searchTasks({ workspaceId, projectId, q: spec.title, limit: 10 }, AS_SYSTEM)).tasks.find(
      (t) => t.task?.title === spec.title,
    );
    if (existing?.task) {
      ids.set(spec.key, existing.task.id);
      continue;
    }
    const { task } = await clients.tasks.createTask(
      {
        workspaceId,
        projectId,
        title: spec.title,
        description: spec.description,
        status: spec.status,
        priority: spec.priority,
        labels: spec.labels,
        ...(spec.milestone && milestone ? { milestoneId: milestone.id } : {}),
        ...(initiative ? { initiativeId: initiative.id } : {}),
        ...(spec.dueInDays !== undefined ? { dueDate: dateAfter(now, spec.dueInDays) } : {}),
        dependencies: spec.dependsOn.map((key) => ids.get(key)).filter((id): id is string => id !== undefined),
        acceptanceChecks: spec.checks.map((title) => ({ id: '', title, done: spec.status === 'done' })),
        ...(spec.brief
          ? {
              instructions: {
                objective: spec.brief.objective,
                expectedOutput: spec.brief.expectedOutput,
                verification: spec.brief.verification,
                constraints: spec.brief.constraints ?? [],
                permissions: ['Read and write the repository'],
                escalation: 'Ask the workspace owner',
              },
            }
          : {}),
      },
      AS_SYSTEM,
    );
    if (!task?.task) throw new Error(`demo task '${spec.title}' was not created`);
    ids.set(spec.key, task.task.id);
    created++;
  }

  // The finished checklist carries its proof, so readiness shows a verified task.
  const checklistId = ids.get('checklist');
  if (checklistId && (await clients.taskRecords.listEvidence({ issueId: checklistId, limit: 1 }, AS_SYSTEM)).evidence.length === 0) {
    await clients.taskRecords.addEvidence(
      { issueId: checklistId, kind: 'link', title: 'Reviewed checklist', url: 'https://example.com/launch-checklist' },
      AS_SYSTEM,
    );
    created++;
  }
  return { workspaceId, created };
}
