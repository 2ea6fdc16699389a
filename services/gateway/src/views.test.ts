import { create } from '@bufbuild/protobuf';
import { GetTaskResponseSchema, SearchTasksResponseSchema, TaskViewSchema } from '@planning/proto/planning/issues/v1/tasks_pb';
import { deepFreeze } from '@planning/store';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { ok } from './openapi.js';
import { issueDetailSchema, issueSchema } from './routes/planning-json.js';
import { ISSUE_DETAIL_VIEW, ISSUE_PAGE_VIEW, issueJson } from './views.js';

/**
 * The views answer with text fastify would otherwise have made from the route's response schema
 * (fast-json-stringify): the bytes must be the same, key order and nulls included.
 */
async function serializedBySchema(schema: object, payload: unknown): Promise<string> {
  const app = Fastify();
  app.get('/', { schema: { response: { 200: schema } } }, async () => payload);
  await app.ready();
  const res = await app.inject({ method: 'GET', url: '/' });
  await app.close();
  return res.body;
}

const fullTask = create(TaskViewSchema, {
  task: {
    id: 'tsk_1',
    workspaceId: 'ws_1',
    projectId: 'prj_1',
    milestoneId: 'ms_1',
    initiativeId: 'ini_1',
    parentId: 'tsk_0',
    title: 'Quote " backslash \\ and a line\nbreak, unicode é ✓ and a lone \ud800 surrogate',
    description: 'x'.repeat(300),
    status: 'in-review',
    priority: 'high',
    labels: ['a', 'b'],
    dueDate: '2026-12-01',
    estimate: 2.5,
    dependencies: ['tsk_2'],
    acceptanceChecks: [{ id: 'c1', title: 'works', done: true }, { id: 'c2', title: 'documented' }],
    agent: {
      assignedAgentId: 'agt_1',
      readiness: 'ready',
      instructions: { objective: 'do it', constraints: ['small'], expectedOutput: 'a PR', verification: ['tests'], permissions: ['repo'], escalation: 'ask' },
    },
    createdAt: '2026-11-01T00:00:00.000Z',
    updatedAt: '2026-11-02T00:00:00.000Z',
    createdBy: 'usr_1',
    version: 7,
    openDependencyCount: 1,
    dependentCount: 2,
    timeLoggedMinutes: 30,
    evidenceCount: 1,
    lastActivityAt: '2026-11-02T00:00:00.000Z',
    done: { requires: 'evidence-and-approval', gate: 'in-review', missingCheckIds: ['c2'], evidencedChecks: 1, approval: 'pending', ready: false, nextStep: 'approve', evidenceCount: 1 },
  },
  health: {
    blocksAgentClaim: true,
    reasons: ['status-not-ready', 'dependencies-open'],
    firstReminder: { kind: 'overdue', message: 'late' },
    reminders: [{ kind: 'overdue', message: 'late' }, { kind: 'missing-time', message: 'log time' }],
    safeNextActions: [{ action: 'comment', description: 'POST /api/issues/tsk_1/comments' }],
    nextAction: 'review it',
  },
});

const bareTask = create(TaskViewSchema, {
  task: { id: 'tsk_3', workspaceId: 'ws_1', projectId: 'prj_1', title: 't', status: 'backlog', priority: 'none', createdAt: 'c', updatedAt: 'u', createdBy: 'b', lastActivityAt: 'l' },
});

