/**
 * JSON issue imports (API document endpoints 17–18, DECISIONS §8; docs/imports.md): the import
 * schema, previews and commits. Every rule lives in the imports-exports service; these routes
 * translate HTTP to gRPC and back. Imports are an admin action: a session of a workspace admin or
 * owner (or a system admin), or a token with the `admin` scope for its own workspace.
 */
import { invalidInput, ServiceError } from '@planning/errors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { ERROR_BODY_ID, ok, errors } from '../openapi.js';
import { importCommitJson, importCommitSchema, importPreviewJson, importPreviewSchema } from './imports-json.js';

/** Previews of 10,000 rows and commits writing them take longer than an ordinary call's deadline. */
const PREVIEW_DEADLINE_MS = 120_000;
const COMMIT_DEADLINE_MS = 600_000;

/** DECISIONS §8: a preview has at most 10,000 rows (the imports service checks envelopes). */
const MAX_IMPORT_ROWS = 10_000;

/** DECISIONS §8: a preview body is at most 10 MB. */
const PREVIEW_BODY_LIMIT = 10 * 1_048_576;

const str = { type: 'string' } as const;

const conflictResponse = {
  description: 'work-already-claimed (reason `idempotency-in-flight`): a request with this key, or a commit of this preview, is still running; retry',
  $ref: `${ERROR_BODY_ID}#`,
} as const;
const tooLargeResponse = { description: 'payload-too-large: more than 10,000 rows or a body over 10 MB', $ref: `${ERROR_BODY_ID}#` } as const;

const ADMIN = { access: { auth: 'session-or-token', scope: 'admin' } } as const;

function idempotencyKeyOf(request: FastifyRequest): string {
  const raw = request.headers['idempotency-key'];
  if (Array.isArray(raw)) throw invalidInput('idempotency-key', "Send the 'idempotency-key' header once");
  if (raw === undefined || raw === '') throw invalidInput('idempotency-key', "The 'idempotency-key' header is required");
  return raw;
}

/** How deeply a payload may nest arrays and objects (as the imports service checks it too; rows need about 4). */
export const MAX_PAYLOAD_DEPTH = 32;

/**
 * Whether `value` nests arrays and objects deeper than `max` levels (the value itself is level 1).
 * Iterative: a payload nested thousands deep must be refused before JSON.stringify recurses into it.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const { value: v, depth } = stack.pop() as { value: unknown; depth: number };
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
    for (const child of children) if (child !== null && typeof child === 'object') stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}

/** The row schema stays JSON over gRPC: it is a JSON Schema document. */
function parsed(json: string): Record<string, unknown> {
  try {
    return JSON.parse(json) as Record<string, unknown>;
  } catch {
    throw new ServiceError('internal', 'Internal error');
  }
}

interface PreviewBody {
  plan: string;
  format: string;
  payload: unknown;
  workspaceId?: string;
}

