import { createRemoteAccess } from '@planning/access';
import { createUsageMeter, meteredUsageProvider, registerUsageProvider } from '@planning/metering';
import { createOutbox } from '@planning/outbox';
import { ImportSupportService } from '@planning/proto/planning/issues/v1/import_support_pb';
import { ProjectService } from '@planning/proto/planning/issues/v1/projects_pb';
import { ProgramService } from '@planning/proto/planning/issues/v1/programs_pb';
import { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import { TaskService } from '@planning/proto/planning/issues/v1/tasks_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import {
  openServiceStore,
  storeReadiness,
  type BusExports,
  type ModuleImplementation,
  type RpcClientsExports,
  type RpcServerExports,
} from '@planning/runtime';
import { injectTraceHeaders } from '@planning/telemetry';
import type { ImportsExportsSettings } from './config.js';
import { ExportsCore } from './exports/exports-core.js';
import { createImportService, ImportService } from './imports/import-service.js';
import { ImportsCore } from './imports/imports-core.js';
import { ImportRepository } from './imports/store.js';
import { createExportService, ExportService } from './rpc/export-service.js';
import { ExportHistoryRepository } from './store/export-history.js';

/**
 * The imports-exports service: import previews and commits, exports and their history, in its
 * own store. It reads and writes tasks only through the issues service's gRPC API.
 */
export const importsExportsImplementation: ModuleImplementation<ImportsExportsSettings> = {
  async init(ctx) {
    const { bus } = ctx.get<BusExports>('bus');
    const rpc = ctx.get<RpcServerExports>('rpc-server');
    const clients = ctx.get<RpcClientsExports>('rpc-clients');
    const settings = ctx.settings;
    const store = await openServiceStore(ctx.config, 'imports-exports', ctx.logger);
    // Export (and import) events are written with the change they describe, then published.
    const outbox = await createOutbox({
      store,
      bus,
      source: 'imports-exports',
      logger: ctx.logger,
      traceHeaders: () => injectTraceHeaders(),
    });
    // Monthly usage of this service's quota kinds, reported to GET /api/billing/usage.
    const meter = await createUsageMeter(store);
    const access = createRemoteAccess(clients.client('issues', WorkspaceService));
    registerUsageProvider(rpc, meteredUsageProvider({ owner: 'imports-exports', kinds: ['imports', 'exports'], meter, access }));
    const exportsCore = new ExportsCore({
      history: await ExportHistoryRepository.open(store),
      outbox,
      meter,
      access,
      issues: {
        workspaces: clients.client('issues', WorkspaceService),
        tasks: clients.client('issues', TaskService),
        taskRecords: clients.client('issues', TaskRecordService),
        projects: clients.client('issues', ProjectService),
        programs: clients.client('issues', ProgramService),
      },
      clock: () => new Date(),
      retentionSeconds: settings.EXPORT_RETENTION_SECONDS,
      maxBytes: settings.EXPORT_MAX_BYTES,
      deadlineMs: settings.EXPORT_DEADLINE_MS,
      maxConcurrentPerWorkspace: settings.EXPORT_MAX_CONCURRENT_PER_WORKSPACE,
    });
    rpc.addService(ExportService, createExportService(exportsCore));
    // JSON issue imports (docs/imports.md): previews and chunked, resumable commits.
    const importsCore = new ImportsCore({
      repo: await ImportRepository.open(store),
      outbox,
      meter,
      access,
      issues: clients.client('issues', ImportSupportService),
      clock: () => new Date(),
      previewTtlMs: settings.IMPORT_PREVIEW_TTL_SECONDS * 1_000,
      commitLeaseMs: settings.IMPORT_COMMIT_LEASE_MS,
      chunkRows: settings.IMPORT_CHUNK_ROWS,
    });
    rpc.addService(ImportService, createImportService(importsCore));
    return {
      async start() {
        await outbox.start();
      },
      async stop() {
        await outbox.stop();
        await store.close();
      },
      ready: () => storeReadiness(store),
    };
  },
};
