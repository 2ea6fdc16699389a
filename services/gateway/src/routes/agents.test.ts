import { conflict, ServiceError } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import { createHttpApp } from '@planning/runtime/http';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GatewayDeps } from '../deps.js';
import { agentRoutes } from './agents.js';

/**
 * The agents routes translate HTTP to the agents-claims service's gRPC methods and back; every
 * rule lives in the service (tested there and end to end). These tests pin the translation: what
 * each route sends, the JSON it answers, and that the service's errors pass through unchanged.
 */

const token: Principal = { type: 'api-key', id: 'key_1', keyId: 'key_1', workspaceId: 'ws_1', agentId: 'agent-a', isAdmin: false, scopes: [] };

const claim = {
  id: 'clm_1',
  workspaceId: 'ws_1',
  issueId: 'iss_1',
  agentId: 'agent-a',
  state: 'active',
  fencingToken: 3,
  expiresAt: '2025-06-02T10:30:00.000Z',
  leaseSeconds: 1800,
  createdAt: '2025-06-02T10:00:00.000Z',
};
const metering = { allowed: true, kind: 'agent-runs', used: 4, period: '2025-06', resetsAt: '2025-07-01T00:00:00.000Z' };

let app: FastifyInstance;
let calls: { method: string; request: unknown; principal: unknown }[];
let answer: (method: string) => unknown;

beforeEach(async () => {
  calls = [];
  answer = () => ({});
  const claims = new Proxy(
    {},
    {
      get: (_t, method: string) => async (request: unknown, options: { principal?: unknown } = {}) => {
        calls.push({ method, request, principal: options.principal });
        const value = answer(method);
        if (value instanceof Error) throw value;
        return value;
      },
    },
  );
  app = createHttpApp();
  app.decorateRequest('principal', null as unknown as Principal);
  app.addHook('onRequest', async (request) => {
    request.principal = token;
  });
  await agentRoutes(app, { rpc: { claims } } as unknown as GatewayDeps);
  await app.ready();
});

afterEach(async () => {
  await app.close();
});

describe('agents routes: claim', () => {
  it('agents routes: a claim sends the issue and the idempotency key as the caller, and answers claim, issue and metering', async () => {
    answer = () => ({ claim, issue: { id: 'iss_1', status: 'in-progress' }, metering, replayed: false });
    const res = await app.inject({ method: 'POST', url: '/api/agents/claim', headers: { 'idempotency-key': 'k-1' }, payload: { issueId: 'iss_1' } });
    expect(res.statusCode).toBe(200);
    expect(calls).toEqual([{ method: 'claimWork', request: { issueId: 'iss_1', idempotencyKey: 'k-1' }, principal: token }]);
    expect(res.json()).toEqual({
      data: {
        claim: { ...claim, renewedAt: null, endedAt: null, endReason: null },
        issue: { id: 'iss_1', status: 'in-progress' },
        metering: { ...metering, limit: null },
      },
    });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
  });

  it('agents routes: a replayed answer says so in a header', async () => {
    answer = () => ({ claim, issue: { id: 'iss_1', status: 'in-progress' }, metering: { ...metering, limit: 10000 }, replayed: true });
    const res = await app.inject({ method: 'POST', url: '/api/agents/claim', payload: { issueId: 'iss_1' } });
    expect(res.headers['idempotent-replayed']).toBe('true');
    expect(res.json().data.metering.limit).toBe(10000);
    expect(calls[0]?.request).toEqual({ issueId: 'iss_1' });
  });

  it('agents routes: a replayed refusal says so in the header too; a first refusal does not', async () => {
    answer = () => new ServiceError('work-already-claimed', 'held', { reason: 'not-ready', replayed: true } as ServiceError['details']);
    const replayed = await app.inject({ method: 'POST', url: '/api/agents/claim', headers: { 'idempotency-key': 'k-1' }, payload: { issueId: 'iss_1' } });
    expect(replayed.statusCode).toBe(409);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.json().error).toEqual({ code: 'work-already-claimed', message: 'held', reason: 'not-ready' });
    answer = () => conflict('not-ready', 'held');
    const first = await app.inject({ method: 'POST', url: '/api/agents/claim', headers: { 'idempotency-key': 'k-2' }, payload: { issueId: 'iss_1' } });
    expect(first.statusCode).toBe(409);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
  });

  it('agents routes: bad bodies are 400 invalid-input naming the field, and nothing is called', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{}, 'issueId'],
      [{ issueId: 7 }, 'issueId'],
      [{ issueId: 'iss_1', extra: true }, 'extra'],
      [{ issueId: 'has spaces' }, 'issueId'],
    ];
    for (const [payload, field] of cases) {
      const res = await app.inject({ method: 'POST', url: '/api/agents/claim', payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'invalid-input', field });
    }
    expect(calls).toEqual([]);
  });

  it('agents routes: the service’s refusals pass through with status, reason and quota', async () => {
    const cases: [Error, number, Record<string, unknown>][] = [
      [conflict('active-claim', 'held'), 409, { code: 'work-already-claimed', reason: 'active-claim' }],
      [conflict('idempotency-in-flight', 'wait'), 409, { code: 'work-already-claimed', reason: 'idempotency-in-flight' }],
      [new ServiceError('quota-exceeded', 'used up', { quota: { kind: 'agent-runs', limit: 5, used: 5, resetsAt: '2025-07-01T00:00:00.000Z' } }), 403, { code: 'quota-exceeded', quota: { kind: 'agent-runs', limit: 5, used: 5, resetsAt: '2025-07-01T00:00:00.000Z' } }],
      [new ServiceError('forbidden', 'assigned', { reason: 'assigned-to-another-agent' }), 403, { code: 'forbidden', reason: 'assigned-to-another-agent' }],
      [new ServiceError('not-found', 'Issue not found'), 404, { code: 'not-found' }],
    ];
    for (const [error, status, body] of cases) {
      answer = () => error;
      const res = await app.inject({ method: 'POST', url: '/api/agents/claim', payload: { issueId: 'iss_1' } });
      expect(res.statusCode).toBe(status);
      expect(res.json().error).toMatchObject(body);
    }
  });
});

