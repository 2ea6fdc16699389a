/**
 * Issue exports (API document endpoints 19–20, DECISIONS §9): who may export, which formats a
 * plan allows, the monthly quota, building the artifact, and the redacted history entry written
 * with its `export.created` event. Refusals (not entitled, quota) are audited as denials.
 */
import { createHash } from 'node:crypto';
import { authorizeWorkspace, type AccessLookup } from '@planning/access';
import { ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import { quotaExceeded, type UsageMeter } from '@planning/metering';
import type { Outbox } from '@planning/outbox';
import { EXPORT_FORMATS, PLANS, type ExportFormat, type PlanId } from '@planning/plans';
import type { CallContext, Principal } from '@planning/rpc';
import { failpoint } from '@planning/runtime';
import type { ExportHistoryRecord, ExportHistoryRepository } from '../store/export-history.js';
import { hasFiltersOrOrder, redactFilters, type ExportFilterValues } from './filters.js';
import { EXPORT_SCHEMA_VERSION, renderBackup, renderCsv, renderJson, renderMarkdown, type Artifact } from './formats.js';
import { findWorkspace, readBackup, readIssues, SizeBudget, tooLarge, type IssuesClients, type ReadControl } from './reader.js';
import { recordExportBytes } from '@planning/telemetry';

/** The access an export and its history need (DECISIONS §1: exports are an admin action). */
export const EXPORT_REQUIREMENT = { action: 'manage', scope: 'admin' } as const;

/** Artifacts travel to the gateway in chunks of this size (well under gRPC's 4 MiB default). */
export const CHUNK_BYTES = 1_048_576;

/**
 * An export is not recorded when less than this remains of its caller's deadline: the answer
 * would likely arrive after the caller stopped waiting, leaving a recorded, metered export nobody
 * received.
 */
export const RECORD_MARGIN_MS = 2_000;

/** Seconds a client refused for too many concurrent exports is asked to wait. */
const BUSY_RETRY_AFTER_SECONDS = 5;

export interface ExportsCoreDeps {
  history: ExportHistoryRepository;
  outbox: Outbox;
  meter: UsageMeter;
  access: AccessLookup;
  issues: IssuesClients;
  clock: () => Date;
  retentionSeconds: number;
  maxBytes: number;
  /** EXPORT_DEADLINE_MS: the longest an export may take, request to record. */
  deadlineMs: number;
  /** EXPORT_MAX_CONCURRENT_PER_WORKSPACE: exports of one workspace building at once (this process). */
  maxConcurrentPerWorkspace: number;
}

export interface ExportRequest {
  workspaceId?: string;
  workspaceSlug?: string;
  plan?: string;
  format: string;
  filters: ExportFilterValues;
}

export interface ExportResult {
  entry: ExportHistoryRecord;
  artifact: Artifact;
  fileName: string;
  /** The artifact cut into chunks of CHUNK_BYTES (at least one, possibly empty). */
  chunks: Buffer[];
}

/** The actor an event names: the user, or the API key (never a token). */
export function actorOf(principal: Principal): { type: string; id: string } {
  if (principal.type === 'api-key') return { type: 'api-key', id: principal.keyId ?? principal.id };
  return { type: principal.type, id: principal.userId ?? principal.id };
}

const ID_PATTERN = /^[A-Za-z0-9_:.-]{1,64}$/;
const SLUG_PATTERN = /^[a-z0-9][a-z0-9-]{0,99}$/;

export function chunk(bytes: Buffer, size = CHUNK_BYTES): Buffer[] {
  if (bytes.length === 0) return [bytes];
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.subarray(at, at + size));
  return out;
}

/** The caller of an RPC, or a test's bare principal (no deadline, never cancelled). */
type Caller = CallContext | { principal: Principal; signal?: AbortSignal; deadline?: Date | undefined };

export class ExportsCore {
  /** Exports being built per workspace in this process (EXPORT_MAX_CONCURRENT_PER_WORKSPACE). */
  private readonly running = new Map<string, number>();

  constructor(private readonly deps: ExportsCoreDeps) {}

  /** The retention of new entries in days (DECISIONS §9: 30). */
  get retentionDays(): number {
    return this.deps.retentionSeconds / 86_400;
  }

