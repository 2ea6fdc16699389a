/**
 * JSON issue imports (API document endpoints 17–18, DECISIONS §8; design in docs/imports.md).
 *
 * A preview reads the payload, decides its schema status, has the issues service check every row
 * (it owns tasks and their rules), and stores the planned rows here in chunks for 24 h; it changes
 * no task. A commit takes the preview with one conditional update (which also meters the monthly
 * `imports` quota, in the same transaction), then writes chunk after chunk through the issues
 * service, recording a checkpoint after each. Each chunk is one issues transaction with a marker
 * named by the commit and the chunk, so a chunk written twice (a resumed commit after a crash)
 * writes nothing the second time: no row is ever written twice.
 */
import { randomUUID } from 'node:crypto';
import { authorizeWorkspace, type AccessLookup } from '@planning/access';
import { conflict, invalidInput, ServiceError } from '@planning/errors';
import {
  idempotencyInFlight,
  idempotencyMismatch,
  idempotencyRecordId,
  validateIdempotencyKey,
} from '@planning/idempotency';
import { newId } from '@planning/ids';
import { quotaExceeded, type UsageMeter } from '@planning/metering';
import type { Outbox } from '@planning/outbox';
import { PLANS, quotaResetsAt, type PlanId } from '@planning/plans';
import type { ImportSupportService } from '@planning/proto/planning/issues/v1/import_support_pb';
import { SYSTEM_PRINCIPAL, type CallContext, type Principal, type RpcClient } from '@planning/rpc';
import { failpoint, FailpointError } from '@planning/runtime/failpoints';
import {
  artifactOf,
  assertPayloadDepth,
  capProblems,
  detectSchema,
  IMPORT_SCHEMA_ID,
  IMPORT_SCHEMA_VERSION,
  ROW_SCHEMA,
  normalizeRows,
  requestFingerprint,
  sha256Hex,
  targetWorkspace,
  MAX_IMPORT_ROWS,
  MAX_PROBLEMS,
  type RowError,
} from './schema.js';
import type { Checkpoint, CommitState, ImportRepository, PlannedRow, PreviewRecord, QuotaImpact } from './store.js';
import { recordImportRows } from '@planning/telemetry';

export type IssuesImportClient = RpcClient<typeof ImportSupportService>;

export interface ImportsDeps {
  repo: ImportRepository;
  outbox: Outbox;
  meter: UsageMeter;
  access: AccessLookup;
  issues: IssuesImportClient;
  clock: () => Date;
  previewTtlMs: number;
  commitLeaseMs: number;
  chunkRows: number;
}

/** Imports are an admin action (DECISIONS §1): role admin or owner, a system admin, or a token with `admin`. */
const ADMIN = { action: 'manage', scope: 'admin' } as const;

/** Rows per call when checking rows with the issues service. */
const CHECK_BATCH = 500;

/** How long a preview request owns its key while it runs. */
const PREVIEW_LEASE_MS = 120_000;

const validateKey = (raw: string | undefined): string => validateIdempotencyKey(raw, { required: true });

function ownerOf(principal: Principal): string {
  return `${principal.type}:${principal.id}`;
}

function actorOf(principal: Principal): { type: string; id: string } {
  return { type: principal.type, id: principal.keyId ?? principal.id };
}

export interface PreviewInput {
  idempotencyKey: string | undefined;
  plan: string;
  format: string;
  payloadJson: string;
  workspaceId?: string;
}

/**
 * Why a blocked preview cannot be committed: a plan quota it would exceed is the plan's refusal,
 * 403 `quota-exceeded` with the quota (as any quota refusal); an unsupported schema version is
 * the payload's fault, 400 naming `previewId`.
 */