describe('agents routes: under a claim', () => {
  it('agents routes: heartbeat and release take no body or a fencing token', async () => {
    const gate = { id: 'apr_1', approvalFor: 'done', status: 'rejected', requestedBy: 'key_1', requestedAt: '2025-06-02T10:01:00.000Z', expiresAt: '2025-06-09T10:01:00.000Z' };
    answer = () => ({ claim, issue: { id: 'iss_1', status: 'in-progress', approvals: [gate] } });
    const bare = await app.inject({ method: 'POST', url: '/api/agents/claims/iss_1/heartbeat' });
    expect(bare.statusCode).toBe(200);
    expect(bare.json().data.claim.fencingToken).toBe(3);
    // The holder sees decisions on its task's approval requests in every heartbeat.
    expect(bare.json().data.issue.approvals).toEqual([{ ...gate, approvalFor: undefined, for: 'done', decidedAt: null }].map(({ approvalFor: _a, ...g }) => g));
    const fenced = await app.inject({ method: 'POST', url: '/api/agents/claims/iss_1/release', payload: { fencingToken: 3 } });
    expect(fenced.statusCode).toBe(200);
    expect(calls.map((c) => [c.method, c.request])).toEqual([
      ['renewClaim', { issueId: 'iss_1', fencingToken: undefined }],
      ['releaseClaim', { issueId: 'iss_1', fencingToken: 3 }],
    ]);
    for (const payload of [{ fencingToken: 0 }, { fencingToken: '3' }, { other: 1 }]) {
      const res = await app.inject({ method: 'POST', url: '/api/agents/claims/iss_1/heartbeat', payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('invalid-input');
    }
  });

  it('agents routes: a status post answers 201 with the note; an empty message is 400', async () => {
    answer = () => ({ claim, issue: { id: 'iss_1', status: 'in-progress' }, note: { id: 'cmt_1', body: 'Half done', createdAt: '2025-06-02T10:05:00.000Z' } });
    const res = await app.inject({ method: 'POST', url: '/api/agents/claims/iss_1/status', payload: { message: 'Half done', fencingToken: 3 } });
    expect(res.statusCode).toBe(201);
    expect(res.json().data.note).toEqual({ id: 'cmt_1', body: 'Half done', createdAt: '2025-06-02T10:05:00.000Z' });
    expect(calls[0]).toMatchObject({ method: 'postStatus', request: { issueId: 'iss_1', message: 'Half done', fencingToken: 3 } });
    const empty = await app.inject({ method: 'POST', url: '/api/agents/claims/iss_1/status', payload: { message: '' } });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error.field).toBe('message');
    answer = () => conflict('stale-claim', 'expired');
    const stale = await app.inject({ method: 'POST', url: '/api/agents/claims/iss_1/status', payload: { message: 'late' } });
    expect([stale.statusCode, stale.json().error.reason]).toEqual([409, 'stale-claim']);
  });
});

describe('agents routes: ready work, claims, policy', () => {
  it('agents routes: ready work answers items with their claim queue, the summary, the queue and the page', async () => {
    answer = () => ({
      items: [
        {
          id: 'iss_2',
          workspaceId: 'ws_1',
          projectId: 'prj_1',
          title: 'Do it',
          status: 'ready',
          priority: 'high',
          labels: ['x'],
          createdAt: '2025-06-01T00:00:00.000Z',
          readiness: 'ready',
          openDependencyCount: 1,
          rank: 1,
          agentClaimQueue: {
            state: 'blocked',
            quotaState: 'within-run-budget',
            nextAction: 'Finish the 1 open dependency first.',
            doneEvidence: { completed: 0, total: 2, requires: 'evidence', missingCheckIds: ['chk_1', 'chk_2'], approval: 'not-required', ready: false },
            whyNotClaimable: { reason: 'dependencies-open', message: '1 dependency is not done yet' },
          },
          approvals: [
            { id: 'apr_1', approvalFor: 'done', status: 'approved', requestedBy: 'key_1', requestedAt: '2025-06-01T00:00:00.000Z', expiresAt: '2025-06-08T00:00:00.000Z', decidedAt: '2025-06-01T01:00:00.000Z' },
          ],
        },
      ],
      queueSummary: { total: 1, claimable: 0, blocked: 1, heldByYou: 0, quotaState: 'within-run-budget' },
      claimQueue: [{ issueId: 'iss_2', rank: 1, state: 'blocked' }],
      metering: { ...metering, limit: 10000 },
    });
    const res = await app.inject({ method: 'GET', url: '/api/agents/ready-work?limit=5' });
    expect(res.statusCode).toBe(200);
    expect(calls[0]?.request).toEqual({ limit: 5, cursor: undefined });
    const body = res.json();
    expect(body.data[0]).toEqual({
      id: 'iss_2',
      workspaceId: 'ws_1',
      projectId: 'prj_1',
      title: 'Do it',
      status: 'ready',
      priority: 'high',
      labels: ['x'],
      dueDate: null,
      createdAt: '2025-06-01T00:00:00.000Z',
      agent: { assignedAgentId: null, readiness: 'ready' },
      openDependencyCount: 1,
      rank: 1,
      agentClaimQueue: {
        state: 'blocked',
        quotaState: 'within-run-budget',
        nextAction: 'Finish the 1 open dependency first.',
        doneEvidence: { completed: 0, total: 2, requires: 'evidence', missingCheckIds: ['chk_1', 'chk_2'], approval: 'not-required', ready: false },
        whyNotClaimable: { reason: 'dependencies-open', message: '1 dependency is not done yet' },
      },
      claim: null,
      approvals: [
        { id: 'apr_1', for: 'done', status: 'approved', requestedBy: 'key_1', requestedAt: '2025-06-01T00:00:00.000Z', expiresAt: '2025-06-08T00:00:00.000Z', decidedAt: '2025-06-01T01:00:00.000Z' },
      ],
    });
    expect(body.queueSummary).toEqual({ total: 1, claimable: 0, blocked: 1, heldByYou: 0, quotaState: 'within-run-budget' });
    expect(body.claimQueue).toEqual([{ issueId: 'iss_2', rank: 1, state: 'blocked' }]);
    expect(body.page).toEqual({ nextCursor: null });
    expect((await app.inject({ method: 'GET', url: '/api/agents/ready-work?limit=0' })).statusCode).toBe(400);
  });

  it('agents routes: the claim list splits comma-separated states; the policy is read and set (null resets)', async () => {
    answer = (method) => (method === 'listClaims' ? { claims: [claim], nextCursor: 'c2' } : { policy: { workspaceId: 'ws_1', leaseSeconds: 60, defaultLeaseSeconds: 1800, custom: true } });
    const list = await app.inject({ method: 'GET', url: '/api/agents/claims?workspaceId=ws_1&state=active,expired&state=released' });
    expect(list.json()).toMatchObject({ data: [{ id: 'clm_1' }], page: { nextCursor: 'c2' } });
    expect(calls[0]?.request).toMatchObject({ workspaceId: 'ws_1', states: ['active', 'expired', 'released'] });
    const got = await app.inject({ method: 'GET', url: '/api/agents/claim-policy?workspaceId=ws_1' });
    expect(got.json().data).toEqual({ workspaceId: 'ws_1', leaseSeconds: 60, defaultLeaseSeconds: 1800, custom: true, updatedAt: null });
    await app.inject({ method: 'PUT', url: '/api/agents/claim-policy', payload: { workspaceId: 'ws_1', leaseSeconds: null } });
    await app.inject({ method: 'PUT', url: '/api/agents/claim-policy', payload: { workspaceId: 'ws_1', leaseSeconds: 90 } });
    expect(calls.slice(2).map((c) => c.request)).toEqual([{ workspaceId: 'ws_1' }, { workspaceId: 'ws_1', leaseSeconds: 90 }]);
    const bad = await app.inject({ method: 'PUT', url: '/api/agents/claim-policy', payload: { workspaceId: 'ws_1', leaseSeconds: 0 } });
    expect([bad.statusCode, bad.json().error.field]).toEqual([400, 'leaseSeconds']);
    const missing = await app.inject({ method: 'GET', url: '/api/agents/claim-policy' });
    expect(missing.statusCode).toBe(400);
  });
});
