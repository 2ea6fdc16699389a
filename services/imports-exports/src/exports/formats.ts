/**
 * The export artifacts (DECISIONS §9; docs/exports.md): pure functions from records to bytes.
 * JSON and backup are `service.issue-export` envelopes the import preview accepts as compatible;
 * CSV is RFC 4180 (csv-stringify) with spreadsheet formulas neutralised; Markdown groups tasks by
 * status.
 */
import { stringify } from 'csv-stringify/sync';
import type { ExportFormat } from '@planning/plans';

export const EXPORT_SCHEMA_ID = 'service.issue-export';
/** Dated like the import schema (`YYYY-MM-DD.issue-import.v1`); a later date or major is a new shape. */
export const EXPORT_SCHEMA_VERSION = '2026-11-22.issue-export.v1';
/** The backup is the same envelope with `kind: "backup"` and the workspace's other records. */
export const BACKUP_KIND = 'backup';

/** A task as an export carries it: the fields an import reads back, and a few more. */
export interface ExportIssue {
  id: string;
  workspaceId: string;
  projectId: string;
  title: string;
  description: string;
  status: string;
  priority: string;
  labels: string[];
  milestoneId?: string;
  initiativeId?: string;
  parentId?: string;
  dueDate?: string;
  estimate?: number;
  dependencies: string[];
  acceptanceChecks: { id: string; title: string; done: boolean }[];
  agent: { assignedAgentId?: string };
  createdAt: string;
  updatedAt: string;
  version: number;
}

export interface BackupIssue extends ExportIssue {
  agent: ExportIssue['agent'] & {
    instructions: {
      objective: string;
      constraints: string[];
      expectedOutput: string;
      verification: string[];
      permissions: string[];
      escalation: string;
    };
  };
  comments: Record<string, unknown>[];
  timeEntries: Record<string, unknown>[];
  evidence: Record<string, unknown>[];
}

export interface BackupRecords {
  workspace: { slug: string; name: string; planId: string };
  projects: Record<string, unknown>[];
  milestones: Record<string, unknown>[];
  programs: Record<string, unknown>[];
  initiatives: Record<string, unknown>[];
  issues: BackupIssue[];
}

export interface Artifact {
  bytes: Buffer;
  contentType: string;
  extension: string;
}

export const CONTENT_TYPES: Readonly<Record<ExportFormat, { contentType: string; extension: string }>> = {
  json: { contentType: 'application/json; charset=utf-8', extension: 'json' },
  csv: { contentType: 'text/csv; charset=utf-8; header=present', extension: 'csv' },
  markdown: { contentType: 'text/markdown; charset=utf-8', extension: 'md' },
  backup: { contentType: 'application/json; charset=utf-8', extension: 'backup.json' },
};

function artifact(format: ExportFormat, text: string): Artifact {
  return { bytes: Buffer.from(text, 'utf8'), ...CONTENT_TYPES[format] };
}

export function renderJson(meta: { exportedAt: string; slug: string }, issues: readonly ExportIssue[]): Artifact {
  const body = {
    schemaId: EXPORT_SCHEMA_ID,
    schemaVersion: EXPORT_SCHEMA_VERSION,
    exportedAt: meta.exportedAt,
    workspace: { slug: meta.slug },
    issueCount: issues.length,
    issues,
  };
  return artifact('json', `${JSON.stringify(body, null, 2)}\n`);
}

export function renderBackup(meta: { exportedAt: string }, records: BackupRecords): Artifact {
  const body = {
    schemaId: EXPORT_SCHEMA_ID,
    schemaVersion: EXPORT_SCHEMA_VERSION,
    kind: BACKUP_KIND,
    exportedAt: meta.exportedAt,
    workspace: records.workspace,
    counts: {
      projects: records.projects.length,
      milestones: records.milestones.length,
      programs: records.programs.length,
      initiatives: records.initiatives.length,
      issues: records.issues.length,
      comments: records.issues.reduce((n, i) => n + i.comments.length, 0),
      timeEntries: records.issues.reduce((n, i) => n + i.timeEntries.length, 0),
      evidence: records.issues.reduce((n, i) => n + i.evidence.length, 0),
    },
    projects: records.projects,
    milestones: records.milestones,
    programs: records.programs,
    initiatives: records.initiatives,
    issues: records.issues,
  };
  return artifact('backup', `${JSON.stringify(body, null, 2)}\n`);
}