function blockedCommit(preview: PreviewRecord, now: Date): ServiceError {
  const { imports, storedTasks } = preview.quotaImpact;
  if (imports.exceeded) {
    return quotaExceeded('imports', { limit: imports.limit, used: imports.used, resetsAt: quotaResetsAt(now).toISOString() });
  }
  if (storedTasks.exceeded) {
    return new ServiceError('quota-exceeded', `The workspace's plan stores at most ${storedTasks.limit} tasks; this import would create ${storedTasks.creates}`, {
      quota: { kind: 'stored-tasks', limit: storedTasks.limit ?? 0, used: storedTasks.used, resetsAt: quotaResetsAt(now).toISOString() },
    });
  }
  return new ServiceError('invalid-input', 'This preview is blocked (its schema version is not supported): it cannot be committed', {
    field: 'previewId',
    reason: 'preview-blocked',
  });
}

export type PreviewStatus = 'ready' | 'blocked' | 'committed' | 'expired';
export type ProgressStatus = PreviewStatus | 'committing';
export type ActiveStep = 'validate' | 'commit' | 'write' | 'done' | 'expired';

/**
 * The Import preview resource (API document section 2, docs/imports.md): the shape of the REST
 * JSON, field for field. The gRPC handler turns it into `planning.imports.v1.ImportPreview`.
 */
export interface PreviewView {
  id: string;
  idempotencyKey: string;
  status: PreviewStatus;
  workspaceId: string;
  createdAt: string;
  expiresAt: string;
  source: { format: 'json'; schema: { schemaVersion: string | null; status: PreviewRecord['schema']['status'] } };
  summary: Omit<PreviewRecord['summary'], 'problemsTruncated'> & { problemsTruncated: boolean };
  progress: {
    status: ProgressStatus;
    activeStep: ActiveStep;
    percentComplete: number;
    processedRows: number;
    blockedRows: number;
    completedRows: number;
    checkpoints: Checkpoint[];
  };
  recovery: { recoverable: boolean; idempotencyKey: string };
  quotaImpact: QuotaImpact;
  artifact: PreviewRecord['artifact'];
  errors: RowError[];
  conflicts: RowError[];
  commitId: string | null;
}

/** The Import commit resource (API document section 2, docs/imports.md), field for field. */
export interface CommitView {
  id: string;
  previewId: string;
  status: 'committed';
  summary: NonNullable<CommitState['result']>;
  errors: RowError[];
  committedAt: string | null;
}

/** The Import preview resource (API document section 2) and what this service adds. */
export function previewView(p: PreviewRecord, now: Date): PreviewView {
  const expired = p.status === 'ready' && !p.commit && p.expiresAt <= now;
  const status = expired ? 'expired' : p.status;
  // A checkpoint's row errors are the commit's, not part of the checkpoint resource.
  const checkpoints: Checkpoint[] =
    p.commit?.checkpoints.map(({ chunk, rows, status: s, created, updated, skipped }) => ({ chunk, rows, status: s, created, updated, skipped })) ??
    p.chunkSizes.map((rows, chunk) => ({ chunk, rows, status: 'pending', created: 0, updated: 0, skipped: 0 }));
  const planned = p.chunkSizes.reduce((a, b) => a + b, 0);
  const completedRows = checkpoints.filter((c) => c.status === 'done').reduce((n, c) => n + c.rows, 0);
  const committing = p.commit?.state === 'committing';
  const progressStatus = status === 'ready' && committing ? 'committing' : status;
  return {
    id: p._id,
    idempotencyKey: p.idempotencyKey,
    status,
    workspaceId: p.workspaceId,
    createdAt: p.createdAt.toISOString(),
    expiresAt: p.expiresAt.toISOString(),
    source: { format: 'json', schema: { schemaVersion: p.schema.schemaVersion, status: p.schema.status } },
    summary: { ...p.summary, problemsTruncated: p.summary.problemsTruncated ?? false },
    progress: {
      status: progressStatus,
      activeStep: status === 'blocked' ? 'validate' : status === 'committed' ? 'done' : committing ? 'write' : status === 'expired' ? 'expired' : 'commit',
      percentComplete: status === 'committed' ? 100 : planned === 0 ? 0 : Math.floor((completedRows / planned) * 100),
      processedRows: p.processedRows,
      blockedRows: p.blockedRows,
      completedRows,
      checkpoints,
    },
    recovery: { recoverable: status !== 'blocked' && status !== 'expired', idempotencyKey: p.idempotencyKey },
    quotaImpact: p.quotaImpact,
    artifact: p.artifact,
    errors: p.errors,
    conflicts: p.conflicts,
    commitId: p.commit?.id ?? null,
  };
}