describe('response views', () => {
  it('render an issue detail as the route schema would serialize it', async () => {
    for (const task of [fullTask, bareTask]) {
      const detail = create(GetTaskResponseSchema, {
        task,
        comments: [{ id: 'cmt_1', issueId: 'tsk_1', authorId: 'usr_1', authorType: 'user', body: 'hello </script>', createdAt: '2026-11-02T00:00:00.000Z' }],
        commentCount: 3,
        activity: [
          {
            id: 'act_1',
            issueId: 'tsk_1',
            actor: { type: 'user', id: 'usr_1' },
            kind: 'updated',
            changes: [
              { field: 'status', fromJson: '"ready"', toJson: '"in-review"' },
              { field: 'estimate', toJson: '2.5' },
              { field: 'milestoneId', fromJson: '"ms_0"', toJson: 'null' },
              { field: 'labels', fromJson: '["a"]', toJson: '{"b":[1,true,null]}' },
            ],
            at: '2026-11-02T00:00:00.000Z',
          },
          { issueId: 'tsk_1', kind: 'created', at: 'x' },
        ],
        activityCount: 9,
        evidence: [
          { id: 'ev_1', issueId: 'tsk_1', kind: 'link', title: 'PR', url: 'https://example.com/1', checkId: 'c1', createdBy: 'agt_1', createdAt: 'x' },
          { id: 'ev_2', issueId: 'tsk_1', kind: 'note', title: 'n', body: 'b', createdBy: 'usr_1', createdAt: 'y' },
        ],
        approvals: [
          { id: 'apr_1', issueId: 'tsk_1', requestedBy: 'usr_1', reason: 'r', status: 'approved', decidedBy: 'usr_2', decidedAt: 'z', decisionNote: 'ok', createdAt: 'x', approvalFor: 'done', expiresAt: 'e' },
          { id: 'apr_2', issueId: 'tsk_1', requestedBy: 'usr_1', reason: 'r', status: 'pending', createdAt: 'x', approvalFor: 'merge', expiresAt: 'e' },
        ],
        dependencies: [{ id: 'tsk_2', title: 'dep', status: 'ready' }],
        dependents: [{ id: 'tsk_4', title: 'after', status: 'backlog' }],
        dependencyGraph: { edges: [{ sourceIssueId: 'tsk_2', targetIssueId: 'tsk_1' }] },
      });
      const rendered = ISSUE_DETAIL_VIEW.render(detail);
      const detailObject = JSON.parse(rendered) as { data: Record<string, unknown> };
      expect(Object.keys(detailObject.data)).toEqual([
        ...Object.keys(issueJson(task)),
        ...['comments', 'commentCount', 'activity', 'activityCount', 'evidence', 'approvals', 'done', 'dependencyGraph'],
      ]);
      expect(detailObject.data).toMatchObject({ ...issueJson(task), commentCount: 3, activityCount: 9 });
      expect(detailObject.data.activity).toEqual([
        {
          id: 'act_1',
          issueId: 'tsk_1',
          actor: { type: 'user', id: 'usr_1' },
          kind: 'updated',
          changes: [
            { field: 'status', from: 'ready', to: 'in-review' },
            { field: 'estimate', to: 2.5 },
            { field: 'milestoneId', from: 'ms_0', to: null },
            { field: 'labels', from: ['a'], to: { b: [1, true, null] } },
          ],
          at: '2026-11-02T00:00:00.000Z',
        },
        { id: null, issueId: 'tsk_1', actor: { type: 'system', id: 'system' }, kind: 'created', changes: [], at: 'x' },
      ]);
      expect(rendered).toBe(await serializedBySchema(ok(issueDetailSchema), detailObject));
    }
    // A detail with nothing around the issue.
    const empty = create(GetTaskResponseSchema, { task: bareTask });
    const rendered = ISSUE_DETAIL_VIEW.render(empty);
    expect(rendered).toBe(await serializedBySchema(ok(issueDetailSchema), JSON.parse(rendered)));
    expect(() => ISSUE_DETAIL_VIEW.render(create(GetTaskResponseSchema, {}))).toThrow(/without a task/);
  });

  it('render a page of issues as the route schema would serialize it', async () => {
    const page = create(SearchTasksResponseSchema, { tasks: [fullTask, bareTask], nextCursor: 'abc' });
    const rendered = ISSUE_PAGE_VIEW.render(page);
    const schema = {
      type: 'object',
      required: ['data', 'page'],
      properties: {
        data: { type: 'object', required: ['issues'], properties: { issues: { type: 'array', items: issueSchema } } },
        page: { type: 'object', required: ['nextCursor'], properties: { nextCursor: { type: ['string', 'null'] } } },
      },
    };
    expect(rendered).toBe(await serializedBySchema(schema, JSON.parse(rendered)));
    expect(JSON.parse(rendered)).toEqual({ data: { issues: [issueJson(fullTask), issueJson(bareTask)] }, page: { nextCursor: 'abc' } });
  });

  it('render a page joined from issue texts or UTF-8 bytes: what JSON.stringify makes of the page, frozen (shared, memoised) views or not', () => {
    const edges = [{ sourceIssueId: 'tsk_2', targetIssueId: 'tsk_1' }];
    const asObject = (graph: boolean, cursor: string | undefined): string =>
      JSON.stringify({
        data: { issues: [issueJson(fullTask), issueJson(bareTask)], ...(graph ? { dependencyGraph: { edges } } : {}) },
        page: { nextCursor: cursor ?? null },
      });
    const shared = [deepFreeze(structuredClone(fullTask)), deepFreeze(structuredClone(bareTask))];
    for (const tasks of [[fullTask, bareTask], shared, shared]) {
      for (const graph of [false, true]) {
        for (const cursor of [undefined, 'next "cursor"']) {
          const page = create(SearchTasksResponseSchema, { tasks, ...(cursor ? { nextCursor: cursor } : {}), ...(graph ? { dependencyGraph: { edges } } : {}) });
          expect(ISSUE_PAGE_VIEW.render(page)).toBe(asObject(graph, cursor));
          const bytes = ISSUE_PAGE_VIEW.renderBytes!(page);
          expect(Buffer.from(bytes).equals(Buffer.from(asObject(graph, cursor), 'utf8'))).toBe(true);
          // A buffer of its own, so the services' thread can transfer it.
          expect(bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.length).toBe(true);
        }
      }
    }
    expect(ISSUE_PAGE_VIEW.render(create(SearchTasksResponseSchema, {}))).toBe('{"data":{"issues":[]},"page":{"nextCursor":null}}');
    expect(Buffer.from(ISSUE_PAGE_VIEW.renderBytes!(create(SearchTasksResponseSchema, {}))).toString()).toBe('{"data":{"issues":[]},"page":{"nextCursor":null}}');
  });
});