/** The CSV columns, in order (the header row). */
export const CSV_COLUMNS = [
  'id',
  'workspaceId',
  'projectId',
  'title',
  'status',
  'priority',
  'labels',
  'milestoneId',
  'initiativeId',
  'parentId',
  'dueDate',
  'estimate',
  'dependencies',
  'assignedAgentId',
  'createdAt',
  'updatedAt',
  'description',
] as const;

/** Joins list cells (labels, dependencies). Inside an element it is written `%3B` (and `%` as `%25`). */
export const CSV_LIST_SEPARATOR = ';';

/** The list columns: always quoted, each element encoded and neutralised on its own. */
const CSV_LIST_COLUMNS: ReadonlySet<string> = new Set(['labels', 'dependencies']);

/**
 * What a spreadsheet may run as a formula (OWASP "CSV injection"): `=`, `+`, `-`, `@` and their
 * full-width (U+FF1D, U+FF0B, U+FF0D, U+FF20) and small (U+FE66, U+FE62, U+FE63, U+FE6B) forms,
 * which some spreadsheets fold to ASCII, after any leading white space, control or format
 * characters (line breaks, tabs, U+3000, zero-width ones), which some spreadsheets strip first.
 */
const FORMULA_START = /^[\p{White_Space}\p{Cc}\p{Cf}]*[=+\-@\uFF1D\uFF0B\uFF0D\uFF20\uFE66\uFE62\uFE63\uFE6B]/u;

/**
 * A cell a spreadsheet would run as a formula, or that begins with a tab or carriage return, gets
 * a leading single quote so it shows as text. A cell that itself begins with `'` gets one too, so a
 * reader recovers the original exactly by removing one leading `'` from every cell that has one.
 * Quoting (commas, quotes, line breaks) is left to csv-stringify.
 */
