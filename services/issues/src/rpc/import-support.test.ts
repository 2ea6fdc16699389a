import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import { createInProcessBus } from '@planning/bus';
import { ServiceError } from '@planning/errors';
import { createOutbox } from '@planning/outbox';
import { ImportSupportService } from '@planning/proto/planning/issues/v1/import_support_pb';
import { SYSTEM_PRINCIPAL, type CallContext, type Principal, type ServiceImplementation } from '@planning/rpc';
import type { DocumentStore } from '@planning/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { importedTaskId } from '../domain/import-rows.js';
import { ImportSupportRepository } from '../store/import-support.js';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';
import { createImportSupportService } from './import-support.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const owner: Principal = { type: 'user', id: 'usr_owner', userId: 'usr_owner', isAdmin: false, scopes: [] };
const actor = { type: 'user', id: 'usr_owner' };

let h: PlanningHarness;
let impl: ServiceImplementation<typeof ImportSupportService>;
let ws: string;
let projectId: string;

type Methods = (typeof ImportSupportService)['method'];
async function call<K extends keyof Methods>(
  method: K,
  request: MessageInitShape<Methods[K]['input']>,
  principal: Principal = SYSTEM_PRINCIPAL,
): Promise<MessageShape<Methods[K]['output']>> {
  const desc = ImportSupportService.methods.find((m) => m.localName === method)!;
  const input = desc.input as DescMessage;
  const output = desc.output as DescMessage;
  const req = fromBinary(input, toBinary(input, create(input, request as never)));
  const res = await (impl[method] as (r: unknown, c: CallContext) => Promise<unknown>)(req, { principal } as CallContext);
  return fromBinary(output, toBinary(output, create(output, res as never))) as MessageShape<Methods[K]['output']>;
}

const row = (n: number, fields: Record<string, unknown>) => ({ row: n, fieldsJson: JSON.stringify({ workspaceId: ws, projectId, ...fields }) });
const planned = (n: number, fields: Record<string, unknown>, operation = 'create', issueId?: string, expectedVersion = 0) => ({
  ...row(n, fields),
  operation,
  ...(issueId ? { issueId } : {}),
  expectedVersion,
});
const chunk = (commitId: string, index: number, rows: ReturnType<typeof planned>[], limit?: number) =>
  call('applyImportChunk', { workspaceId: ws, commitId, chunkIndex: index, actor, rows, quotaResetsAt: '2025-07-01T00:00:00.000Z', ...(limit !== undefined ? { storedTaskLimit: limit } : {}) });
const count = () => h.planning.tasks.countInWorkspace(ws);

beforeEach(async () => {
  h = await createPlanningHarness();
  const outbox = await createOutbox({ store: h.store as DocumentStore, bus: createInProcessBus(), source: 'issues', logger: quiet });
  impl = createImportSupportService({
    repo: await ImportSupportRepository.open(h.store as DocumentStore, outbox, h.planning.tasks, h.planning.planning),
    clock: () => new Date(h.now),
  });
  ws = await h.workspace({ ownerId: 'usr_owner' });
  projectId = (await h.projects.createProject({ workspaceId: ws, name: 'P' }, owner)).project!.id;
});

afterEach(async () => {
  await h.close();
});

