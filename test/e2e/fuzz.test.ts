/* eslint-disable @typescript-eslint/no-explicit-any -- answers are whatever the server sent; the test checks their shape. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createWorkspace } from '../support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { hostileRequests, operationsOf, rawRequest, type HostileRequest } from '../support/hostile.js';
import { eventually, login, request } from '../support/http.js';

/**
 * Every route of the served OpenAPI document × hostile values (numbers that are not finite, huge,
 * negative or fractional; long, empty, control-character, traversal and malformed-encoding strings
 * in paths and queries; wrong types, unknown fields, malformed, huge and deeply nested JSON in
 * bodies; huge headers), plus what the HTTP parser refuses: each answer is a 4xx (or a success)
 * in the documented envelope — never a 5xx, never a framework's own body. Beyond the envelope the
 * answers keep the document's word: every error status answered is one the operation documents,
 * with a code the document lists for that status, every `invalid-input` names its `field`, and a number outside its documented bounds (or not
 * finite) is never accepted. In distributed mode a backend that cannot be reached answers 503
 * with a request id the log has, naming the service and never its gRPC method.
 */

/** The documented error codes (the served document's ErrorBody). */
let CODES = new Set<string>();

/** Why an answer is not acceptable, or undefined. */
function wrong(res: { status: number; body: any; headers?: Headers }, path: string, job?: { op: any; outOfBounds?: boolean }): string | undefined {
  if (job?.outOfBounds && res.status < 400) return `accepted a number outside its documented bounds (${res.status})`;
  if (res.status >= 500) return `answered ${res.status}`;
  if (res.status < 400) return undefined;
  const body = typeof res.body === 'string' ? safeJson(res.body) : res.body;
  if (path.startsWith('/api/mcp') && body?.jsonrpc === '2.0' && typeof body.error?.code === 'number') return undefined;
  if (!body || typeof body !== 'object' || !body.error || typeof body.error.message !== 'string' || !CODES.has(body.error.code)) {
    return `answered ${res.status} outside the envelope: ${JSON.stringify(body).slice(0, 160)}`;
  }
  if ('statusCode' in body) return `answered a framework body: ${JSON.stringify(body).slice(0, 160)}`;
  // The document and the server do not drift: the status is one the operation documents.
  if (job && !job.op.responses?.[String(res.status)]) return `answered ${res.status} ${body.error.code}, which the operation does not document`;
  if (job && !documentedCodes(job.op, res.status).includes(body.error.code)) {
    return `answered ${res.status} ${body.error.code}; the operation documents ${documentedCodes(job.op, res.status).join(', ')} for it`;
  }
  if (body.error.code === 'invalid-input' && (typeof body.error.field !== 'string' || body.error.field === '')) return `answered invalid-input without naming a field: ${body.error.message}`;
  return undefined;
}

