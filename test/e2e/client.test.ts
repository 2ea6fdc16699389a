import { randomBytes } from 'node:crypto';
import { createPlanningClient, type PlanningClient } from '@planning/client';
import document from '@planning/client/openapi.json' with { type: 'json' };
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { Middleware } from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../support/cluster.js';

/**
 * The main flows through the generated client (@planning/client) against the running service:
 * every call is typed from the committed OpenAPI document, and every answer — success or error
 * — is validated against the schema the document gives for that operation and status. A route
 * that answers what its document does not say fails here; `pnpm check:generated` makes sure the
 * committed document is the one the gateway serves.
 */

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats.default(ajv);
ajv.addSchema(document as object, 'openapi');

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
const validators = new Map<string, ValidateFunction>();

/** The validator of an operation's answer with `status`, from the document (the status must be documented). */
function validatorFor(method: string, path: string, status: number): ValidateFunction | string {
  const operation = (document as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }).paths[path]?.[method];
  if (!operation) return `${method.toUpperCase()} ${path} is not in the document`;
  const response = operation.responses[String(status)];
  if (!response) return `${method.toUpperCase()} ${path} answered ${status}, which the document does not list (${Object.keys(operation.responses).join(', ')})`;
  const key = `${method} ${path} ${status}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = ajv.compile({ $ref: `openapi#/${pointer('paths', path, method, 'responses', String(status), 'content', 'application/json', 'schema')}` });
    validators.set(key, validate);
  }
  return validate;
}

const problems: string[] = [];
let checked = 0;

/** Validates every answer against the document; problems are collected and asserted per test. */
const conformance: Middleware = {
  async onResponse({ request, response, schemaPath }) {
    const method = request.method.toLowerCase();
    const validate = validatorFor(method, schemaPath, response.status);
    if (typeof validate === 'string') {
      problems.push(validate);
      return;
    }
    const text = await response.clone().text();
    if (!text) return;
    const body: unknown = JSON.parse(text);
    checked++;
    if (!validate(body)) problems.push(`${method.toUpperCase()} ${schemaPath} ${response.status}: ${ajv.errorsText(validate.errors)} in ${text.slice(0, 300)}`);
  },
};

function client(baseUrl: string, auth: { cookie?: string; token?: string } = {}): PlanningClient {
  const c = createPlanningClient({ baseUrl, ...auth });
  c.use(conformance);
  return c;
}

/** The data of a success, failing the test with the error body otherwise. */
function must<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined) throw new Error(`${result.response.status}: ${JSON.stringify(result.error)}`);
  return result.data;
}

