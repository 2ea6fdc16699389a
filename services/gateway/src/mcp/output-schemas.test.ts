import { createHttpApp } from '@planning/runtime/http';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { gatewayPlugin } from '../app.js';
import type { GatewayDeps } from '../deps.js';
import { CATALOG, listedTools } from './catalog.js';
import { exactSchema, REFUSAL_SCHEMA, successOf, successSchemaOf } from './output-schemas.js';

/** Each tool's REST twin (docs/mcp.md): its structuredContent is that route's response body. */
const TWINS: Record<string, string> = {
  get_client_bootstrap: 'GET /api/agents/bootstrap 200',
  get_agent_preflight: 'GET /api/agents/preflight 200',
  get_workspace_customization: 'GET /api/workspaces/:id/customization 200',
  get_market_standards: 'GET /api/workspaces/:id/standards 200',
  get_launch_readiness: 'GET /api/workspaces/:id/launch-readiness 200',
  search_knowledgebase: 'GET /api/knowledgebase 200',
  list_issue_reminders: 'GET /api/issues/reminders 200',
  list_ready_work: 'GET /api/agents/ready-work 200',
  search_issues: 'GET /api/issues 200',
  create_issue: 'POST /api/issues 201',
  get_task_contract: 'GET /api/issues/:id/task-contract 200',
  update_task_contract: 'PATCH /api/issues/:id/task-contract 200',
  get_context_pack: 'GET /api/issues/:id/context-pack 200',
  claim_work: 'POST /api/agents/claim 200',
  post_status: 'POST /api/agents/claims/:issueId/status 201',
  cancel_work: 'POST /api/agents/claims/:issueId/release 200',
  update_issue_status: 'PATCH /api/issues/:id 200',
  update_issue: 'PATCH /api/issues/:id 200',
  add_comment: 'POST /api/issues/:id/comments 201',
  log_time: 'POST /api/issues/:id/time-entries 201',
  add_evidence: 'POST /api/issues/:id/evidence 201',
  request_approval: 'POST /api/issues/:id/approvals 201',
};

/** Deps whose every property is another such object and every call resolves: enough to register routes. */
function anyDeps(): GatewayDeps {
  const handler: ProxyHandler<() => unknown> = {
    get: (_target, key) => (key === 'then' ? undefined : key === Symbol.toPrimitive ? () => '' : proxy),
    apply: () => proxy,
  };
  const proxy: unknown = new Proxy(() => undefined, handler);
  return proxy as GatewayDeps;
}

/** Every subschema of a schema tree (properties, items, combinator branches), with its path. */
function subschemas(schema: Record<string, unknown>, path = '$', found: [string, Record<string, unknown>][] = []): [string, Record<string, unknown>][] {
  found.push([path, schema]);
  for (const [name, sub] of Object.entries((schema.properties ?? {}) as Record<string, Record<string, unknown>>)) subschemas(sub, `${path}.${name}`, found);
  if (schema.items) subschemas(schema.items as Record<string, unknown>, `${path}[]`, found);
  for (const key of ['anyOf', 'oneOf', 'allOf']) ((schema[key] ?? []) as Record<string, unknown>[]).forEach((sub, i) => subschemas(sub, `${path}.${key}[${i}]`, found));
  return found;
}

describe('mcp: output schemas', () => {
  it('mcp: every input and output schema compiles under ajv strict mode (JSON Schema 2020-12)', () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats.default(ajv);
    for (const tool of listedTools('full')) {
      expect(() => ajv.compile(tool.inputSchema), `${tool.name} input`).not.toThrow();
      expect(() => ajv.compile(tool.outputSchema), `${tool.name} output`).not.toThrow();
      expect(tool.outputSchema.type, tool.name).toBe('object');
    }
  });

  it('mcp: the tool list has no type arrays and no untyped ({}) schemas; every output object is closed', () => {
    for (const tool of listedTools('full')) {
      for (const [which, schema] of [['input', tool.inputSchema], ['output', tool.outputSchema]] as const) {
        for (const [path, sub] of subschemas(schema)) {
          const where = `${tool.name} ${which} ${path}`;
          if (Array.isArray(sub.type)) expect.fail(`${where}: a type array`);
          if (!('type' in sub || 'anyOf' in sub || 'enum' in sub)) expect.fail(`${where}: untyped`);
          // The root only says "an object"; its anyOf branches are the closed shapes.
          if (which === 'output' && path !== '$' && sub.type === 'object' && sub.additionalProperties !== false) expect.fail(`${where}: an open object`);
        }
      }
    }
  });

  it("mcp: each tool's success schema is its REST twin's response schema, made exact; the other branch is the refusal", async () => {
    const app = createHttpApp();
    const responses = new Map<string, unknown>();
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const response = (route.schema?.response ?? {}) as Record<string, unknown>;
      for (const method of methods) for (const [status, schema] of Object.entries(response)) responses.set(`${method} ${route.url} ${status}`, schema);
    });
    await gatewayPlugin(app, anyDeps());
    await app.ready();
    await app.close();
    for (const tool of CATALOG) {
      const twin = TWINS[tool.aliasOf ?? tool.name];
      expect(twin, `${tool.name} has a REST twin`).toBeDefined();
      const rest = responses.get(twin!);
      expect(rest, twin).toBeDefined();
      expect(successSchemaOf(tool.outputSchema), tool.name).toEqual(successOf(rest as object));
      expect((tool.outputSchema.anyOf as unknown[])[1]).toBe(REFUSAL_SCHEMA);
    }
  });

  it('mcp: exactSchema splits type arrays into anyOf, closes objects, and refuses what says nothing', () => {
    expect(exactSchema({ type: ['string', 'null'], format: 'date', description: 'd' })).toEqual({
      description: 'd',
      anyOf: [{ type: 'string', format: 'date' }, { type: 'null' }],
    });
    expect(exactSchema({ type: ['object', 'null'], required: ['a'], properties: { a: { type: 'integer' } } })).toEqual({
      anyOf: [{ type: 'object', required: ['a'], properties: { a: { type: 'integer' } }, additionalProperties: false }, { type: 'null' }],
    });
    expect(exactSchema({ type: ['string', 'null'], enum: ['a', null] })).toEqual({ anyOf: [{ type: 'string', enum: ['a'] }, { type: 'null', enum: [null] }] });
    expect(() => exactSchema({ type: 'object', properties: { x: {} } })).toThrow(/untyped/);
    expect(() => exactSchema({ type: 'object', additionalProperties: true, properties: {} })).toThrow(/open object/);
    expect(() => exactSchema({ type: 'object', required: ['b'], properties: { a: { type: 'string' } } })).toThrow(/required b/);
    expect(() => exactSchema({ $ref: 'ErrorBody#' })).toThrow(/\$ref/);
  });
});