/** The error codes an operation documents for `status` (its response names one per-code schema, `InvalidInputError`, or `oneOf` them). */
function documentedCodes(op: any, status: number): string[] {
  const schema = op.responses?.[String(status)]?.content?.['application/json']?.schema;
  const refs: string[] = schema?.$ref ? [schema.$ref] : (schema?.oneOf ?? []).map((s: { $ref?: string }) => s.$ref ?? '');
  return refs.map((ref) =>
    ref
      .replace(/^#\/components\/schemas\//, '')
      .replace(/Error$/, '')
      .replace(/[A-Z]/g, (c, i: number) => `${i === 0 ? '' : '-'}${c.toLowerCase()}`),
  );
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

describe.each<Mode>(['all-in-one', 'distributed'])('fuzz (%s)', (mode) => {
  let cluster: Cluster;
  let cookie: string;
  let token: string;
  let doc: any;

  beforeAll(async () => {
    cluster = await startCluster(mode);
    cookie = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    const workspace = await createWorkspace(cluster.baseUrl, cookie, `Fuzz ${mode}`);
    token = (await createKey(cluster.baseUrl, cookie, workspace.id, 'enterprise', ['issues:read', 'issues:write', 'projects:read', 'projects:write', 'agents:read', 'agents:execute', 'billing:read', 'admin'])).token;
    doc = (await request(cluster.baseUrl, 'GET', '/docs/json')).body;
    CODES = new Set(doc.components.schemas.ErrorBody.properties.error.properties.code.enum);
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('fuzz: every route × hostile values answers 4xx in the envelope, never 5xx', async () => {
    const jobs: Array<HostileRequest & { credential: 'cookie' | 'token' | 'none'; op: any }> = [];
    for (const operation of operationsOf(doc)) {
      // Session routes get the session (no rate limit masks validation); token-only routes the token.
      const security = JSON.stringify(operation.op.security ?? []);
      const credential = operation.path === '/api/auth/logout' ? 'none' : security.includes('sessionCookie') ? 'cookie' : security.includes('bearerToken') ? 'token' : 'none';
      for (const r of hostileRequests(operation, doc)) jobs.push({ ...r, credential, op: operation.op });
    }
    const failures: string[] = [];
    let sent = 0;
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (next < jobs.length) {
          const job = jobs[next++]!;
          const headers: Record<string, string> = { ...job.headers };
          if (job.credential === 'cookie') headers.cookie = cookie;
          if (job.credential === 'token') headers.authorization = `Bearer ${token}`;
          if (job.path.startsWith('/api/mcp')) headers.accept = 'application/json, text/event-stream';
          let res: { status: number; body: any };
          try {
            const answer = await fetch(`${cluster.baseUrl}${job.path}`, { method: job.method, headers, body: job.body });
            res = { status: answer.status, body: await answer.text() };
          } catch (err) {
            failures.push(`${job.method} ${job.path.slice(0, 80)} (${job.what}): no answer (${String(err)})`);
            continue;
          }
          sent++;
          const problem = wrong(res, job.path, job);
          if (problem) failures.push(`${job.method} ${job.path.slice(0, 80)} (${job.what}): ${problem}`);
        }
      }),
    );
    console.log(`fuzz (${mode}): ${sent} requests over ${operationsOf(doc).length} operations in ${Date.now() - started} ms, ${failures.length} failures`);
    expect(failures.slice(0, 40)).toEqual([]);
    expect(sent).toBeGreaterThan(2_500);
    // The bounds check had numbers to refuse (non-finite and over-maximum limits at least).
    expect(jobs.filter((j) => j.outOfBounds).length).toBeGreaterThan(200);
  }, 600_000);

  it('fuzz: what the HTTP parser and router refuse answers in the envelope too', async () => {
    const base = cluster.baseUrl;
    const line = (target: string, extra = '') => `GET ${target} HTTP/1.1\r\nhost: x\r\ncookie: ${cookie}\r\nconnection: close\r\n${extra}\r\n`;
    const cases: Array<[string, string, number]> = [
      ['a malformed percent-encoding in the path', line('/api/issues/%E0%A4%A'), 400],
      ['a path over 8 KiB', line(`/api/issues/${'a'.repeat(9_000)}`), 414],
      ['a 1 MB query string', line(`/api/issues?q=${'a'.repeat(1_000_000)}`), 414],
      ['headers over 16 KiB', line('/api/issues', `x-big: ${'a'.repeat(20_000)}\r\n`), 431],
      ['a request that is not HTTP', 'HELLO\r\n\r\n', 400],
      ['an invalid content-length', `POST /api/workspaces HTTP/1.1\r\nhost: x\r\ncontent-length: abc\r\nconnection: close\r\n\r\n`, 400],
    ];
    const failures: string[] = [];
    for (const [what, bytes, status] of cases) {
      const res = await rawRequest(base, bytes);
      if (res.status !== status) failures.push(`${what}: ${res.status} (expected ${status})`);
      const problem = wrong(res, '/');
      if (problem) failures.push(`${what}: ${problem}`);
    }
    expect(failures).toEqual([]);
  });

  it.runIf(mode === 'distributed')('fuzz: a backend that cannot be reached is 503 with a request id, naming the service and not its gRPC method', async () => {
    const audit = cluster.process('audit');
    await audit.stop();
    try {
      const res = await request(cluster.baseUrl, 'GET', '/api/admin/audit-events?limit=5', { cookie });
      expect(res.status).toBe(503);
      expect(res.body.error).toEqual({ code: 'unavailable', message: expect.stringContaining('audit service'), requestId: expect.stringMatching(/^req_[0-9a-f]{16}$/) });
      // Never the internal method (`planning.audit.v1.AuditService/ListEvents`), an address or a stack.
      expect(res.body.error.message).not.toMatch(/planning\.|\/[A-Z][A-Za-z]+\b|127\.0\.0\.1|:\d{2,5}\b| at /);
      // The gateway's log line with the same id has the cause (the logger writes asynchronously).
      await eventually(
        async () => cluster.process('gateway').output.some((line) => line.includes(`"reqId":"${res.body.error.requestId}"`) && line.includes('"level":"error"')),
        10_000,
        'the error log line of the request',
      );
    } finally {
      await audit.start();
    }
  }, 120_000);
});