  /**
   * Names the workspace by id or slug (both: they must agree), then authorizes the caller. A
   * slug or id nobody (or the caller's token) can see is 404, as ids are everywhere.
   */
  async workspace(ctx: Caller, by: { workspaceId?: string; workspaceSlug?: string }) {
    const { workspaceId, workspaceSlug } = by;
    if (!workspaceId && !workspaceSlug) {
      throw new ServiceError('invalid-input', "'workspaceSlug' or 'workspaceId' is required", { field: 'workspaceSlug' });
    }
    if (workspaceId !== undefined && !ID_PATTERN.test(workspaceId)) {
      throw new ServiceError('invalid-input', "'workspaceId' is not a valid id", { field: 'workspaceId' });
    }
    if (workspaceSlug !== undefined && !SLUG_PATTERN.test(workspaceSlug)) {
      throw new ServiceError('invalid-input', "'workspaceSlug' is not a valid slug", { field: 'workspaceSlug' });
    }
    if (workspaceSlug) {
      const bySlug = await findWorkspace(this.deps.issues, { slug: workspaceSlug });
      if (!bySlug) throw new ServiceError('not-found', 'Workspace not found');
      // Authorized before anything about it is told: a token of another workspace hears 404,
      // exactly as for a slug nobody has, and only then may a mismatch with workspaceId be named.
      const access = await authorizeWorkspace(this.deps.access, ctx, bySlug.id, EXPORT_REQUIREMENT);
      if (workspaceId !== undefined && workspaceId !== bySlug.id) {
        throw new ServiceError('invalid-input', "'workspaceSlug' and 'workspaceId' name different workspaces", { field: 'workspaceSlug' });
      }
      return { ...bySlug, planId: access.planId };
    }
    const id = workspaceId!;
    const access = await authorizeWorkspace(this.deps.access, ctx, id, EXPORT_REQUIREMENT);
    const found = await findWorkspace(this.deps.issues, { id });
    if (!found) throw new ServiceError('not-found', 'Workspace not found');
    return { ...found, planId: access.planId };
  }

  async create(ctx: Caller, request: ExportRequest): Promise<ExportResult> {
    if (!(EXPORT_FORMATS as readonly string[]).includes(request.format)) {
      throw new ServiceError('invalid-input', `'format' must be one of ${EXPORT_FORMATS.join(', ')}`, { field: 'format' });
    }
    const format = request.format as ExportFormat;
    if (format === 'backup' && hasFiltersOrOrder(request.filters)) {
      throw new ServiceError('invalid-input', 'A backup holds the whole workspace in creation order and takes no filters, sort or direction', {
        field: 'format',
      });
    }
    const workspace = await this.workspace(ctx, request);
    // The plan is the workspace's (DECISIONS §2): a client cannot claim another one.
    if (request.plan !== undefined && request.plan !== workspace.planId) {
      throw new ServiceError('invalid-input', "'plan' must name the workspace's plan", { field: 'plan' });
    }
    const actor = actorOf(ctx.principal);
    const plan = PLANS[workspace.planId];
    if (!plan.exportFormats.includes(format)) {
      await this.deny(workspace.id, actor, format, 'not-entitled');
      throw new ServiceError('not-entitled', `The ${workspace.planId} plan does not include ${format} exports`);
    }
    // A slot before the quota: a refused export costs nothing.
    const running = this.running.get(workspace.id) ?? 0;
    if (running >= this.deps.maxConcurrentPerWorkspace) {
      throw new ServiceError(
        'rate-limited',
        `At most ${this.deps.maxConcurrentPerWorkspace} exports of a workspace run at once; retry when one has finished`,
        { retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS },
      );
    }
    this.running.set(workspace.id, running + 1);
    // The export stops when its caller goes away (the gateway cancels the call when the HTTP
    // client disconnects), when the caller's deadline passes, or after EXPORT_DEADLINE_MS.
    const own = new AbortController();
    const timer = setTimeout(
      () =>
        own.abort(
          new ServiceError(
            'unavailable',
            `The export did not finish within ${this.deps.deadlineMs / 1_000} s and was neither recorded nor counted; narrow it with filters`,
          ),
        ),
      this.deps.deadlineMs,
    );
    const signal = 'signal' in ctx && ctx.signal ? AbortSignal.any([own.signal, ctx.signal]) : own.signal;
    const ownDeadline = new Date(Date.now() + this.deps.deadlineMs);
    const callerDeadline = 'deadline' in ctx ? ctx.deadline : undefined;
    const control: ExportControl = {
      signal,
      deadline: callerDeadline && callerDeadline < ownDeadline ? callerDeadline : ownDeadline,
      callerDeadline,
    };
    try {
      const now = this.deps.clock();
      const decision = await this.deps.meter.tryConsume({ workspaceId: workspace.id, kind: 'exports', limit: plan.quotas.exports, now });
      if (!decision.allowed) {
        await this.deny(workspace.id, actor, format, 'quota-exceeded');
        throw quotaExceeded('exports', decision);
      }
      const state = { recorded: false };
      try {
        return await this.build(workspace, format, request.filters, actor, now, state, control);
      } catch (err) {
        // A call that failed because the export was stopped reports why it was stopped.
        if (signal.aborted) throw stopReason(signal);
        throw err;
      } finally {
        // The export did not happen (bad filter, too large, stopped, a failure): its quota is given back.
        if (!state.recorded) await this.deps.meter.refund({ workspaceId: workspace.id, kind: 'exports', period: decision.period }).catch(() => undefined);
      }
    } finally {
      clearTimeout(timer);
      const left = (this.running.get(workspace.id) ?? 1) - 1;
      if (left > 0) this.running.set(workspace.id, left);
      else this.running.delete(workspace.id);
    }
  }