/** The Import commit resource (API document section 2). */
export function commitView(p: PreviewRecord): CommitView {
  const c = p.commit;
  if (!c?.result) throw new ServiceError('internal', 'Internal error');
  return {
    id: c.id,
    previewId: p._id,
    status: 'committed',
    summary: c.result,
    errors: commitErrors(p),
    committedAt: c.committedAt?.toISOString() ?? null,
  };
}

/**
 * The commit's row errors: the preview's blocked rows, then each chunk's skipped rows (kept with its
 * checkpoint), by row; at most MAX_PROBLEMS of them (the summary counts every skipped row).
 */
function commitErrors(p: PreviewRecord): RowError[] {
  const all: RowError[] = [];
  const add = (list: readonly RowError[] | undefined) => {
    for (const e of list ?? []) all.push({ row: e.row, field: e.field, code: e.code });
  };
  add(p.errors);
  add(p.conflicts);
  add(p.commit?.errors);
  for (const cp of p.commit?.checkpoints ?? []) add(cp.errors);
  return all.sort((a, b) => a.row - b.row).slice(0, MAX_PROBLEMS);
}

export class ImportsCore {
  constructor(private readonly deps: ImportsDeps) {}

  // ---- preview -------------------------------------------------------------------------------

  async preview(ctx: CallContext, input: PreviewInput): Promise<PreviewView> {
    const key = validateKey(input.idempotencyKey);
    if (input.format !== 'json') throw invalidInput('format', "'format' must be json");
    if (typeof input.plan !== 'string' || input.plan === '') throw invalidInput('plan', "'plan' is required");
    let payload: unknown;
    try {
      payload = JSON.parse(input.payloadJson);
    } catch {
      throw invalidInput('payload', "'payload' is not JSON");
    }
    // Before anything walks it recursively (fingerprint, artifact): internal callers skip the gateway's check.
    assertPayloadDepth(payload);
    const hash = requestFingerprint({ plan: input.plan, format: input.format, payload, ...(input.workspaceId ? { workspaceId: input.workspaceId } : {}) });
    const { repo, clock } = this.deps;
    const keyId = idempotencyRecordId(ownerOf(ctx.principal), key);
    const begun = await repo.keys.begin({ id: keyId, kind: 'import-preview', requestHash: hash, now: clock(), leaseMs: PREVIEW_LEASE_MS });
    switch (begun.kind) {
      case 'mismatch':
        throw idempotencyMismatch();
      case 'in-flight':
        throw idempotencyInFlight();
      case 'replay': {
        const previewId = begun.answer.ok ? begun.answer.result.previewId : undefined;
        const stored = typeof previewId === 'string' ? await repo.get(previewId) : null;
        if (!stored) throw new ServiceError('not-found', 'Import preview not found (it expired)');
        await authorizeWorkspace(this.deps.access, ctx, stored.workspaceId, ADMIN);
        return previewView(stored, clock());
      }
      default:
        break;
    }
    try {
      const record = await this.buildPreview(ctx, input, payload, key, hash, begun);
      return previewView(record, clock());
    } catch (err) {
      if (!(err instanceof FailpointError)) await repo.keys.abandon(begun.id, begun.owner).catch(() => undefined);
      throw err;
    }
  }

