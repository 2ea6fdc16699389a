import type { EventEnvelope } from '@planning/bus';
import { createEmbeddedStore } from '@planning/store';
import { describe, expect, it } from 'vitest';
import { AuditEventRepository } from './audit-events.js';
import { AuditWriter } from './audit-writer.js';

const event = (n: number): EventEnvelope =>
  ({
    id: `evt_${String(n).padStart(26, '0')}`,
    type: 'issues.task.updated',
    subject: 'planning.issues.task.updated',
    source: 'issues',
    occurredAt: new Date(Date.UTC(2026, 10, 26, 12, 0, n)).toISOString(),
    workspaceId: 'ws_1',
    actor: { type: 'user', id: 'usr_1' },
    data: { subject: { type: 'task', id: `tsk_${n}` }, changedFields: ['status'], title: 'never stored' },
  }) as unknown as EventEnvelope;

describe('audit: batched writes', () => {
  it('recordMany stores every event once, also when the batch holds events already recorded', async () => {
    const store = createEmbeddedStore();
    const repo = await AuditEventRepository.open(store);
    expect(await repo.record(event(3))).toBe(true);
    // 3 is a redelivery in the middle of the batch: the events after it must still be stored.
    await repo.recordMany([event(1), event(2), event(3), event(4), event(5)]);
    await repo.recordMany([event(5), event(6)]);
    const stored = await repo.list({ all: true, workspaceIds: [] }, { limit: 50 });
    expect(stored.map((r) => r._id).sort()).toEqual([1, 2, 3, 4, 5, 6].map((n) => event(n).id));
    expect(JSON.stringify(stored)).not.toContain('never stored');
    await store.close();
  });

  it('the writer turns the deliveries of one turn into one batch, and settles each caller with it', async () => {
    const batches: string[][] = [];
    let fail = false;
    const repo = {
      async recordMany(events: readonly EventEnvelope[]) {
        batches.push(events.map((e) => e.id));
        if (fail) throw new Error('store unavailable');
      },
    } as unknown as AuditEventRepository;
    const writer = new AuditWriter(repo, 4);
    // Six at once with batches of at most 4: one full batch at once, the rest on the next turn.
    await Promise.all([1, 2, 3, 4, 5, 6].map((n) => writer.record(event(n))));
    expect(batches).toEqual([[1, 2, 3, 4].map((n) => event(n).id), [5, 6].map((n) => event(n).id)]);
    // A batch that cannot be written rejects every caller in it (the bus redelivers them).
    fail = true;
    const results = await Promise.allSettled([writer.record(event(7)), writer.record(event(8))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(batches).toHaveLength(3);
  });

  it('with gatherMs, events handed in over several turns within the window are one batch; a full batch does not wait', async () => {
    const batches: string[][] = [];
    const repo = {
      async recordMany(events: readonly EventEnvelope[]) {
        batches.push(events.map((e) => e.id));
      },
    } as unknown as AuditEventRepository;
    const writer = new AuditWriter(repo, 4, 50);
    const first = writer.record(event(1));
    await new Promise((resolve) => setImmediate(resolve));
    const second = writer.record(event(2));
    await new Promise((resolve) => setTimeout(resolve, 5));
    // Two turns later, still within the window: nothing written yet.
    expect(batches).toEqual([]);
    await Promise.all([first, second]);
    expect(batches).toEqual([[1, 2].map((n) => event(n).id)]);
    // A writer whose window outlasts the test: a full batch is written at once all the same (were it
    // to wait for the window, the test would time out).
    const patient = new AuditWriter(repo, 4, 600_000);
    await Promise.all([3, 4, 5, 6].map((n) => patient.record(event(n))));
    expect(batches).toHaveLength(2);
    // The full batch's window timer is gone: the next events wait for their own batch to fill.
    const later = [7, 8].map((n) => patient.record(event(n)));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(batches).toHaveLength(2);
    await Promise.all([...later, ...[9, 10].map((n) => patient.record(event(n)))]);
    expect(batches.at(-1)).toEqual([7, 8, 9, 10].map((n) => event(n).id));
  });

  it('races: concurrent batches holding the same events store each once', async () => {
    const store = createEmbeddedStore();
    const repo = await AuditEventRepository.open(store);
    const ids = Array.from({ length: 40 }, (_, i) => i + 1);
    // Two writers (as two consumers would) get overlapping deliveries at once.
    const a = new AuditWriter(repo);
    const b = new AuditWriter(repo);
    await Promise.all([...ids.map((n) => a.record(event(n))), ...ids.filter((n) => n % 3 === 0).map((n) => b.record(event(n)))]);
    const stored = await repo.list({ all: true, workspaceIds: [] }, { limit: 100 });
    expect(stored).toHaveLength(40);
    expect(await repo.count({ all: true, workspaceIds: [] })).toBe(40);
    await store.close();
  });
});
