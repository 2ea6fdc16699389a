/** The gRPC handlers of planning.exports.v1.ExportService: decode → ExportsCore → encode. */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { ExportService, type ExportEntrySchema, type ExportFilters } from '@planning/proto/planning/exports/v1/exports_pb';
import type { ServiceImplementation } from '@planning/rpc';
import type { ExportFilterValues } from '../exports/filters.js';
import type { ExportsCore } from '../exports/exports-core.js';
import type { ExportHistoryRecord } from '../store/export-history.js';

export { ExportService };

export function toEntryMessage(e: ExportHistoryRecord): MessageInitShape<typeof ExportEntrySchema> {
  return {
    id: e._id,
    workspaceId: e.workspaceId,
    format: e.format,
    redacted: e.redacted,
    retentionDays: e.retentionDays,
    schemaVersion: e.schemaVersion,
    createdAt: e.createdAt.toISOString(),
    expiresAt: e.expiresAt.toISOString(),
    filters: e.filters.map((f) => ({ name: f.name, values: f.values })),
    sha256: e.sha256,
    bytes: BigInt(e.bytes),
    issueCount: e.issueCount,
    auditEventIds: e.auditEventIds,
  };
}

export function filterValues(f: ExportFilters | undefined): ExportFilterValues {
  const values: ExportFilterValues = { status: [...(f?.status ?? [])], priority: [...(f?.priority ?? [])], labels: [...(f?.labels ?? [])] };
  const optional = ['projectId', 'milestoneId', 'initiativeId', 'parentId', 'assignedAgentId', 'dependencyState', 'q', 'sort', 'direction'] as const;
  for (const name of optional) {
    const value = f?.[name];
    if (value !== undefined && value !== '') values[name] = value;
  }
  return values;
}

export function createExportService(core: ExportsCore): ServiceImplementation<typeof ExportService> {
  return {
    async createExport(request, ctx) {
      const result = await core.create(ctx, {
        ...(request.workspaceId ? { workspaceId: request.workspaceId } : {}),
        ...(request.workspaceSlug ? { workspaceSlug: request.workspaceSlug } : {}),
        ...(request.plan !== undefined ? { plan: request.plan } : {}),
        format: request.format,
        filters: filterValues(request.filters),
      });
      return {
        entry: toEntryMessage(result.entry),
        contentType: result.artifact.contentType,
        fileName: result.fileName,
        firstChunk: result.chunks[0],
        chunkCount: result.chunks.length,
      };
    },

    async readExportArtifact(request, ctx) {
      return { chunk: await core.readChunk(ctx.principal, request.exportId, request.index) };
    },

    async releaseExportArtifact(request, ctx) {
      await core.release(ctx.principal, request.exportId);
      return {};
    },

    async listExportHistory(request, ctx) {
      const page = await core.history(ctx, {
        ...(request.workspaceId ? { workspaceId: request.workspaceId } : {}),
        ...(request.workspaceSlug ? { workspaceSlug: request.workspaceSlug } : {}),
        ...(request.limit !== undefined ? { limit: request.limit } : {}),
        ...(request.cursor ? { cursor: request.cursor } : {}),
      });
      return { entries: page.entries.map(toEntryMessage), nextCursor: page.nextCursor };
    },
  };
}