  private async buildPreview(
    ctx: CallContext,
    input: PreviewInput,
    payload: unknown,
    key: string,
    hash: string,
    keyRecord: { id: string; owner: string },
  ): Promise<PreviewRecord> {
    const { repo, clock, access, meter } = this.deps;
    // A named workspace is authorized before the payload is looked at: a caller without the
    // right learns nothing from validation.
    const named = input.workspaceId ? await authorizeWorkspace(access, ctx, input.workspaceId, ADMIN) : undefined;
    const detected = detectSchema(payload);
    if (detected.rowCount > MAX_IMPORT_ROWS) {
      throw new ServiceError('payload-too-large', `An import holds at most ${MAX_IMPORT_ROWS} rows`, { field: 'payload.issues' });
    }
    const fallback = ctx.principal.type === 'api-key' ? ctx.principal.workspaceId : undefined;
    // Only the rows' workspaceId is looked at here (an unsupported payload's rows are not read otherwise).
    const rawRows = detected.rows ?? (Array.isArray((payload as { issues?: unknown }).issues) ? (payload as { issues: unknown[] }).issues : []);
    const workspaceId = targetWorkspace(input.workspaceId, rawRows, fallback);
    const ws = named ?? (await authorizeWorkspace(access, ctx, workspaceId, ADMIN));
    if (input.plan !== ws.planId) throw invalidInput('plan', `'plan' must be the workspace's plan (${ws.planId})`);
    const now = clock();
    const quotas = PLANS[ws.planId as PlanId].quotas;

    const errors: RowError[] = [];
    const conflicts: RowError[] = [];
    const planned: PlannedRow[] = [];
    let creates = 0;
    let updates = 0;
    let storedTasks = 0;
    if (detected.status !== 'unsupported' && detected.rows) {
      const normalized = normalizeRows(detected.rows, detected.status, workspaceId);
      // Loops, not push(...list): a list may hold more problems than a call takes arguments.
      for (const e of normalized.errors) errors.push(e);
      for (const c of normalized.conflicts) conflicts.push(c);
      const checks: { row: number; operation: string; issueId?: string; version: number; fieldsJson: string }[] = [];
      for (let i = 0; i < normalized.rows.length; i += CHECK_BATCH) {
        const batch = normalized.rows.slice(i, i + CHECK_BATCH).map((r) => ({ row: r.row, fieldsJson: JSON.stringify(r.fields) }));
        const res = await this.deps.issues.checkImportRows({ workspaceId, rows: batch }, { principal: SYSTEM_PRINCIPAL });
        storedTasks = res.storedTasks;
        res.checks.forEach((c, j) => {
          for (const p of c.errors) errors.push({ row: c.row, field: p.field, code: p.code });
          for (const p of c.conflicts) conflicts.push({ row: c.row, field: p.field, code: p.code });
          checks.push({ row: c.row, operation: c.operation, ...(c.issueId ? { issueId: c.issueId } : {}), version: c.version, fieldsJson: batch[j]?.fieldsJson ?? '{}' });
        });
      }
      // Two rows reaching the same task (one by id, one by externalId) are duplicates too.
      const byTask = new Map<string, number[]>();
      for (const c of checks) {
        if (!c.issueId) continue;
        const rows = byTask.get(c.issueId);
        if (rows) rows.push(c.row);
        else byTask.set(c.issueId, [c.row]);
      }
      const duplicated = new Set<number>();
      for (const x of conflicts) if (x.code.startsWith('duplicate')) duplicated.add(x.row);
      for (const rows of byTask.values()) {
        if (rows.length < 2) continue;
        for (const row of rows) if (!duplicated.has(row)) conflicts.push({ row, field: 'id', code: 'duplicate-id' });
      }
      const blocked = new Set<number>();
      for (const e of errors) blocked.add(e.row);
      for (const e of conflicts) blocked.add(e.row);
      for (const c of checks) {
        if (blocked.has(c.row)) continue;
        if (c.operation === 'update') updates += 1;
        else creates += 1;
        planned.push({
          row: c.row,
          fieldsJson: c.fieldsJson,
          operation: c.operation === 'update' ? 'update' : 'create',
          ...(c.issueId ? { issueId: c.issueId } : {}),
          expectedVersion: c.version,
        });
      }
    }
    const blockedSet = new Set<number>();
    for (const e of errors) blockedSet.add(e.row);
    for (const e of conflicts) blockedSet.add(e.row);
    const blockedRows = blockedSet.size;
    // The lists are capped (per row and in all) so a preview stays one small document and message.
    const listedErrors = capProblems(errors);
    const listedConflicts = capProblems(conflicts);

    const importsUsed = await meter.used(workspaceId, 'imports', now);
    const importsLimit = quotas.imports;
    const storedLimit = quotas['stored-tasks'];
    const quotaImpact: QuotaImpact = {
      imports: { limit: importsLimit, used: importsUsed, required: 1, exceeded: importsLimit !== null && importsUsed + 1 > importsLimit },
      storedTasks: { limit: storedLimit, used: storedTasks, creates, exceeded: storedLimit !== null && storedTasks + creates > storedLimit },
    };
    const quotaIsExceeded = quotaImpact.imports.exceeded || quotaImpact.storedTasks.exceeded;
    const status = detected.status === 'unsupported' || quotaIsExceeded ? 'blocked' : 'ready';

    const chunkSizes: number[] = [];
    const chunkRows = this.deps.chunkRows;
    for (let i = 0; i < planned.length; i += chunkRows) chunkSizes.push(Math.min(chunkRows, planned.length - i));
    const id = newId('imp');
    const expiresAt = new Date(now.getTime() + this.deps.previewTtlMs);
    // Kept a week past expiry so retries learn it expired (or committed) rather than "not found".
    const purgeAt = new Date(expiresAt.getTime() + 7 * 86_400_000);
    const record: PreviewRecord = {
      _id: id,
      workspaceId,
      planId: ws.planId,
      owner: ownerOf(ctx.principal),
      idempotencyKey: key,
      requestHash: hash,
      status,
      schema: { schemaVersion: detected.schemaVersion, status: detected.status },
      summary: {
        totalRows: detected.rowCount,
        creates,
        updates,
        conflicts: conflicts.length,
        errors: errors.length,
        quotaExceeded: quotaIsExceeded,
        problemsTruncated: listedErrors.truncated || listedConflicts.truncated,
      },
      blockedRows,
      processedRows: detected.status === 'unsupported' ? 0 : detected.rowCount,
      errors: listedErrors.kept,
      conflicts: listedConflicts.kept,
      quotaImpact,
      artifact: artifactOf(payload, detected.rowCount),
      chunkSizes,
      createdAt: now,
      expiresAt,
      purgeAt,
    };
    await this.deps.outbox.transaction(async (session) => {
      await repo.previews.insertOne(record, { session });
      for (let i = 0; i < chunkSizes.length; i++) {
        await repo.chunks.insertOne(
          { _id: `${id}:${i}`, previewId: id, index: i, rows: planned.slice(i * chunkRows, (i + 1) * chunkRows), purgeAt },
          { session },
        );
      }
      // The key's answer is written with the preview: a request that outlived its key's lease
      // (a retry took the key over) writes neither.
      if (!(await repo.keys.finish(keyRecord.id, keyRecord.owner, { ok: true, result: { previewId: id } }, { session }))) throw idempotencyInFlight();
      await this.deps.outbox.add(
        {
          type: 'import.previewed',
          workspaceId,
          actor: actorOf(ctx.principal),
          data: {
            subject: { type: 'import', id },
            status,
            schemaStatus: detected.status,
            totalRows: record.summary.totalRows,
            creates,
            updates,
            conflicts: conflicts.length,
            errors: errors.length,
          },
        },
        { session },
      );
    });
    return record;
  }

