/* eslint-disable @typescript-eslint/no-explicit-any -- the document is JSON; the tests walk it. */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from './app.js';
import { inertDeps } from './document.js';

/**
 * The conventions of the OpenAPI document (openapi.ts), checked on the whole gateway: a route
 * added without an operationId, with a tag nobody declared, or with an inline copy of a shared
 * schema fails here before any client generator sees it. The routes never run: their
 * dependencies are inert.
 */

let app: FastifyInstance;
let doc: any;

beforeAll(async () => {
  app = await buildApp(inertDeps());
  const res = await app.inject({ method: 'GET', url: '/docs/json' });
  doc = res.json();
});

afterAll(async () => {
  await app.close();
});

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function operations(): Array<{ key: string; op: any }> {
  const out: Array<{ key: string; op: any }> = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) if (METHODS.includes(method)) out.push({ key: `${method.toUpperCase()} ${path}`, op });
  }
  return out;
}

/** Every `$ref` in `node`, and every object schema with `properties` that is not a reference. */
function walk(node: unknown, visit: (value: any, path: string) => void, path = ''): void {
  if (node === null || typeof node !== 'object') return;
  visit(node, path);
  for (const [k, v] of Object.entries(node)) walk(v, visit, `${path}/${k}`);
}

describe('openapi', () => {
  it('openapi: is OpenAPI 3.1 with servers, tags and the security schemes', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers?.length).toBeGreaterThan(0);
    expect(Object.keys(doc.components.securitySchemes)).toEqual(expect.arrayContaining(['sessionCookie', 'bearerToken', 'apiKeyHeader']));
    expect(doc.components.securitySchemes.sessionCookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'service_session' });
    expect(doc.components.securitySchemes.apiKeyHeader).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-api-key' });
  });

  it('openapi: every operation has a unique camelCase operationId, a summary and a declared tag', () => {
    const declared = new Set(doc.tags.map((t: { name: string }) => t.name));
    const problems: string[] = [];
    const seen = new Map<string, string>();
    for (const { key, op } of operations()) {
      if (typeof op.operationId !== 'string' || !/^[a-z][A-Za-z0-9]*$/.test(op.operationId)) problems.push(`${key}: operationId '${op.operationId}'`);
      else if (seen.has(op.operationId)) problems.push(`${key}: operationId '${op.operationId}' also on ${seen.get(op.operationId)}`);
      else seen.set(op.operationId, key);
      if (!op.summary) problems.push(`${key}: no summary`);
      if (!Array.isArray(op.tags) || op.tags.length === 0 || op.tags.some((t: string) => !declared.has(t))) problems.push(`${key}: tags ${JSON.stringify(op.tags)}`);
    }
    expect(problems).toEqual([]);
    expect(seen.size).toBeGreaterThan(70);
  });

  it('openapi: every operation documents security, 500 and 503, and its error responses name their codes', () => {
    const problems: string[] = [];
    for (const { key, op } of operations()) {
      if (!Array.isArray(op.security)) problems.push(`${key}: no security`);
      for (const status of ['500', '503']) if (!op.responses[status]) problems.push(`${key}: no ${status}`);
      const authenticated = op.security?.some((s: object) => Object.keys(s).length > 0);
      if (authenticated && !op.responses['401']) problems.push(`${key}: no 401`);
      if ((op.parameters?.length > 0 || op.requestBody) && !op.responses['400'] && !op.responses['405']) problems.push(`${key}: inputs but no 400`);
      for (const [status, response] of Object.entries<any>(op.responses)) {
        if (!/^[45]/.test(status)) continue;
        const schema = response.content?.['application/json']?.schema;
        const refs: string[] = schema?.$ref ? [schema.$ref] : (schema?.oneOf ?? []).map((s: { $ref: string }) => s.$ref);
        // MCP answers some failures in JSON-RPC's own envelope, which the route documents itself.
        if (refs.length === 0 && key.endsWith('/api/mcp')) continue;
        if (refs.length === 0 || refs.some((r) => !/^#\/components\/schemas\/[A-Za-z]+Error$/.test(r))) problems.push(`${key} ${status}: codes not named (${JSON.stringify(schema)?.slice(0, 80)})`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('openapi: token operations document the RateLimit headers, 429s Retry-After and 401s WWW-Authenticate', () => {
    const problems: string[] = [];
    for (const { key, op } of operations()) {
      const tokens = JSON.stringify(op.security ?? []).includes('bearerToken');
      for (const [status, response] of Object.entries<any>(op.responses)) {
        const headers = Object.keys(response.headers ?? {});
        if (tokens && /^[24]/.test(status) && status !== '401' && !headers.includes('RateLimit')) problems.push(`${key} ${status}: no RateLimit`);
        if (status === '429' && !headers.includes('Retry-After')) problems.push(`${key} 429: no Retry-After`);
        if (status === '401' && !headers.includes('WWW-Authenticate')) problems.push(`${key} 401: no WWW-Authenticate`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('openapi: a 401 carries the WWW-Authenticate challenge the document promises', async () => {
    const anonymous = await app.inject({ method: 'GET', url: '/api/users' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="planning-service"');
    const malformed = await app.inject({ method: 'GET', url: '/api/projects', headers: { authorization: 'Basic abc' } });
    expect(malformed.statusCode).toBe(401);
    expect(malformed.headers['www-authenticate']).toBe('Bearer realm="planning-service", error="invalid_token"');
  });

  it('openapi: a token route names the scopes it needs in its security requirement', () => {
    const claim = doc.paths['/api/agents/claim'].post;
    expect(claim.security).toEqual(expect.arrayContaining([{ bearerToken: ['issues:write', 'agents:execute'] }]));
    expect(doc.paths['/api/auth/login'].post.security).toEqual([{}]);
  });

  it('openapi: no component schema is copied inline anywhere else in the document', () => {
    const shape = (schema: any) => {
      const { description: _d, title: _t, ...rest } = schema;
      return JSON.stringify(rest);
    };
    const named = new Map<string, string>();
    for (const [name, schema] of Object.entries<any>(doc.components.schemas)) if (schema.properties) named.set(shape(schema), name);
    const copies: string[] = [];
    walk(doc.paths, (value, path) => {
      if (value.properties && named.has(shape(value))) copies.push(`${path}: a copy of ${named.get(shape(value))}`);
    });
    walk(doc.components.schemas, (value, path) => {
      const name = value.properties ? named.get(shape(value)) : undefined;
      if (name && path !== `/${name}`) copies.push(`components${path}: a copy of ${name}`);
    });
    expect(copies).toEqual([]);
  });

  it('openapi: no object schema with more than four properties appears twice (make it a component)', () => {
    const seen = new Map<string, string[]>();
    walk(doc, (value, path) => {
      if (value.type === 'object' && value.properties && Object.keys(value.properties).length > 4) {
        const key = JSON.stringify(value);
        seen.set(key, [...(seen.get(key) ?? []), path]);
      }
    });
    const repeated = [...seen.values()].filter((paths) => paths.length > 1).map((paths) => paths.slice(0, 3).join(' = '));
    expect(repeated).toEqual([]);
  });

  it('openapi: the main flows show a request example (Spectral checks each against its schema in CI)', () => {
    const MAIN_FLOWS = [
      'login',
      'createWorkspace',
      'createApiKey',
      'createProject',
      'updateProject',
      'createMilestone',
      'createProgram',
      'createInitiative',
      'createIssue',
      'updateIssue',
      'addComment',
      'logTime',
      'addEvidence',
      'claimWork',
      'renewClaim',
      'postClaimStatus',
      'releaseClaim',
    ];
    const withExample = new Set<string>();
    for (const { op } of operations()) {
      const media = op.requestBody?.content?.['application/json'];
      if (media && (media.example !== undefined || media.examples !== undefined || media.schema?.examples !== undefined)) withExample.add(op.operationId);
    }
    expect(MAIN_FLOWS.filter((id) => !withExample.has(id))).toEqual([]);
  });

  it('openapi: the main flows show a success answer the service gave (Spectral checks each against its schema in CI)', () => {
    const MAIN_FLOWS = [
      'login',
      'createWorkspace',
      'createApiKey',
      'createProject',
      'createIssue',
      'updateIssue',
      'searchIssues',
      'getIssue',
      'addComment',
      'logTime',
      'addEvidence',
      'listReadyWork',
      'claimWork',
      'renewClaim',
      'postClaimStatus',
      'releaseClaim',
    ];
    const withExample = new Set<string>();
    for (const { op } of operations()) {
      for (const [status, response] of Object.entries((op.responses ?? {}) as Record<string, { content?: Record<string, { example?: unknown }> }>)) {
        if (status.startsWith('2') && response.content?.['application/json']?.example !== undefined) withExample.add(op.operationId);
      }
    }
    expect(MAIN_FLOWS.filter((id) => !withExample.has(id))).toEqual([]);
  });

  it('openapi: every reference resolves', () => {
    const broken: string[] = [];
    walk(doc, (value, path) => {
      if (typeof value.$ref !== 'string') return;
      const target = value.$ref
        .replace(/^#\//, '')
        .split('/')
        .reduce((node: any, part: string) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
      if (target === undefined) broken.push(`${path}: ${value.$ref}`);
    });
    expect(broken).toEqual([]);
  });
});