export function neutraliseCell(value: string): string {
  return FORMULA_START.test(value) || /^[\t\r']/.test(value) ? `'${value}` : value;
}

/** One element of a list cell: `%` and `;` percent-encoded (so `;` only separates), then neutralised. */
export function listElement(value: string): string {
  return neutraliseCell(value.replace(/%/g, '%25').replace(/;/g, '%3B'));
}

/** A list cell: its elements encoded and neutralised one by one, joined with `;`. */
export function listCell(values: readonly string[]): string {
  return values.map(listElement).join(CSV_LIST_SEPARATOR);
}

/** The elements of a list cell as written by listCell (what a reader does to get them back). */
export function parseListCell(cell: string): string[] {
  if (cell === '') return [];
  return cell.split(CSV_LIST_SEPARATOR).map((e) => (e.startsWith("'") ? e.slice(1) : e).replace(/%3B/gi, ';').replace(/%25/g, '%'));
}

export function csvRow(issue: ExportIssue): string[] {
  const cells: Record<(typeof CSV_COLUMNS)[number], string> = {
    id: issue.id,
    workspaceId: issue.workspaceId,
    projectId: issue.projectId,
    title: issue.title,
    status: issue.status,
    priority: issue.priority,
    labels: listCell(issue.labels),
    milestoneId: issue.milestoneId ?? '',
    initiativeId: issue.initiativeId ?? '',
    parentId: issue.parentId ?? '',
    dueDate: issue.dueDate ?? '',
    estimate: issue.estimate === undefined ? '' : String(issue.estimate),
    dependencies: listCell(issue.dependencies),
    assignedAgentId: issue.agent.assignedAgentId ?? '',
    createdAt: issue.createdAt,
    updatedAt: issue.updatedAt,
    description: issue.description,
  };
  return CSV_COLUMNS.map((c) => (CSV_LIST_COLUMNS.has(c) ? cells[c] : neutraliseCell(cells[c])));
}

/** RFC 4180: a header row, CRLF line ends, fields with commas, quotes or line breaks quoted. */
export function renderCsv(issues: readonly ExportIssue[]): Artifact {
  const records = issues.map((issue) => {
    const row = csvRow(issue);
    return Object.fromEntries(CSV_COLUMNS.map((c, i) => [c, row[i]!]));
  });
  const text = stringify(records, {
    header: true,
    columns: [...CSV_COLUMNS],
    record_delimiter: 'windows',
    quoted_match: /^\s|\s$/,
    // List cells are always quoted: a spreadsheet that splits on `;` still sees one cell.
    cast: { string: (value, context) => (context.header || !CSV_LIST_COLUMNS.has(String(context.column)) ? value : { value, quoted: true }) },
  });
  return artifact('csv', text);
}

/** The order of status groups (DECISIONS §5); unknown statuses follow in name order. */
export const STATUS_ORDER = ['backlog', 'ready', 'in-progress', 'in-review', 'blocked', 'done', 'cancelled'] as const;

const STATUS_TITLES: Readonly<Record<string, string>> = {
  backlog: 'Backlog',
  ready: 'Ready',
  'in-progress': 'In progress',
  'in-review': 'In review',
  blocked: 'Blocked',
  done: 'Done',
  cancelled: 'Cancelled',
};

/**
 * What GitHub-flavoured Markdown would turn into a link by itself (autolinks): URLs with a scheme,
 * `www.` addresses and e-mail addresses. They are shown in code spans, where nothing is linked.
 */
const AUTOLINKABLE = /[a-z][a-z0-9+.-]*:\/\/[^\s<>]*|\bwww\.[^\s<>]*|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\bmailto:[^\s<>]*/giu;

/** Text as a code span: a fence longer than any run of backticks in it, padded if it touches one. */
function codeSpan(text: string): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
}

function escapePlain(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>~&]/g, (c) => `\\${c}`);
}

/**
 * Task text is the user's own: escape what Markdown (and the HTML it may carry) would interpret,
 * fold line breaks, and put what GFM would autolink in code spans, so a title can neither start a
 * heading nor inject a link (written or bare) or a tag.
 */
export function escapeMarkdown(text: string): string {
  const folded = text.replace(/[\r\n]+/g, ' ');
  let out = '';
  let at = 0;
  for (const match of folded.matchAll(AUTOLINKABLE)) {
    out += escapePlain(folded.slice(at, match.index)) + codeSpan(match[0]);
    at = match.index + match[0].length;
  }
  return out + escapePlain(folded.slice(at));
}

/** Tasks grouped by status (in workflow order), each group in the order given (the search's sort). */
export function groupByStatus(issues: readonly ExportIssue[]): { status: string; issues: ExportIssue[] }[] {
  const groups = new Map<string, ExportIssue[]>();
  for (const issue of issues) {
    const list = groups.get(issue.status) ?? [];
    list.push(issue);
    groups.set(issue.status, list);
  }
  const rank = (s: string) => {
    const i = (STATUS_ORDER as readonly string[]).indexOf(s);
    return i === -1 ? STATUS_ORDER.length : i;
  };
  return [...groups.entries()]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([status, list]) => ({ status, issues: list }));
}

export function renderMarkdown(meta: { exportedAt: string; slug: string }, issues: readonly ExportIssue[]): Artifact {
  const lines: string[] = [
    `# Issues of ${escapeMarkdown(meta.slug)}`,
    '',
    `Exported ${meta.exportedAt} · ${issues.length} ${issues.length === 1 ? 'issue' : 'issues'} · schema ${EXPORT_SCHEMA_VERSION}`,
  ];
  for (const group of groupByStatus(issues)) {
    lines.push('', `## ${STATUS_TITLES[group.status] ?? escapeMarkdown(group.status)} (${group.issues.length})`, '');
    for (const issue of group.issues) {
      const facts = [`\`${issue.id}\``, `priority ${issue.priority}`];
      if (issue.dueDate) facts.push(`due ${issue.dueDate}`);
      if (issue.estimate !== undefined) facts.push(`estimate ${issue.estimate}`);
      if (issue.agent.assignedAgentId) facts.push(`agent ${escapeMarkdown(issue.agent.assignedAgentId)}`);
      if (issue.labels.length > 0) facts.push(`labels ${issue.labels.map(escapeMarkdown).join(', ')}`);
      if (issue.dependencies.length > 0) facts.push(`depends on ${issue.dependencies.map((d) => `\`${d}\``).join(', ')}`);
      lines.push(`- ${escapeMarkdown(issue.title)} — ${facts.join(' · ')}`);
    }
  }
  lines.push('');
  return artifact('markdown', lines.join('\n'));
}