  // ---- commit --------------------------------------------------------------------------------

  async commit(ctx: CallContext, rawKey: string | undefined, rawPreviewId: string): Promise<CommitView> {
    const key = validateKey(rawKey);
    if (typeof rawPreviewId !== 'string' || !/^[A-Za-z0-9_:.-]{1,64}$/.test(rawPreviewId)) throw invalidInput('previewId', "'previewId' is required");
    const { repo, clock } = this.deps;
    const preview = await repo.get(rawPreviewId);
    if (!preview) throw new ServiceError('not-found', 'Import preview not found');
    const ws = await authorizeWorkspace(this.deps.access, ctx, preview.workspaceId, ADMIN);
    if (key === preview.idempotencyKey) {
      throw invalidInput('idempotency-key', "The commit's idempotency key must differ from the preview's");
    }
    // The commit's key names its preview: the commit itself is made once by the preview's own
    // conditional take, so the key only has to refuse being reused for another preview.
    const begun = await repo.keys.begin({
      id: idempotencyRecordId(ownerOf(ctx.principal), key),
      kind: 'import-commit',
      requestHash: sha256Hex(preview._id),
      now: clock(),
      leaseMs: 1,
    });
    if (begun.kind === 'mismatch') throw idempotencyMismatch('This idempotency key was used with another request; use a new key for a new request');
    if (begun.kind === 'new' || begun.kind === 'takeover') await repo.keys.finish(begun.id, begun.owner, { ok: true, result: { previewId: preview._id } });

    const taken = await this.take(ctx, preview, ws.planId as PlanId);
    if (taken.state === 'committed') return commitView(taken);
    return this.run(ctx, taken, ws.planId as PlanId);
  }