export async function importRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const imports = deps.rpc.imports;
  const keyHeader = {
    type: 'object',
    properties: { 'idempotency-key': { type: 'string', minLength: 1, maxLength: 255 } },
  } as const;

  app.get(
    '/api/imports/schema',
    {
      schema: {
        operationId: 'getImportSchema',
        summary: 'The import schema',
        description: 'The current `schemaId` (`service.issue-import`), `schemaVersion` (`YYYY-MM-DD.issue-import.v1`) and the JSON Schema of one row.',
        response: {
          200: ok({
            type: 'object',
            required: ['schemaId', 'schemaVersion', 'rowSchema'],
            properties: { schemaId: str, schemaVersion: str, rowSchema: { type: 'object', additionalProperties: true } },
          }),
        },
      },
      config: ADMIN,
    },
    async (request) => {
      const res = await imports.getImportSchema({}, { principal: request.principal });
      return { data: { schemaId: res.schemaId, schemaVersion: res.schemaVersion, rowSchema: parsed(res.rowSchemaJson) } };
    },
  );

  app.post<{ Body: PreviewBody }>(
    '/api/imports/preview',
    {
      bodyLimit: PREVIEW_BODY_LIMIT,
      schema: {
        operationId: 'previewImport',
        summary: 'Preview a JSON issue import (dry run)',
        description:
          'Validates the payload and stores a preview for 24 h; no task changes. Header `idempotency-key` is required: the same key and body answer the stored preview, the same key with another body is a 400. Accepts the current envelope `{ schemaId: "service.issue-import", schemaVersion, issues }`, an export envelope (`compatible`) and a bare array of rows (`legacy`); a later schema version is `unsupported` and blocks the preview before any row is read. At most 10,000 rows and 10 MB (413 `payload-too-large`).',
        headers: keyHeader,
        body: {
          type: 'object',
          required: ['plan', 'format', 'payload'],
          additionalProperties: false,
          properties: {
            plan: { type: 'string', minLength: 1, maxLength: 32, description: "The workspace's plan id." },
            format: { type: 'string', enum: ['json'] },
            payload: {
              anyOf: [{ type: 'object' }, { type: 'array', maxItems: MAX_IMPORT_ROWS, items: { description: 'A row: `GET /api/imports/schema` has its JSON Schema.' } }],
              description: 'An import envelope, an export envelope or a bare array of rows.',
            },
            workspaceId: { type: 'string', minLength: 1, maxLength: 64, description: 'The target workspace; otherwise every row must name the same one.' },
          },
        },
        response: { ...errors('quota-exceeded'), 200: ok(importPreviewSchema), 409: conflictResponse, 413: tooLargeResponse },
      },
      config: ADMIN,
      // A bare array over the row limit is 413 (as the service answers for an envelope), not 400.
      attachValidation: true,
    },
    async (request) => {
      const invalid = request.validationError;
      if (invalid) {
        const first = invalid.validation[0];
        if (first?.keyword === 'maxItems' && first.instancePath === '/payload') {
          throw new ServiceError('payload-too-large', `An import has at most ${MAX_IMPORT_ROWS} rows`, { field: 'payload' });
        }
        throw invalid;
      }
      const key = idempotencyKeyOf(request);
      const body = request.body;
      if (nestedDeeperThan(body.payload, MAX_PAYLOAD_DEPTH)) {
        throw invalidInput('payload', `'payload' nests arrays and objects more than ${MAX_PAYLOAD_DEPTH} levels deep`);
      }
      const res = await imports.previewImport(
        {
          idempotencyKey: key,
          plan: body.plan,
          format: body.format,
          payloadJson: JSON.stringify(body.payload),
          ...(body.workspaceId !== undefined ? { workspaceId: body.workspaceId } : {}),
        },
        { principal: request.principal, deadlineMs: PREVIEW_DEADLINE_MS },
      );
      if (!res.preview) throw new ServiceError('internal', 'Internal error');
      return { data: importPreviewJson(res.preview) };
    },
  );

  app.post<{ Body: { previewId: string } }>(
    '/api/imports/commit',
    {
      schema: {
        operationId: 'commitImport',
        summary: 'Commit an import preview',
        description:
          "Writes an unexpired, unblocked preview's valid rows in chunks with checkpoints. Header `idempotency-key` is required and must differ from the preview's. A preview is committed once: retries (any key) answer the committed operation; a commit interrupted by a crash is resumed by retrying it, and no row is written twice. Meters one `imports` use.",
        headers: keyHeader,
        body: {
          type: 'object',
          required: ['previewId'],
          additionalProperties: false,
          properties: { previewId: { type: 'string', minLength: 1, maxLength: 64 } },
        },
        response: { ...errors('quota-exceeded'), 200: ok(importCommitSchema), 409: conflictResponse },
      },
      config: ADMIN,
    },
    async (request) => {
      const key = idempotencyKeyOf(request);
      const res = await imports.commitImport(
        { idempotencyKey: key, previewId: request.body.previewId },
        { principal: request.principal, deadlineMs: COMMIT_DEADLINE_MS },
      );
      if (!res.commit) throw new ServiceError('internal', 'Internal error');
      return { data: importCommitJson(res.commit) };
    },
  );
}