  private async build(
    workspace: { id: string; slug: string; name: string; planId: PlanId },
    format: ExportFormat,
    filters: ExportFilterValues,
    actor: { type: string; id: string },
    now: Date,
    state: { recorded: boolean },
    control: ExportControl,
  ): Promise<ExportResult> {
    const budget = new SizeBudget(this.deps.maxBytes);
    const exportedAt = now.toISOString();
    let artifact: Artifact;
    let issueCount: number;
    if (format === 'backup') {
      const records = await readBackup(this.deps.issues, workspace, budget, control);
      artifact = renderBackup({ exportedAt }, records);
      issueCount = records.issues.length;
    } else {
      const issues = await readIssues(this.deps.issues, workspace.id, filters, budget, control);
      const meta = { exportedAt, slug: workspace.slug };
      artifact = format === 'json' ? renderJson(meta, issues) : format === 'csv' ? renderCsv(issues) : renderMarkdown(meta, issues);
      issueCount = issues.length;
    }
    if (artifact.bytes.length > this.deps.maxBytes) throw tooLarge(this.deps.maxBytes);
    const id = newId('exp', now.getTime());
    const expiresAt = new Date(now.getTime() + this.deps.retentionSeconds * 1_000);
    const entry: ExportHistoryRecord = {
      _id: id,
      workspaceId: workspace.id,
      format,
      redacted: true,
      retentionDays: this.retentionDays,
      schemaVersion: EXPORT_SCHEMA_VERSION,
      createdAt: now,
      expiresAt,
      filters: redactFilters(await this.deps.history.filterKey(workspace.id, now), filters),
      sha256: createHash('sha256').update(artifact.bytes).digest('hex'),
      bytes: artifact.bytes.length,
      issueCount,
      auditEventIds: [],
      actor,
    };
    // Later chunks are stored before the record: an export whose chunks could not be kept fails
    // unrecorded (and is refunded) rather than being recorded and never delivered.
    const chunks = chunk(artifact.bytes);
    await this.deps.history.putChunks(id, actor.id, chunks.slice(1), now);
    try {
      // The last moment to give up: a stopped export, or one whose caller is about to stop
      // waiting, is not recorded, and its quota is given back.
      ensureTime(control);
      failpoint('export.before-record');
      await this.record(entry, workspace.id, actor, format, issueCount);
      recordExportBytes(format, artifact.bytes.length);
    } catch (err) {
      await this.deps.history.releaseChunks(id, actor.id).catch(() => undefined);
      throw err;
    }
    state.recorded = true;
    const stamp = exportedAt.slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
    return { entry, artifact, chunks, fileName: `${workspace.slug}-issues-${stamp}.${artifact.extension}` };
  }