  /**
   * Takes the preview's commit for this request: starts it (metering the import, once), or takes
   * over one whose owner's lease passed. Answers the preview when it was committed already.
   */
  private async take(ctx: CallContext, preview: PreviewRecord, planId: PlanId): Promise<PreviewRecord & { state?: 'committed' }> {
    const { repo, clock, outbox, meter } = this.deps;
    for (let attempt = 0; attempt < 5; attempt++) {
      const now = clock();
      const current = attempt === 0 ? preview : await repo.get(preview._id);
      if (!current) throw new ServiceError('not-found', 'Import preview not found');
      if (current.commit?.state === 'committed') return { ...current, state: 'committed' };
      if (current.status === 'blocked') throw blockedCommit(current, now);
      const ownerUntil = new Date(now.getTime() + this.deps.commitLeaseMs);
      if (!current.commit) {
        if (current.expiresAt <= now) {
          throw new ServiceError('invalid-input', 'This preview expired: preview the payload again', { field: 'previewId', reason: 'preview-expired' });
        }
        const commitId = newId('imc');
        const runner = randomUUID();
        const started = await outbox.transaction(async (session) => {
          // Expiry is part of the condition: a preview that expires meanwhile is never taken.
          const updated = await repo.previews.findOneAndUpdate(
            { _id: current._id, status: 'ready', commit: { $exists: false }, expiresAt: { $gt: now } },
            {
              $set: {
                commit: {
                  id: commitId,
                  state: 'committing',
                  ownerUntil,
                  runner,
                  startedAt: now,
                  checkpoints: current.chunkSizes.map((rows, chunk) => ({ chunk, rows, status: 'pending', created: 0, updated: 0, skipped: 0 })),
                  errors: [],
                },
              },
            },
            { returnDocument: 'after', session },
          );
          if (!updated) return null;
          // Metered once, with the start of the commit: a retry or a racing commit never counts again.
          const decision = await meter.tryConsume({ workspaceId: current.workspaceId, kind: 'imports', limit: PLANS[planId].quotas.imports, now, session });
          if (!decision.allowed) throw quotaExceeded('imports', decision);
          return updated;
        });
        if (started) return started;
        continue;
      }
      if (current.commit.ownerUntil && current.commit.ownerUntil > now) {
        throw conflict('idempotency-in-flight', 'This preview is being committed by another request; retry shortly');
      }
      // The committing request's process died (or gave up): take the commit over and resume it.
      const resumed = await repo.previews.findOneAndUpdate(
        { _id: current._id, 'commit.id': current.commit.id, 'commit.state': 'committing', 'commit.ownerUntil': { $lte: now } },
        { $set: { 'commit.ownerUntil': ownerUntil, 'commit.runner': randomUUID() } },
        { returnDocument: 'after' },
      );
      if (resumed) return resumed;
    }
    throw conflict('idempotency-in-flight', 'This preview is being committed by another request; retry shortly');
  }

