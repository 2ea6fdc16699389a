/**
 * Importing a DATA_DIR of the former embedded engine. The input is a real folder that engine
 * wrote (`fixtures/legacy-data-dir`, see its PRODUCED_BY): a snapshot plus journal lines after
 * it (updates, a delete, a transaction), a torn last journal line, and a journal-only folder.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DuplicateKeyError } from '../port.js';
import { importLegacyStore, readLegacyStore } from './legacy-import.js';
import { createSqliteStore } from './sqlite-store.js';

const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'legacy-data-dir');
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function copyOfFixture(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'legacy-import-'));
  dirs.push(dir);
  fs.cpSync(fixture, dir, { recursive: true });
  return dir;
}

describe('old DATA_DIR import', () => {
  it('import: every document and index of the old files arrives, then the old files are kept as a backup', async () => {
    const dataDir = copyOfFixture();
    const dir = path.join(dataDir, 'issues');
    const target = path.join(dir, 'issues.sqlite');
    const result = await importLegacyStore({ dir, name: 'issues', target, now: new Date('2026-01-02T03:04:05Z') });
    expect(result).toMatchObject({ imported: true, collections: 3, documents: 299 + 3 + 1 });
    const backup = path.join(dir, 'pre-sqlite-backup-2026-01-02T03-04-05-000Z');
    expect(result.backup).toBe(backup);
    expect(fs.readdirSync(backup).sort()).toEqual(['issues.journal', 'issues.snapshot']);
    expect(fs.readdirSync(dir).sort()).toEqual(['issues.sqlite', 'pre-sqlite-backup-2026-01-02T03-04-05-000Z']);

    let now = new Date('2025-01-01T00:00:00Z');
    const store = createSqliteStore({ path: target, clock: () => now });
    try {
      const tasks = store.collection('tasks');
      expect(await tasks.countDocuments({})).toBe(299);
      expect(await tasks.findOne({ _id: 'iss_0003' })).toBeNull();
      expect(await tasks.findOne({ _id: 'torn' })).toBeNull();
      expect(await tasks.findOne({ _id: 'iss_0002' }, { projection: { title: 1, status: 1 } })).toEqual({ _id: 'iss_0002', title: 'Renamed', status: 'done' });
      expect((await tasks.findOne({ _id: 'iss_0004' }))?.claim).toBe('clm_3');
      const weird = await tasks.findOne({ _id: 'iss_0001' });
      expect(weird?.createdAt).toEqual(new Date(Date.UTC(2025, 0, 1) + 60_000));
      expect(weird?.weird).toEqual({ nan: Number.NaN, inf: Infinity, neg: -Infinity, nested: [[1, 2], { deep: new Date(0) }] });
      expect((await tasks.findOne({ _id: 'iss_0007' }))?.estimate).toBeNull();
      // The indexes came along and answer queries.
      expect(await tasks.countDocuments({ workspaceId: 'ws_a', labels: 'ui' })).toBe(
        Array.from({ length: 300 }, (_, i) => i).filter((i) => i !== 3 && i % 3 !== 0 && i % 5 === 0).length,
      );
      const page = await tasks.explain({ workspaceId: 'ws_b' }, { sort: { 'sortKeys.priority': 1 }, limit: 5 });
      expect(page).toMatchObject({ plan: 'IXSCAN', index: 'ws_priority', inMemorySort: false, nReturned: 5 });
      expect((await tasks.find({ searchText: { $regex: '検索' } })).length).toBeGreaterThan(0);
      // The partial unique index still decides races.
      const claims = store.collection('claims');
      expect(await claims.countDocuments({ status: 'active' })).toBe(2);
      await expect(claims.insertOne({ _id: 'clm_x', taskId: 'iss_0001', status: 'active' })).rejects.toBeInstanceOf(DuplicateKeyError);
      await claims.insertOne({ _id: 'clm_y', taskId: 'iss_0001', status: 'released' });
      // So does the TTL index.
      now = new Date('2025-01-03T00:00:00Z');
      expect(await store.sweepExpired()).toBe(1);
      expect(await store.collection('import_previews').countDocuments({})).toBe(0);
    } finally {
      await store.close();
    }

    // Once imported, never again.
    expect(await importLegacyStore({ dir, name: 'issues', target })).toEqual({ imported: false, collections: 0, documents: 0 });
  });

  it('import: a journal-only folder imports too; a folder already imported but not yet moved aside is only moved', async () => {
    const dataDir = copyOfFixture();
    const dir = path.join(dataDir, 'audit');
    const target = path.join(dir, 'audit.sqlite');
    expect(await importLegacyStore({ dir, name: 'audit', target })).toMatchObject({ imported: true, collections: 1, documents: 1 });
    const store = createSqliteStore({ path: target });
    try {
      expect(await store.collection('audit_events').findOne({ _id: 'evt_1' })).toEqual({ _id: 'evt_1', type: 'auth.login', at: new Date(Date.UTC(2025, 0, 1)) });
    } finally {
      await store.close();
    }
    // A crash between the rename of the new file and moving the old ones: the next start only moves them.
    const issues = path.join(dataDir, 'issues');
    fs.writeFileSync(path.join(issues, 'issues.sqlite'), '');
    const moved = await importLegacyStore({ dir: issues, name: 'issues', target: path.join(issues, 'issues.sqlite') });
    expect(moved.imported).toBe(false);
    expect(fs.readdirSync(moved.backup as string).sort()).toEqual(['issues.journal', 'issues.snapshot']);
  });

  it('import: a crash during an import leaves the old files as they were, and the next start imports again', async () => {
    const dataDir = copyOfFixture();
    const dir = path.join(dataDir, 'issues');
    const target = path.join(dir, 'issues.sqlite');
    // What an interrupted import leaves behind: a partial database under its temporary name.
    fs.writeFileSync(`${target}.importing`, 'half a database');
    const result = await importLegacyStore({ dir, name: 'issues', target });
    expect(result).toMatchObject({ imported: true, documents: 303 });
    expect(fs.existsSync(`${target}.importing`)).toBe(false);
  });

  it('import: a bad line before the end of the journal is corruption: nothing is imported or moved', async () => {
    const dataDir = copyOfFixture();
    const dir = path.join(dataDir, 'issues');
    const journal = path.join(dir, 'issues.journal');
    const lines = fs.readFileSync(journal, 'utf8').split('\n');
    lines[1] = '{not json';
    fs.writeFileSync(journal, lines.join('\n'));
    expect(() => readLegacyStore(dir, 'issues')).toThrow(/corrupt at line 2/);
    await expect(importLegacyStore({ dir, name: 'issues', target: path.join(dir, 'issues.sqlite') })).rejects.toThrow(/corrupt/);
    expect(fs.readdirSync(dir).sort()).toEqual(['issues.journal', 'issues.snapshot']);
  });
});
