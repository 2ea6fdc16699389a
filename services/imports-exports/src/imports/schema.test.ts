import { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import { EXPORT_SCHEMA_VERSION } from '../exports/formats.js';
import {
  artifactOf,
  canonicalJson,
  detectSchema,
  IMPORT_SCHEMA_VERSION,
  normalizeRows,
  requestFingerprint,
  ROW_FIELDS,
  ROW_SCHEMA,
  targetWorkspace,
} from './schema.js';

const date = IMPORT_SCHEMA_VERSION.slice(0, 10);
const env = (schemaVersion: string, issues: unknown = []) => ({ schemaId: 'service.issue-import', schemaVersion, issues });

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServiceError) return `${err.code}:${String(err.details.field)}`;
    throw err;
  }
  return undefined;
}

describe('imports: schema status detection', () => {
  it('imports: the current version is a dated v1 constant', () => {
    expect(IMPORT_SCHEMA_VERSION).toMatch(/^\d{4}-\d{2}-\d{2}\.issue-import\.v1$/);
  });

  it('imports: the current envelope is current, an older date of the same major compatible', () => {
    expect(detectSchema(env(IMPORT_SCHEMA_VERSION, [{}])).status).toBe('current');
    expect(detectSchema(env('2020-01-01.issue-import.v1', [{}]))).toMatchObject({ status: 'compatible', schemaVersion: '2020-01-01.issue-import.v1', rowCount: 1 });
  });

  it('imports: a later date or another major is unsupported and its rows are not returned', () => {
    for (const v of ['2999-12-31.issue-import.v1', `${date}.issue-import.v2`, '2020-01-01.issue-import.v0']) {
      const d = detectSchema(env(v, [1, 2, 3]));
      expect(d.status).toBe('unsupported');
      expect(d.rows).toBeUndefined();
      expect(d.rowCount).toBe(3);
    }
    // Not even the issues array is required of an unsupported payload.
    expect(detectSchema(env('2999-12-31.issue-import.v1', 'whatever')).status).toBe('unsupported');
  });

  it('imports: an export envelope is compatible unless it is a later export version', () => {
    const exp = (v: string) => ({ schemaId: 'service.issue-export', schemaVersion: v, issues: [] });
    expect(detectSchema(exp(EXPORT_SCHEMA_VERSION)).status).toBe('compatible');
    expect(detectSchema(exp('2020-01-01.issue-export.v1')).status).toBe('compatible');
    expect(detectSchema(exp('2999-01-01.issue-export.v1')).status).toBe('unsupported');
    expect(detectSchema(exp(`${EXPORT_SCHEMA_VERSION.slice(0, 10)}.issue-export.v2`)).status).toBe('unsupported');
  });

  it('imports: a bare array is legacy', () => {
    expect(detectSchema([{ title: 'x' }])).toMatchObject({ status: 'legacy', schemaVersion: null, rowCount: 1 });
  });

  it('imports: malformed envelopes are 400 naming the field', () => {
    expect(codeOf(() => detectSchema('text'))).toBe('invalid-input:payload');
    expect(codeOf(() => detectSchema({ schemaId: 'other', schemaVersion: IMPORT_SCHEMA_VERSION, issues: [] }))).toBe('invalid-input:payload.schemaId');
    expect(codeOf(() => detectSchema(env('v1')))).toBe('invalid-input:payload.schemaVersion');
    expect(codeOf(() => detectSchema(env(IMPORT_SCHEMA_VERSION, {})))).toBe('invalid-input:payload.issues');
  });
});

