/** The ready-work queue as one agent sees it: ranked tasks, what each would answer to a claim, and the run budget. */
import { authorizeWorkspace } from '@planning/access';
import { PLANS, quotaPeriod, quotaResetsAt } from '@planning/plans';
import { callOptionsFrom, type CallContext } from '@planning/rpc';
import { queueView, requireAgent, type QuotaState } from '../domain/claims.js';
import { READ_SCOPES, type CoreDeps } from './context.js';
import { claimView, doneEvidenceOf, type ReadyItem, type ReadyWork } from './views.js';

/** Starting claims a ready-work call tells the issues service about (they last moments). */
const MAX_STARTING = 1_000;

export class ReadyQueue {
  constructor(private readonly deps: CoreDeps) {}

  async readyWork(ctx: CallContext, limit: number | undefined, cursor: string | undefined): Promise<ReadyWork> {
    const agent = requireAgent(ctx.principal, READ_SCOPES);
    const access = await authorizeWorkspace(this.deps.access, ctx, agent.workspaceId, { action: 'read', scope: 'agents:read' });
    const now = this.deps.clock();
    // Tasks whose claim is still starting are not claimable; the issues service counts those in this agent's queue.
    const startingIssueIds = await this.deps.claims.startingIssueIds(agent.workspaceId, MAX_STARTING);
    const [page, used, held] = await Promise.all([
      this.deps.issues.listReadyTasks({ workspaceId: agent.workspaceId, agentId: agent.agentId, limit, cursor, startingIssueIds }, callOptionsFrom(ctx)),
      this.deps.meter.used(agent.workspaceId, 'agent-runs', now),
      this.deps.claims.activeForAgent(agent.workspaceId, agent.agentId),
    ]);
    const runLimit = PLANS[access.planId].quotas['agent-runs'];
    const exhausted = runLimit !== null && used >= runLimit;
    const quotaState: QuotaState = exhausted ? 'run-budget-exhausted' : 'within-run-budget';
    const resetsAt = quotaResetsAt(now).toISOString();
    // The agent's claim, unless its task has already left it (moved on or completed while the
    // status event that ends the claim record is on its way): the task is the truth then, as for
    // the busy check of a claim. A claim still starting has no task under it yet: it counts.
    const mine = held && held.expiresAt > now && (!held.started || page.heldClaim?.claimId === held._id) ? held : undefined;
    const claimsOnPage = await this.deps.claims.activeOn(page.tasks.map((t) => t.task?.id ?? ''));
    const claimedIds = new Set(claimsOnPage.filter((c) => c.expiresAt > now && c._id !== mine?._id).map((c) => c.issueId));
    const items: ReadyItem[] = [];
    if (!cursor && page.held && mine && page.heldClaim?.claimId === mine._id) {
      const view = queueView({
        openDependencyCount: page.held.openDependencyCount,
        claimedByOther: false,
        heldByYou: true,
        heldExpiresAt: mine.expiresAt.toISOString(),
        quotaState,
        resetsAt,
        needsBrief: page.held.agent?.readiness === 'needs-brief',
        ...(page.held.done?.nextStep ? { doneStep: page.held.done.nextStep } : {}),
      });
      items.push({ task: page.held, rank: 0, quotaState, doneEvidence: doneEvidenceOf(page.held), claim: claimView(mine, now), approvals: page.held.approvals, ...view });
    }
    for (const entry of page.tasks) {
      const task = entry.task;
      if (!task) continue;
      const view = queueView({
        openDependencyCount: task.openDependencyCount,
        claimedByOther: claimedIds.has(task.id),
        heldByYou: false,
        ...(mine ? { busyWith: mine.issueId } : {}),
        quotaState,
        resetsAt,
        needsBrief: task.agent?.readiness === 'needs-brief',
        ...(task.done?.nextStep ? { doneStep: task.done.nextStep } : {}),
      });
      items.push({ task, rank: entry.rank, quotaState, doneEvidence: doneEvidenceOf(task), approvals: task.approvals, ...view });
    }
    return {
      items,
      summary: {
        total: page.total,
        claimable: Math.max(0, page.total - page.blocked - page.starting),
        blocked: page.blocked,
        heldByYou: mine ? 1 : 0,
        quotaState,
      },
      ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
      metering: { allowed: !exhausted, kind: 'agent-runs', used, limit: runLimit, period: quotaPeriod(now), resetsAt },
    };
  }
}
