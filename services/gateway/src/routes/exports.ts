import { Readable } from 'node:stream';
import { ServiceError } from '@planning/errors';
import { EXPORT_FORMATS, PLAN_IDS } from '@planning/plans';
import type { RpcCallOptions } from '@planning/rpc';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { component, pageInfo, errors } from '../openapi.js';
import { exportEntryJson, exportEntrySchema } from './exports-json.js';
import { commaList, commaListOf, cursorSchema, idSchema, limitSchema, taskFilterProperties } from './planning-input.js';

const slugSchema = { type: 'string', minLength: 1, maxLength: 100, pattern: '^[a-z0-9][a-z0-9-]*$' } as const;

const exportQuery = {
  type: 'object',
  required: ['format'],
  additionalProperties: false,
  properties: {
    plan: { type: 'string', enum: [...PLAN_IDS], description: "The workspace's plan (400 when it names another plan); optional." },
    format: { type: 'string', enum: [...EXPORT_FORMATS], description: 'Allowed formats depend on the plan (403 `not-entitled` otherwise).' },
    workspaceSlug: slugSchema,
    workspaceId: idSchema,
    ...taskFilterProperties,
    labels: { ...commaListOf('labels'), description: 'Alias of `label`.' },
  },
} as const;

interface ExportQuery {
  plan?: string;
  format: string;
  workspaceSlug?: string;
  workspaceId?: string;
  projectId?: string;
  milestoneId?: string;
  initiativeId?: string;
  parentId?: string;
  status?: string[];
  priority?: string[];
  label?: string[];
  labels?: string[];
  assignedAgentId?: string;
  dependencyState?: string;
  q?: string;
  sort?: string;
  direction?: string;
}

const historyQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { workspaceSlug: slugSchema, workspaceId: idSchema, limit: limitSchema, cursor: cursorSchema },
} as const;

const exportIssueSchema = component('ExportedIssue', {
  type: 'object',
  required: ['id', 'title', 'status'],
  additionalProperties: true,
  properties: { id: { type: 'string' }, title: { type: 'string' }, status: { type: 'string' } },
});

/** The JSON artifact, for the OpenAPI document (the body is sent as built, not re-serialized). */
const jsonArtifactSchema = component('ExportArtifact', {
  type: 'object',
  required: ['schemaId', 'schemaVersion', 'exportedAt', 'workspace', 'issues'],
  properties: {
    schemaId: { type: 'string', enum: ['service.issue-export'] },
    schemaVersion: { type: 'string' },
    kind: { type: 'string', enum: ['backup'], description: 'Present on a backup.' },
    exportedAt: { type: 'string', format: 'date-time' },
    workspace: { type: 'object', required: ['slug'], properties: { slug: { type: 'string' } } },
    issueCount: { type: 'integer' },
    issues: { type: 'array', items: exportIssueSchema },
  },
});

const historyResponse = {
  description: 'Unexpired export history entries, newest first',
  type: 'object',
  required: ['data', 'page'],
  properties: {
    data: { type: 'object', required: ['entries'], properties: { entries: { type: 'array', items: exportEntrySchema } } },
    page: pageInfo,
  },
} as const;

/**
 * How long the gateway waits for CreateExport: longer than the service's own export deadline may
 * be set (EXPORT_DEADLINE_MS, at most 600 s), so the service always stops an export, unrecorded
 * and refunded, and answers before the gateway gives up on it (docs/exports.md).
 */
export const EXPORT_CALL_DEADLINE_MS = 630_000;

/**
 * The artifact's chunks as the response streams them: the first from CreateExport's answer, later
 * ones fetched one at a time. When the stream ends early (the client went away, a chunk failed)
 * the unread chunks are released at once rather than waiting out their 10 minutes.
 */
export async function* artifactChunks(
  exports: Pick<GatewayDeps['rpc']['exports'], 'readExportArtifact' | 'releaseExportArtifact'>,
  artifact: { exportId: string; firstChunk: Uint8Array; chunkCount: number },
  options: RpcCallOptions,
): AsyncGenerator<Buffer> {
  let complete = artifact.chunkCount <= 1;
  try {
    yield Buffer.from(artifact.firstChunk);
    for (let index = 1; index < artifact.chunkCount; index++) {
      const next = await exports.readExportArtifact({ exportId: artifact.exportId, index }, options);
      yield Buffer.from(next.chunk);
    }
    complete = true;
  } finally {
    if (!complete) await exports.releaseExportArtifact({ exportId: artifact.exportId }, options).catch(() => undefined);
  }
}