describe('imports: rows', () => {
  it('imports: the row JSON Schema lists exactly the row fields', () => {
    expect(Object.keys(ROW_SCHEMA.properties).sort()).toEqual([...ROW_FIELDS].sort());
  });

  it('imports: unknown fields are errors in the current schema and dropped otherwise; non-objects are errors', () => {
    const raw = [{ title: 'a', colour: 'red', 'has space': 1 }, 'x'];
    const current = normalizeRows(raw, 'current', 'ws_1');
    expect(current.errors).toEqual([
      { row: 1, field: 'colour', code: 'unknown-field' },
      { row: 1, field: 'row', code: 'unknown-field' },
      { row: 2, field: 'row', code: 'invalid' },
    ]);
    const legacy = normalizeRows(raw, 'legacy', 'ws_1');
    expect(legacy.errors).toEqual([{ row: 2, field: 'row', code: 'invalid' }]);
    expect(legacy.rows[0]?.fields).toEqual({ title: 'a', workspaceId: 'ws_1' });
  });

  it('imports: rows of another workspace are errors; duplicated ids and externalIds are conflicts on every copy', () => {
    const res = normalizeRows(
      [
        { id: 'iss_1', workspaceId: 'ws_1' },
        { id: 'iss_1' },
        { externalId: 'e', workspaceId: 'ws_2' },
        { externalId: 'e' },
        { id: 'iss_2' },
      ],
      'current',
      'ws_1',
    );
    expect(res.errors).toEqual([{ row: 3, field: 'workspaceId', code: 'other-workspace' }]);
    expect(res.conflicts).toEqual([
      { row: 1, field: 'id', code: 'duplicate-id' },
      { row: 2, field: 'id', code: 'duplicate-id' },
      { row: 3, field: 'externalId', code: 'duplicate-external-id' },
      { row: 4, field: 'externalId', code: 'duplicate-external-id' },
    ]);
  });

  it('imports: errors never carry row content', () => {
    const res = normalizeRows([{ title: 'TOP SECRET', 'TOP SECRET KEY WITH SPACES': 1 }], 'current', 'ws_1');
    expect(JSON.stringify(res.errors)).not.toContain('SECRET');
  });

  it('imports: the target workspace is the body\'s, else the one every row names', () => {
    expect(targetWorkspace('ws_b', [{ workspaceId: 'ws_a' }])).toBe('ws_b');
    expect(targetWorkspace(undefined, [{ workspaceId: 'ws_a' }, { workspaceId: 'ws_a' }, {}])).toBe('ws_a');
    expect(codeOf(() => targetWorkspace(undefined, [{ workspaceId: 'ws_a' }, { workspaceId: 'ws_b' }]))).toBe('invalid-input:workspaceId');
    expect(codeOf(() => targetWorkspace(undefined, [{}]))).toBe('invalid-input:workspaceId');
    expect(targetWorkspace(undefined, [{}], 'ws_token')).toBe('ws_token');
  });
});

describe('imports: fingerprints', () => {
  it('imports: canonical JSON ignores key order at every level', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}');
  });

  it('imports: the same body in another key order has the same fingerprint; any change another', () => {
    const a = requestFingerprint({ plan: 'pro', format: 'json', payload: { issues: [{ title: 't', projectId: 'p' }], schemaId: 's' } });
    const b = requestFingerprint({ format: 'json', plan: 'pro', payload: { schemaId: 's', issues: [{ projectId: 'p', title: 't' }] } });
    expect(a).toBe(b);
    expect(requestFingerprint({ plan: 'pro', format: 'json', payload: { schemaId: 's', issues: [{ projectId: 'p', title: 'u' }] } })).not.toBe(a);
    expect(requestFingerprint({ plan: 'pro', format: 'json', workspaceId: 'ws', payload: { schemaId: 's', issues: [{ projectId: 'p', title: 't' }] } })).not.toBe(a);
    // Row order matters: it is the row numbering.
    expect(requestFingerprint({ plan: 'pro', format: 'json', payload: [1, 2] })).not.toBe(requestFingerprint({ plan: 'pro', format: 'json', payload: [2, 1] }));
  });

  it('imports: the artifact hashes and measures the canonical payload', () => {
    const art = artifactOf({ b: 'é', a: 1 }, 0);
    expect(art.bytes).toBe(Buffer.byteLength('{"a":1,"b":"é"}'));
    expect(art.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(artifactOf({ a: 1, b: 'é' }, 0)).toEqual(art);
  });
});