  /**
   * Writes the chunks not yet checkpointed, then marks the commit done. Every write is conditioned
   * on this run's runner token: a runner that stalled past its lease while another took the commit
   * over finds its token gone and stops, never rewriting the new owner's progress or lease.
   */
  private async run(ctx: CallContext, preview: PreviewRecord, planId: PlanId): Promise<CommitView> {
    const { repo, clock, outbox } = this.deps;
    const commit = preview.commit;
    if (!commit?.runner) throw new ServiceError('internal', 'Internal error');
    const owned = { _id: preview._id, 'commit.id': commit.id, 'commit.state': 'committing', 'commit.runner': commit.runner };
    const lost = () => conflict('idempotency-in-flight', 'This preview is being committed by another request; retry shortly');
    // The workspace's plan now (it may have changed since the preview).
    const quotas = PLANS[planId].quotas;
    // This run owns the commit: its copy of the checkpoints is the stored one until it loses the lease.
    const checkpoints: Checkpoint[] = commit.checkpoints.map((c) => ({ ...c }));
    const release = () => repo.previews.updateOne(owned, { $set: { 'commit.ownerUntil': clock() } }).catch(() => undefined);
    try {
      for (const cp of checkpoints) {
        if (cp.status === 'done') continue;
        const chunk = await repo.chunk(preview._id, cp.chunk);
        if (!chunk) {
          // The planned rows were swept (the commit was left unfinished past purgeAt): it cannot be finished.
          throw new ServiceError('invalid-input', 'This preview expired before its commit was finished: preview the payload again', {
            field: 'previewId',
            reason: 'preview-expired',
          });
        }
        const now = clock();
        const res = await this.deps.issues.applyImportChunk(
          {
            workspaceId: preview.workspaceId,
            commitId: commit.id,
            chunkIndex: cp.chunk,
            actor: actorOf(ctx.principal),
            rows: chunk.rows.map((r) => ({ row: r.row, fieldsJson: r.fieldsJson, operation: r.operation, issueId: r.issueId, expectedVersion: r.expectedVersion })),
            storedTaskLimit: quotas['stored-tasks'] ?? undefined,
            quotaResetsAt: quotaResetsAt(now).toISOString(),
          },
          { principal: SYSTEM_PRINCIPAL },
        );
        // The chunk is written in the issues store; a crash here loses only the checkpoint, and the resumed commit's replay restores it.
        failpoint('imports.after-chunk');
        Object.assign(cp, {
          status: 'done',
          created: res.created,
          updated: res.updated,
          skipped: res.skipped,
          errors: res.errors.map((e) => ({ row: e.row, field: e.field, code: e.code })),
        });
        const saved = await repo.previews.updateOne(owned, {
          $set: { 'commit.checkpoints': checkpoints, 'commit.ownerUntil': new Date(clock().getTime() + this.deps.commitLeaseMs) },
        });
        if (saved.matchedCount === 0) throw lost();
        for (const result of ['created', 'updated', 'skipped'] as const) recordImportRows(result, res[result]);
      }
      const created = checkpoints.reduce((n, c) => n + c.created, 0);
      const updated = checkpoints.reduce((n, c) => n + c.updated, 0);
      const skipped = checkpoints.reduce((n, c) => n + c.skipped, 0) + preview.blockedRows;
      const result = { created, updated, skipped, totalOperations: created + updated };
      const committedAt = clock();
      const done = await outbox.transaction(async (session) => {
        const finished = await repo.previews.findOneAndUpdate(
          owned,
          { $set: { status: 'committed', 'commit.state': 'committed', 'commit.result': result, 'commit.committedAt': committedAt }, $unset: { 'commit.ownerUntil': '' } },
          { returnDocument: 'after', session },
        );
        if (!finished) return null;
        await outbox.add(
          {
            type: 'import.committed',
            workspaceId: preview.workspaceId,
            actor: actorOf(ctx.principal),
            data: { subject: { type: 'import', id: preview._id }, commitId: commit.id, created, updated, skipped },
          },
          { session },
        );
        return finished;
      });
      const final = done ?? (await repo.get(preview._id));
      if (!final?.commit?.result) throw lost();
      // The planned rows are no longer needed.
      await repo.chunks.deleteMany({ previewId: preview._id }).catch(() => undefined);
      return commitView(final);
    } catch (err) {
      if (!(err instanceof FailpointError)) await release();
      throw err;
    }
  }

  schema() {
    return { schemaId: IMPORT_SCHEMA_ID, schemaVersion: IMPORT_SCHEMA_VERSION, rowSchema: ROW_SCHEMA };
  }
}