/** Issue exports (API document endpoints 19–20; docs/exports.md). */
export async function exportRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const exports = deps.rpc.exports;

  app.get<{ Querystring: ExportQuery }>(
    '/api/issues/export',
    {
      // A HEAD would build, meter and record an export only to drop its body.
      exposeHeadRoute: false,
      schema: {
        operationId: 'exportIssues',
        summary: 'Export issues (the artifact, at top level)',
        description:
          "Name the workspace by `workspaceSlug` or `workspaceId` (both: they must agree). `format` by plan: beginner json; hobbyist json, csv; pro json, csv, markdown; enterprise also backup (403 `not-entitled` otherwise). The filters of GET /api/issues narrow the issues (a backup takes none). Each export counts against the monthly `exports` quota (403 `quota-exceeded`) and writes a redacted history entry. Workspace admins and owners, system administrators, or a token with scope `admin`.",
        querystring: exportQuery,
        produces: ['application/json', 'text/csv', 'text/markdown'],
        response: { ...errors('not-entitled', 'quota-exceeded', 'payload-too-large', 'rate-limited'),
          200: {
            description: 'The artifact: JSON (`service.issue-export`), CSV (RFC 4180, header row), Markdown (grouped by status) or a backup (JSON)',
            content: {
              'application/json': { schema: jsonArtifactSchema },
              'text/csv': { schema: { type: 'string' } },
              'text/markdown': { schema: { type: 'string' } },
            },
          },
        },
      },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request, reply) => {
      const q = request.query;
      const options = { principal: request.principal };
      // A client that disconnects before the artifact is ready cancels the export: the service
      // then neither records nor counts it.
      const cancel = new AbortController();
      const onClose = (): void => {
        if (!reply.raw.writableEnded) cancel.abort();
      };
      reply.raw.once('close', onClose);
      const result = await exports.createExport(
        {
          workspaceId: q.workspaceId,
          workspaceSlug: q.workspaceSlug,
          plan: q.plan,
          format: q.format,
          filters: {
            projectId: q.projectId,
            milestoneId: q.milestoneId,
            initiativeId: q.initiativeId,
            parentId: q.parentId,
            status: commaList(q.status),
            priority: commaList(q.priority),
            labels: [...commaList(q.label), ...commaList(q.labels)],
            assignedAgentId: q.assignedAgentId,
            dependencyState: q.dependencyState,
            q: q.q,
            sort: q.sort,
            direction: q.direction,
          },
        },
        { ...options, deadlineMs: EXPORT_CALL_DEADLINE_MS, signal: cancel.signal },
      ).finally(() => reply.raw.off('close', onClose));
      const entry = result.entry;
      if (!entry) throw new ServiceError('internal', 'Internal error');
      void reply
        .header('content-type', result.contentType)
        .header('content-disposition', `attachment; filename="${result.fileName.replace(/[^A-Za-z0-9._-]/g, '_')}"`)
        .header('cache-control', 'no-store')
        .header('x-export-id', entry.id)
        .header('x-export-sha256', entry.sha256)
        .header('content-length', String(entry.bytes));
      if (result.chunkCount <= 1) return reply.send(Buffer.from(result.firstChunk));
      // A large artifact: its later chunks are fetched one at a time while the response streams.
      return reply.send(Readable.from(artifactChunks(exports, { exportId: entry.id, firstChunk: result.firstChunk, chunkCount: result.chunkCount }, options)));
    },
  );

  app.get<{ Querystring: { workspaceSlug?: string; workspaceId?: string; limit?: number; cursor?: string } }>(
    '/api/issues/export/history',
    {
      schema: {
        operationId: 'listExportHistory',
        summary: 'Export history (redacted, with retention metadata)',
        description:
          'Entries of exports made in the last `retentionDays` days, newest first: format, schema version, redacted filters (ids, labels as short hashes; search text never kept), SHA-256, size, issue count and the audit event ids. Pages by `limit` and `cursor`.',
        querystring: historyQuery,
        response: { 200: historyResponse },
      },
      config: { access: { auth: 'session-or-token', scope: 'admin' } },
    },
    async (request) => {
      const q = request.query;
      const result = await exports.listExportHistory(
        { workspaceId: q.workspaceId, workspaceSlug: q.workspaceSlug, limit: q.limit, cursor: q.cursor },
        { principal: request.principal },
      );
      return { data: { entries: result.entries.map(exportEntryJson) }, page: { nextCursor: result.nextCursor ?? null } };
    },
  );
}