describe('typed client against the running service (all-in-one)', () => {
  let cluster: Cluster;
  let admin: PlanningClient;
  let agent: PlanningClient;
  let workspaceId: string;
  let projectId: string;
  let issueIds: string[];

  beforeAll(async () => {
    cluster = await startCluster('all-in-one');
    const anonymous = client(cluster.baseUrl);
    const login = await anonymous.POST('/api/auth/login', { body: { email: ADMIN_EMAIL, password: cluster.adminPassword } });
    expect(must(login).data.mode).toBe('local');
    const cookie = /service_session=[^;]+/.exec(login.response.headers.get('set-cookie') ?? '')![0];
    admin = client(cluster.baseUrl, { cookie });
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('client: a person plans — workspace, project, program, initiative, issues, search, bulk preview', async () => {
    const workspace = must(await admin.POST('/api/workspaces', { body: { name: `Client ${randomBytes(3).toString('hex')}`, planId: 'pro' } })).data;
    workspaceId = workspace.id;
    expect(workspace.planId).toBe('pro');
    projectId = must(await admin.POST('/api/projects', { body: { workspaceId, name: 'Typed' } })).data.id;
    const program = must(await admin.POST('/api/programs', { body: { workspaceId, name: 'Platform' } })).data;
    // The workspace may be named with the program's own: accepted; another is 400 naming workspaceId.
    const initiative = must(await admin.POST('/api/initiatives', { body: { programId: program.id, workspaceId, name: 'Launch' } })).data;
    expect(initiative.workspaceId).toBe(workspaceId);
    const mismatch = await admin.POST('/api/initiatives', { body: { programId: program.id, workspaceId: 'ws_someone_else', name: 'Elsewhere' } });
    expect(mismatch.response.status).toBe(400);
    expect(mismatch.error?.error).toMatchObject({ code: 'invalid-input', field: 'workspaceId' });

    issueIds = [];
    for (const title of ['Write the parser', 'Test the parser']) {
      const issue = must(
        await admin.POST('/api/issues', {
          body: { projectId, title, priority: 'high', agent: { instructions: { objective: `${title} well`, expectedOutput: 'A merged change', verification: ['pnpm test'] } } },
        }),
      ).data;
      issueIds.push(issue.id);
    }
    const found = must(await admin.GET('/api/issues', { params: { query: { workspaceId, status: ['ready'], includeDependencyGraph: true } } }));
    expect(found.data.issues.map((i) => i.id).sort()).toEqual([...issueIds].sort());
    const bulk = must(await admin.POST('/api/issues/bulk-update', { body: { issueIds, mode: 'preview', patch: { priority: 'urgent' } } })).data;
    expect(bulk.plan).toMatchObject({ requestedCount: 2, targetCount: 2 });
    expect(problems).toEqual([]);
  });

  it('client: an agent works — key, ready work, claim, heartbeat, status, task contract, release', async () => {
    const created = must(
      await admin.POST('/api/api-keys', {
        body: { workspaceId, agentId: 'typed-agent', planId: 'pro', scopes: ['issues:read', 'issues:write', 'agents:read', 'agents:execute', 'projects:read'] },
      }),
    ).data;
    agent = client(cluster.baseUrl, { token: created.token });
    const ready = must(await agent.GET('/api/agents/ready-work', { params: { query: { limit: 10 } } }));
    expect(ready.data.map((i) => i.id)).toEqual(expect.arrayContaining(issueIds));
    const issueId = issueIds[0]!;
    const claim = must(await agent.POST('/api/agents/claim', { body: { issueId }, params: { header: { 'idempotency-key': randomBytes(8).toString('hex') } } })).data;
    expect(claim.issue.status).toBe('in-progress');
    const fencingToken = claim.claim.fencingToken;
    must(await agent.POST('/api/agents/claims/{issueId}/heartbeat', { params: { path: { issueId } }, body: { fencingToken } }));
    must(await agent.POST('/api/agents/claims/{issueId}/status', { params: { path: { issueId } }, body: { message: 'Parsing works', fencingToken } }));
    const contract = must(
      await agent.PATCH('/api/issues/{id}/task-contract', { params: { path: { id: issueId } }, body: { agent: { instructions: { constraints: ['No new dependencies'] } }, fencingToken } }),
    ).data;
    expect(contract.taskContract.constraints).toEqual(['No new dependencies']);
    const again = await agent.POST('/api/agents/claim', { body: { issueId: issueIds[1]! } });
    expect(again.response.status).toBe(409);
    expect(again.error?.error).toMatchObject({ code: 'work-already-claimed', reason: 'agent-busy' });
    must(await agent.POST('/api/agents/claims/{issueId}/release', { params: { path: { issueId } } }));
    expect(problems).toEqual([]);
  });

  it('client: imports, exports and diagnostics; errors answer as documented', async () => {
    const rows = [{ workspaceId, projectId, title: 'Imported through the client' }];
    const preview = must(
      await admin.POST('/api/imports/preview', {
        params: { header: { 'idempotency-key': randomBytes(8).toString('hex') } },
        body: { plan: 'pro', format: 'json', payload: rows },
      }),
    ).data;
    expect(preview.status).toBe('ready');
    const committed = must(await admin.POST('/api/imports/commit', { params: { header: { 'idempotency-key': randomBytes(8).toString('hex') } }, body: { previewId: preview.id } })).data;
    expect(committed.summary.created).toBe(1);
    const exported = await admin.GET('/api/issues/export', { params: { query: { workspaceId, format: 'json' } } });
    expect(exported.response.status).toBe(200);
    must(await admin.GET('/api/issues/export/history', { params: { query: { workspaceId } } }));
    must(await admin.GET('/api/admin/diagnostics'));

    const anonymous = client(cluster.baseUrl);
    const denied = await anonymous.GET('/api/workspaces');
    expect(denied.response.status).toBe(401);
    expect(denied.response.headers.get('www-authenticate')).toContain('Bearer');
    const missing = await admin.GET('/api/issues/{id}', { params: { path: { id: 'iss_does_not_exist' } } });
    expect(missing.response.status).toBe(404);
    const badLimit = await admin.GET('/api/users', { params: { query: { limit: Number.POSITIVE_INFINITY } } });
    expect(badLimit.response.status).toBe(400);
    expect(badLimit.error?.error).toMatchObject({ code: 'invalid-input', field: 'limit' });
    const token = await agent.GET('/api/workspaces');
    expect(token.response.headers.get('ratelimit-policy')).toMatch(/^"burst";q=\d+;w=60$/);
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(25);
    // The check can fail: an answer unlike the document is refused, an undocumented status named.
    const workspaces = validatorFor('get', '/api/workspaces', 200) as ValidateFunction;
    expect(workspaces({ data: [{ id: 42 }], page: { nextCursor: null } })).toBe(false);
    expect(validatorFor('get', '/api/workspaces', 418)).toMatch(/does not list/);
  });
});
