import type { ExportEntry } from '@planning/proto/planning/exports/v1/exports_pb';
import { component } from '../openapi.js';

/** An export history entry on the wire (API document §2 "Export history entry", DECISIONS §9). */
export const exportEntrySchema = component('ExportHistoryEntry', {
  type: 'object',
  required: [
    'id',
    'format',
    'redacted',
    'retentionDays',
    'schemaVersion',
    'createdAt',
    'expiresAt',
    'filters',
    'sha256',
    'bytes',
    'issueCount',
    'auditEventIds',
  ],
  properties: {
    id: { type: 'string' },
    workspaceId: { type: 'string' },
    format: { type: 'string', enum: ['json', 'csv', 'markdown', 'backup'] },
    redacted: { type: 'boolean', enum: [true] },
    retentionDays: { type: 'number' },
    schemaVersion: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
    expiresAt: { type: 'string', format: 'date-time' },
    filters: {
      type: 'object',
      description: 'The filters used: ids, labels and agent ids as short hashes (`h:` + 12 hex), `q` as `[redacted]`, enum values as given.',
      additionalProperties: { type: 'array', items: { type: 'string' } },
    },
    sha256: { type: 'string', description: "Hex SHA-256 of the artifact's bytes." },
    bytes: { type: 'integer' },
    issueCount: { type: 'integer' },
    auditEventIds: { type: 'array', items: { type: 'string' } },
  },
});

export function exportEntryJson(e: ExportEntry) {
  return {
    id: e.id,
    workspaceId: e.workspaceId,
    format: e.format,
    redacted: e.redacted,
    retentionDays: e.retentionDays,
    schemaVersion: e.schemaVersion,
    createdAt: e.createdAt,
    expiresAt: e.expiresAt,
    filters: Object.fromEntries(e.filters.map((f) => [f.name, [...f.values]])),
    sha256: e.sha256,
    bytes: Number(e.bytes),
    issueCount: e.issueCount,
    auditEventIds: [...e.auditEventIds],
  };
}
