import { ImportService } from '@planning/proto/planning/imports/v1/imports_pb';
import type { ServiceImplementation } from '@planning/rpc';
import type { ImportsCore } from './imports-core.js';

export { ImportService };

/** gRPC handlers of imports: decode, call the core, answer the resources as JSON. */
export function createImportService(core: ImportsCore): ServiceImplementation<typeof ImportService> {
  return {
    getImportSchema() {
      const s = core.schema();
      return Promise.resolve({ schemaId: s.schemaId, schemaVersion: s.schemaVersion, rowSchemaJson: JSON.stringify(s.rowSchema) });
    },
    async previewImport(request, ctx) {
      const preview = await core.preview(ctx, {
        idempotencyKey: request.idempotencyKey,
        plan: request.plan,
        format: request.format,
        payloadJson: request.payloadJson,
        ...(request.workspaceId ? { workspaceId: request.workspaceId } : {}),
      });
      return { previewJson: JSON.stringify(preview) };
    },
    async commitImport(request, ctx) {
      const commit = await core.commit(ctx, request.idempotencyKey, request.previewId);
      return { commitJson: JSON.stringify(commit) };
    },
  };
}