describe('imports: issues import support', () => {
  it('imports: only a system principal may call it', async () => {
    const err = await call('checkImportRows', { workspaceId: ws, rows: [] }, owner).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('forbidden');
  });

  it('imports: checks match tasks by id and externalId and report problems by field and code', async () => {
    const task = (await h.tasks.createTask({ projectId, title: 'Existing' }, owner)).task!.task!;
    await chunk('imc_seed', 0, [planned(1, { title: 'External', externalId: 'EXT-1' })]);
    const res = await call('checkImportRows', {
      workspaceId: ws,
      rows: [
        row(1, { id: task.id, title: 'Renamed' }),
        row(2, { externalId: 'EXT-1', priority: 'urgent' }),
        row(3, { title: 'New' }),
        row(4, { title: 'Bad', projectId: 'prj_missing', milestoneId: 'mil_missing' }),
        row(5, { id: task.id, status: 'in-review' }),
        row(6, { id: task.id, updatedAt: '2020-01-01T00:00:00Z' }),
        row(7, { title: 'Deps', dependencies: ['iss_missing'] }),
      ],
    });
    const by = new Map(res.checks.map((c) => [c.row, c]));
    expect(by.get(1)).toMatchObject({ operation: 'update', issueId: task.id, version: 1, errors: [], conflicts: [] });
    expect(by.get(2)).toMatchObject({ operation: 'update', issueId: importedTaskId('imc_seed', 1) });
    expect(by.get(3)).toMatchObject({ operation: 'create', errors: [] });
    expect(by.get(4)!.errors.map((e) => `${e.field}:${e.code}`)).toEqual(['projectId:not-found', 'milestoneId:not-found']);
    expect(by.get(5)!.errors.map((e) => `${e.field}:${e.code}`)).toEqual(['status:invalid-transition']);
    expect(by.get(6)!.conflicts.map((e) => `${e.field}:${e.code}`)).toEqual(['updatedAt:changed-since-source']);
    expect(by.get(7)!.errors.map((e) => `${e.field}:${e.code}`)).toEqual(['dependencies:not-found']);
    expect(res.storedTasks).toBe(2);
  });

  it('imports: a chunk written again replays its result and writes nothing', async () => {
    const rows = [planned(1, { title: 'A' }), planned(2, { title: 'B' })];
    const first = await chunk('imc_1', 0, rows);
    expect(first).toMatchObject({ created: 2, updated: 0, skipped: 0, replayed: false });
    const again = await chunk('imc_1', 0, rows);
    expect(again).toMatchObject({ created: 2, replayed: true });
    expect(await count()).toBe(2);
    expect(await h.planning.tasks.get(importedTaskId('imc_1', 1))).toMatchObject({ title: 'A' });
    expect((await h.events('task.created')).length).toBe(2);
  });

  it('imports: concurrent writers of one chunk write it once', async () => {
    const rows = Array.from({ length: 30 }, (_, i) => planned(i + 1, { title: `T${i}` }));
    const results = await Promise.all(Array.from({ length: 5 }, () => chunk('imc_race', 0, rows)));
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    for (const r of results) expect(r.created).toBe(30);
    expect(await count()).toBe(30);
  });

  it('imports: an update is skipped when the task changed since the preview', async () => {
    const task = (await h.tasks.createTask({ projectId, title: 'Original' }, owner)).task!.task!;
    await h.tasks.updateTask({ id: task.id, patch: { title: 'Changed' } }, owner);
    const current = await h.planning.tasks.get(task.id);
    expect(current!.version).toBe(2);
    const res = await chunk('imc_2', 0, [planned(1, { id: task.id, title: 'Imported' }, 'update', task.id, 1)]);
    expect(res).toMatchObject({ updated: 0, skipped: 1, errors: [{ row: 1, field: 'id', code: 'changed-since-preview' }] });
    const ok = await chunk('imc_3', 0, [planned(1, { id: task.id, title: 'Imported' }, 'update', task.id, current!.version)]);
    expect(ok).toMatchObject({ updated: 1, skipped: 0 });
    expect((await h.planning.tasks.get(task.id))!.title).toBe('Imported');
  });

  it('imports: a chunk that would pass the stored-task quota is refused whole', async () => {
    await h.tasks.createTask({ projectId, title: 'One' }, owner);
    const err = await chunk('imc_q', 0, [planned(1, { title: 'A' }), planned(2, { title: 'B' })], 2).catch((e: unknown) => e);
    expect((err as ServiceError).code).toBe('quota-exceeded');
    expect(await count()).toBe(1);
    // Nothing was marked either: with room, the same chunk is written.
    expect(await chunk('imc_q', 0, [planned(1, { title: 'A' }), planned(2, { title: 'B' })], 3)).toMatchObject({ created: 2, replayed: false });
  });

  it('imports: a create naming an externalId a task already carries is skipped as duplicate-external-id', async () => {
    const first = await chunk('imc_e1', 0, [planned(1, { title: 'A', externalId: 'ext-1' })]);
    expect(first).toMatchObject({ created: 1, skipped: 0 });
    const second = await chunk('imc_e2', 0, [planned(1, { title: 'A', externalId: 'ext-1' }), planned(2, { title: 'B', externalId: 'ext-2' })]);
    expect(second).toMatchObject({ created: 1, skipped: 1, errors: [{ row: 1, field: 'externalId', code: 'duplicate-external-id' }] });
    expect(await count()).toBe(2);
    expect(await h.planning.tasks.tasks.countDocuments({ workspaceId: ws, externalId: 'ext-1' })).toBe(1);
  });

  it('imports: concurrent commits creating one externalId leave one task, and the others skip the row', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => chunk(`imc_er${i}`, 0, [planned(1, { title: 'Race', externalId: 'ext-race' })])));
    expect(results.reduce((n, r) => n + r.created, 0)).toBe(1);
    for (const r of results.filter((x) => x.created === 0)) {
      expect(r).toMatchObject({ skipped: 1, errors: [{ row: 1, field: 'externalId', code: 'duplicate-external-id' }] });
    }
    expect(await h.planning.tasks.tasks.countDocuments({ workspaceId: ws, externalId: 'ext-race' })).toBe(1);
  });

  it('imports: the stored-task room check counts only the rows the chunk will create', async () => {
    await h.tasks.createTask({ projectId, title: 'One' }, owner);
    await chunk('imc_r0', 0, [planned(1, { title: 'Seed', externalId: 'ext-r' })]);
    // Room for one more: the row whose externalId exists is skipped, so the chunk fits.
    const res = await chunk('imc_r1', 0, [planned(1, { title: 'Again', externalId: 'ext-r' }), planned(2, { title: 'Fits' })], 3);
    expect(res).toMatchObject({ created: 1, skipped: 1 });
    expect(await count()).toBe(3);
  });

  it('imports: an impossible updatedAt (2026-02-30) is a row error, not a rolled-over date', async () => {
    const res = await call('checkImportRows', {
      workspaceId: ws,
      rows: [row(1, { title: 'A', updatedAt: '2026-02-30T00:00:00Z' }), row(2, { title: 'B', updatedAt: '2026-01-01T24:00:00Z' }), row(3, { title: 'C', updatedAt: '2026-01-31T23:59:59+01:00' })],
    });
    const by = new Map(res.checks.map((c) => [c.row, c]));
    expect(by.get(1)!.errors.map((e) => `${e.field}:${e.code}`)).toEqual(['updatedAt:invalid']);
    expect(by.get(2)!.errors.map((e) => `${e.field}:${e.code}`)).toEqual(['updatedAt:invalid']);
    expect(by.get(3)!.errors).toEqual([]);
  });
});