  /** The history entry and its `export.created` event, in one outbox transaction. */
  private async record(entry: ExportHistoryRecord, workspaceId: string, actor: { type: string; id: string }, format: ExportFormat, issueCount: number): Promise<void> {
    const id = entry._id;
    await this.deps.outbox.transaction(async (session) => {
      const event = await this.deps.outbox.add(
        {
          type: 'export.created',
          workspaceId,
          actor,
          data: {
            subject: { type: 'export', id },
            outcome: 'allowed',
            format,
            redacted: true,
            retentionDays: entry.retentionDays,
            schemaVersion: entry.schemaVersion,
            createdAt: entry.createdAt.toISOString(),
            expiresAt: entry.expiresAt.toISOString(),
            filters: entry.filters,
            sha256: entry.sha256,
            bytes: entry.bytes,
            issueCount,
          },
        },
        { session },
      );
      entry.auditEventIds = [event.id];
      await this.deps.history.insert(entry, session);
    });
  }

  /** A refused export, audited with its reason (ids only). */
  private async deny(workspaceId: string, actor: { type: string; id: string }, format: ExportFormat, reason: string): Promise<void> {
    await this.deps.outbox.transaction(async (session) => {
      await this.deps.outbox.add(
        {
          type: 'export.denied',
          workspaceId,
          actor,
          data: { subject: { type: 'export', id: newId('exp') }, outcome: 'denied', reason, format },
        },
        { session },
      );
    });
  }

  async readChunk(principal: Principal, exportId: string, index: number): Promise<Buffer> {
    if (!ID_PATTERN.test(exportId)) throw new ServiceError('invalid-input', "'exportId' is not a valid id", { field: 'exportId' });
    if (!Number.isInteger(index) || index < 1) throw new ServiceError('invalid-input', "'index' must be 1 or more", { field: 'index' });
    const found = await this.deps.history.takeChunk(exportId, index, actorOf(principal).id, this.deps.clock());
    if (!found) throw new ServiceError('not-found', 'Export artifact not found (it is kept for a few minutes)');
    return found;
  }

  /** Drops the unread chunks of the principal's export (its download ended early). */
  async release(principal: Principal, exportId: string): Promise<void> {
    if (!ID_PATTERN.test(exportId)) throw new ServiceError('invalid-input', "'exportId' is not a valid id", { field: 'exportId' });
    await this.deps.history.releaseChunks(exportId, actorOf(principal).id);
  }

  async history(
    ctx: Caller,
    request: { workspaceId?: string; workspaceSlug?: string; limit?: number; cursor?: string },
  ): Promise<{ entries: ExportHistoryRecord[]; nextCursor?: string }> {
    const limit = request.limit ?? 500;
    if (request.limit !== undefined && (!Number.isInteger(request.limit) || request.limit < 1 || request.limit > 200)) {
      throw new ServiceError('invalid-input', "'limit' must be an integer from 1 to 200", { field: 'limit' });
    }
    let after: string | undefined;
    if (request.cursor) {
      after = Buffer.from(request.cursor, 'base64url').toString('utf8');
      if (!ID_PATTERN.test(after)) throw new ServiceError('invalid-input', "'cursor' is not a valid cursor", { field: 'cursor' });
    }
    const workspace = await this.workspace(ctx, request);
    const page = await this.deps.history.list(workspace.id, this.deps.clock(), limit, after);
    const last = page.entries.at(-1);
    return {
      entries: page.entries,
      ...(page.more && last ? { nextCursor: Buffer.from(last._id, 'utf8').toString('base64url') } : {}),
    };
  }
}

interface ExportControl extends ReadControl {
  signal: AbortSignal;
  /** The caller's own deadline, if it gave one. */
  callerDeadline: Date | undefined;
}

/** Why a stopped export stopped, as the error its caller gets (never a 500). */
function stopReason(signal: AbortSignal): ServiceError {
  const reason: unknown = signal.reason;
  return reason instanceof ServiceError ? reason : new ServiceError('unavailable', 'The export was cancelled; nothing was recorded or counted');
}

/** Throws when the export was stopped or its caller's deadline is (nearly) over. */
function ensureTime(control: ExportControl): void {
  if (control.signal.aborted) throw stopReason(control.signal);
  if (control.callerDeadline && control.callerDeadline.getTime() - Date.now() < RECORD_MARGIN_MS) {
    throw new ServiceError('unavailable', "The export finished too close to the caller's deadline; it was neither recorded nor counted");
  }
}
