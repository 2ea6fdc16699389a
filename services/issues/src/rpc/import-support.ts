import { invalidInput, ServiceError } from '@planning/errors';
import { ImportSupportService, type ImportRow } from '@planning/proto/planning/issues/v1/import_support_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import { validateId, validateTimestamp } from '../domain/fields.js';
import type { ImportRowInput, ImportSupportRepository } from '../store/import-support.js';

export { ImportSupportService };

export interface ImportSupportDeps {
  repo: ImportSupportRepository;
  clock: () => Date;
}

/** Rows per call: the imports service sends chunks, never whole payloads. */
const MAX_ROWS_PER_CALL = 1_000;

/** Only the imports-exports service (a system principal, after it authorized its caller) calls this. */
function requireService(ctx: CallContext): void {
  const principal = ctx.principal;
  if (principal.type === 'system') return;
  if (principal.type === 'anonymous') throw new ServiceError('unauthorized', 'Authentication required');
  throw new ServiceError('forbidden', 'Only the imports-exports service may do this', { reason: 'service-only' });
}

function rowsOf(rows: readonly ImportRow[]): ImportRowInput[] {
  if (rows.length > MAX_ROWS_PER_CALL) throw invalidInput('rows', `At most ${MAX_ROWS_PER_CALL} rows per call`);
  return rows.map((r, i) => {
    let fields: unknown;
    try {
      fields = JSON.parse(r.fieldsJson);
    } catch {
      throw invalidInput(`rows[${i}]`, `'rows[${i}]' is not JSON`);
    }
    if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) throw invalidInput(`rows[${i}]`, `'rows[${i}]' must be an object`);
    return { row: r.row, fields: fields as Record<string, unknown> };
  });
}

export function createImportSupportService(deps: ImportSupportDeps): ServiceImplementation<typeof ImportSupportService> {
  const { repo } = deps;
  return {
    async checkImportRows(request, ctx) {
      requireService(ctx);
      const { checks, storedTasks } = await repo.check(validateId(request.workspaceId, 'workspaceId'), rowsOf(request.rows), deps.clock());
      return {
        storedTasks,
        checks: checks.map((c) => ({
          row: c.row,
          operation: c.operation,
          issueId: c.issueId,
          version: c.version,
          errors: c.errors.map((p) => ({ row: c.row, ...p })),
          conflicts: c.conflicts.map((p) => ({ row: c.row, ...p })),
        })),
      };
    },

    async applyImportChunk(request, ctx) {
      requireService(ctx);
      if (!request.actor?.type || !request.actor.id) throw invalidInput('actor', "'actor' is required");
      const inputs = rowsOf(request.rows.map((r) => ({ row: r.row, fieldsJson: r.fieldsJson }) as ImportRow));
      const result = await repo.applyChunk({
        workspaceId: validateId(request.workspaceId, 'workspaceId'),
        commitId: validateId(request.commitId, 'commitId'),
        chunkIndex: request.chunkIndex,
        actor: { type: request.actor.type, id: request.actor.id },
        rows: request.rows.map((r, i) => {
          if (r.operation !== 'create' && r.operation !== 'update') throw invalidInput(`rows[${i}].operation`, "'operation' must be create or update");
          return {
            ...(inputs[i] as ImportRowInput),
            operation: r.operation,
            ...(r.issueId ? { issueId: validateId(r.issueId, `rows[${i}].issueId`) } : {}),
            expectedVersion: r.expectedVersion,
          };
        }),
        storedTaskLimit: request.storedTaskLimit ?? null,
        quotaResetsAt: validateTimestamp(request.quotaResetsAt, 'quotaResetsAt'),
        now: deps.clock(),
      });
      return result;
    },
  };
}
