/**
 * Guidance rules: the workspace customization (view modes, presets, rules, evidence policy,
 * handoff packet) and the working standards with their defaults and validation, the admin setup
 * path computed from a workspace's records, and knowledge document search (matching, ranking,
 * snippets). Pure: the repository stores what these functions return.
 */
import { AGENT_ID_PATTERN } from '@planning/access';
import { invalidInput } from '@planning/errors';
import {
  LIMITS,
  normalizeForSearch,
  optionalId,
  validateEnum,
  validateLabels,
  validateName,
  validateText,
  validateTextList,
  validateUrl,
} from './fields.js';
import { allowedMoves, TASK_STATUSES } from './task-status.js';
import { PRIORITIES } from './tasks.js';

export const VIEW_MODE_IDS = ['cards', 'list', 'tags', 'swimlanes'] as const;
export type ViewModeId = (typeof VIEW_MODE_IDS)[number];
export const VIEW_MODE_LABELS: Readonly<Record<ViewModeId, string>> = { cards: 'Cards', list: 'List', tags: 'Tags', swimlanes: 'Swimlanes' };

export const GROUP_BY = ['status', 'priority', 'label', 'agent', 'project', 'milestone'] as const;
export const SORTS = ['priority', 'updatedAt', 'createdAt', 'dueDate', 'title'] as const;
export const DIRECTIONS = ['asc', 'desc'] as const;
export const EVIDENCE_KINDS = ['link', 'log', 'test-result', 'artifact', 'note'] as const;
export const HANDOFF_TARGETS = ['comment', 'evidence'] as const;
export const SEVERITIES = ['must', 'should'] as const;

export const GUIDANCE_LIMITS = {
  presets: 20,
  rules: 30,
  ruleText: 1_000,
  sections: 12,
  template: 5_000,
  standardItems: 30,
  standardItem: 500,
  summary: 2_000,
  documentBody: 50_000,
  documentTags: 20,
  path: 500,
  /** Documents a search ranks in one workspace (newest first beyond it). */
  searchScan: 5_000,
  snippet: 240,
  contextDocuments: 20,
  launchBlockers: 50,
} as const;

export interface ViewFilters {
  status: string[];
  priority: string[];
  labels: string[];
  assignedAgentId?: string;
  projectId?: string;
}

export interface ViewPreset {
  id: string;
  name: string;
  viewMode: ViewModeId;
  filters: ViewFilters;
  groupBy?: (typeof GROUP_BY)[number];
  sort?: (typeof SORTS)[number];
  direction?: (typeof DIRECTIONS)[number];
}

export interface WorkspaceRule {
  id: string;
  title: string;
  description: string;
  severity: (typeof SEVERITIES)[number];
}

export interface EvidencePolicy {
  requiredForDone: boolean;
  minimumItems: number;
  acceptedKinds: string[];
  requireCheckCoverage: boolean;
}

export interface HandoffPacket {
  requiredSections: string[];
  template: string;
  postAs: (typeof HANDOFF_TARGETS)[number];
}

/** What an admin stores; everything else in the customization is computed. */
export interface CustomizationSettings {
  enabledViewModes: ViewModeId[];
  defaultViewMode: ViewModeId;
  viewPresets: ViewPreset[];
  workspaceRules: WorkspaceRule[];
  evidencePolicy: EvidencePolicy;
  handoffPacket: HandoffPacket;
}

export const CUSTOMIZATION_FIELDS = ['enabledViewModes', 'defaultViewMode', 'viewPresets', 'workspaceRules', 'evidencePolicy', 'handoffPacket'] as const;
export type CustomizationField = (typeof CUSTOMIZATION_FIELDS)[number];

const HANDOFF_TEMPLATE = [
  '## Summary',
  'What changed and why, in two or three sentences.',
  '## Changes',
  '- Files, endpoints or records touched.',
  '## Verification',
  '- Commands run and their results; evidence ids.',
  '## Risks',
  '- What could break, and how to roll back.',
  '## Next steps',
  '- What is left, and for whom.',
].join('\n');

/** The customization of a workspace that never changed it. */
export function defaultCustomization(): CustomizationSettings {
  return {
    enabledViewModes: [...VIEW_MODE_IDS],
    defaultViewMode: 'cards',
    viewPresets: [
      { id: 'ready-queue', name: 'Ready queue', viewMode: 'list', filters: { status: ['ready'], priority: [], labels: [] }, sort: 'priority', direction: 'desc' },
      { id: 'in-flight', name: 'In flight', viewMode: 'swimlanes', filters: { status: ['in-progress', 'in-review', 'blocked'], priority: [], labels: [] }, groupBy: 'agent' },
      { id: 'launch-blockers', name: 'Launch blockers', viewMode: 'cards', filters: { status: [], priority: [], labels: ['launch-blocker'] }, sort: 'priority', direction: 'desc' },
      { id: 'by-label', name: 'By label', viewMode: 'tags', filters: { status: [], priority: [], labels: [] }, groupBy: 'label' },
    ],
    workspaceRules: [],
    evidencePolicy: { requiredForDone: true, minimumItems: 1, acceptedKinds: [...EVIDENCE_KINDS], requireCheckCoverage: true },
    handoffPacket: { requiredSections: ['summary', 'changes', 'verification', 'risks', 'next-steps'], template: HANDOFF_TEMPLATE, postAs: 'comment' },
  };
}

/**
 * The rules the service itself enforces for every caller (REST, MCP, internal), listed so agents
 * see them beside the workspace's own. Derived from the rules' code where they live.
 */
export function serviceRules(): { id: string; title: string; description: string; severity: 'must' }[] {
  const moves = TASK_STATUSES.map((s) => `${s} → ${allowedMoves(s).join(', ')}`).join('; ');
  return [
    { id: 'status-moves', title: 'Allowed status moves', description: `Other moves are refused (409 invalid-transition): ${moves}.`, severity: 'must' },
    { id: 'claim-to-start', title: 'Claim to start', description: 'An agent starts a ready task by claiming it; one active claim per task and per agent; claims expire unless renewed by a status post.', severity: 'must' },
    { id: 'dependencies-first', title: 'Dependencies first', description: 'A task with open dependencies cannot be claimed (409 dependencies-open).', severity: 'must' },
    { id: 'assigned-agent', title: 'Assigned agent', description: 'A task assigned to another agent cannot be claimed by you (403).', severity: 'must' },
    { id: 'scoped-tokens', title: 'Scoped tokens', description: 'Writes need issues:write and agents:execute; reads need issues:read; a token sees only its workspace.', severity: 'must' },
    { id: 'plan-quotas', title: 'Plan quotas', description: "Agent runs, API requests, imports and exports count against the workspace's monthly plan quotas (403 quota-exceeded).", severity: 'must' },
  ];
}

// ---- validation ----------------------------------------------------------------------------

const SLUG = /^[a-z0-9][a-z0-9-]{0,39}$/;

function validateSlugId(value: unknown, field: string): string {
  if (typeof value !== 'string' || !SLUG.test(value)) {
    throw invalidInput(field, `'${field}' must be 1 to 40 lower-case letters, digits and dashes`);
  }
  return value;
}

function objectAt(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidInput(field, `'${field}' must be an object`);
  return value as Record<string, unknown>;
}

function listAt(value: unknown, field: string, max: number): unknown[] {
  if (!Array.isArray(value)) throw invalidInput(field, `'${field}' must be an array`);
  if (value.length > max) throw invalidInput(field, `'${field}' must hold at most ${max} items`);
  return value;
}

function uniqueIds<T extends { id: string }>(items: readonly T[], field: string): T[] {
  const seen = new Set<string>();
  items.forEach((item, i) => {
    if (seen.has(item.id)) throw invalidInput(`${field}[${i}].id`, `'${field}[${i}].id' repeats '${item.id}'`);
    seen.add(item.id);
  });
  return [...items];
}

export function validateViewModes(value: unknown, field = 'enabledViewModes'): ViewModeId[] {
  const list = listAt(value, field, VIEW_MODE_IDS.length);
  if (list.length === 0) throw invalidInput(field, `'${field}' must enable at least one view mode`);
  const out: ViewModeId[] = [];
  list.forEach((v, i) => {
    const mode = validateEnum(v, VIEW_MODE_IDS, `${field}[${i}]`);
    if (!out.includes(mode)) out.push(mode);
  });
  // Stored in the canonical order, so the same set is the same setting.
  return VIEW_MODE_IDS.filter((m) => out.includes(m));
}

function validateStringEnumList(value: unknown, allowed: readonly string[], field: string): string[] {
  const list = value === undefined || value === null ? [] : listAt(value, field, allowed.length);
  const out: string[] = [];
  list.forEach((v, i) => {
    const item = validateEnum(v, allowed, `${field}[${i}]`);
    if (!out.includes(item)) out.push(item);
  });
  return out;
}

export function validateViewPresets(value: unknown, field = 'viewPresets'): ViewPreset[] {
  const list = listAt(value, field, GUIDANCE_LIMITS.presets);
  const presets = list.map((raw, i) => {
    const at = `${field}[${i}]`;
    const p = objectAt(raw, at);
    const f = p.filters === undefined || p.filters === null ? {} : objectAt(p.filters, `${at}.filters`);
    const filters: ViewFilters = {
      status: validateStringEnumList(f.status, TASK_STATUSES, `${at}.filters.status`),
      priority: validateStringEnumList(f.priority, PRIORITIES, `${at}.filters.priority`),
      labels: f.labels === undefined || f.labels === null ? [] : validateLabels(f.labels, `${at}.filters.labels`),
    };
    if (f.assignedAgentId !== undefined && f.assignedAgentId !== null && f.assignedAgentId !== '') {
      if (typeof f.assignedAgentId !== 'string' || !AGENT_ID_PATTERN.test(f.assignedAgentId)) {
        throw invalidInput(`${at}.filters.assignedAgentId`, `'${at}.filters.assignedAgentId' is not a valid agent id`);
      }
      filters.assignedAgentId = f.assignedAgentId;
    }
    const projectId = optionalId(f.projectId, `${at}.filters.projectId`);
    if (projectId) filters.projectId = projectId;
    const preset: ViewPreset = {
      id: validateSlugId(p.id, `${at}.id`),
      name: validateName(p.name, `${at}.name`, LIMITS.name),
      viewMode: validateEnum(p.viewMode, VIEW_MODE_IDS, `${at}.viewMode`),
      filters,
    };
    if (p.groupBy !== undefined && p.groupBy !== null && p.groupBy !== '') preset.groupBy = validateEnum(p.groupBy, GROUP_BY, `${at}.groupBy`);
    if (p.sort !== undefined && p.sort !== null && p.sort !== '') preset.sort = validateEnum(p.sort, SORTS, `${at}.sort`);
    if (p.direction !== undefined && p.direction !== null && p.direction !== '') preset.direction = validateEnum(p.direction, DIRECTIONS, `${at}.direction`);
    return preset;
  });
  return uniqueIds(presets, field);
}

export function validateWorkspaceRules(value: unknown, field = 'workspaceRules'): WorkspaceRule[] {
  const list = listAt(value, field, GUIDANCE_LIMITS.rules);
  const taken = new Set(serviceRules().map((r) => r.id));
  const rules = list.map((raw, i) => {
    const at = `${field}[${i}]`;
    const r = objectAt(raw, at);
    const id = validateSlugId(r.id, `${at}.id`);
    if (taken.has(id)) throw invalidInput(`${at}.id`, `'${at}.id' '${id}' is the id of a service rule`);
    return {
      id,
      title: validateName(r.title, `${at}.title`, LIMITS.title),
      description: validateText(r.description ?? '', `${at}.description`, GUIDANCE_LIMITS.ruleText).trim(),
      severity: r.severity === undefined || r.severity === null || r.severity === '' ? 'should' : validateEnum(r.severity, SEVERITIES, `${at}.severity`),
    } satisfies WorkspaceRule;
  });
  return uniqueIds(rules, field);
}

export function validateEvidencePolicy(value: unknown, field = 'evidencePolicy'): EvidencePolicy {
  const p = objectAt(value, field);
  const minimum = p.minimumItems ?? 0;
  if (typeof minimum !== 'number' || !Number.isInteger(minimum) || minimum < 0 || minimum > 20) {
    throw invalidInput(`${field}.minimumItems`, `'${field}.minimumItems' must be an integer from 0 to 20`);
  }
  const kinds = validateStringEnumList(p.acceptedKinds ?? [...EVIDENCE_KINDS], EVIDENCE_KINDS, `${field}.acceptedKinds`);
  if (kinds.length === 0) throw invalidInput(`${field}.acceptedKinds`, `'${field}.acceptedKinds' must name at least one kind`);
  const bool = (v: unknown, name: string): boolean => {
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw invalidInput(`${field}.${name}`, `'${field}.${name}' must be a boolean`);
    return v;
  };
  return {
    requiredForDone: bool(p.requiredForDone, 'requiredForDone'),
    minimumItems: minimum,
    acceptedKinds: EVIDENCE_KINDS.filter((k) => kinds.includes(k)),
    requireCheckCoverage: bool(p.requireCheckCoverage, 'requireCheckCoverage'),
  };
}

export function validateHandoffPacket(value: unknown, field = 'handoffPacket'): HandoffPacket {
  const p = objectAt(value, field);
  const sections = listAt(p.requiredSections ?? [], `${field}.requiredSections`, GUIDANCE_LIMITS.sections).map((s, i) =>
    validateSlugId(s, `${field}.requiredSections[${i}]`),
  );
  return {
    requiredSections: [...new Set(sections)],
    template: validateText(p.template ?? '', `${field}.template`, GUIDANCE_LIMITS.template),
    postAs: p.postAs === undefined || p.postAs === null || p.postAs === '' ? 'comment' : validateEnum(p.postAs, HANDOFF_TARGETS, `${field}.postAs`),
  };
}

/** A raw customization patch: only the sections present change. */
export type RawCustomizationPatch = Partial<Record<CustomizationField, unknown>>;

/**
 * Applies a validated patch to the current settings: returns the new settings and the names of
 * the sections that changed (none for a retry of the same patch).
 */
export function applyCustomizationPatch(
  current: CustomizationSettings,
  raw: RawCustomizationPatch,
): { settings: CustomizationSettings; changedFields: CustomizationField[] } {
  const next: CustomizationSettings = structuredClone(current);
  if (raw.enabledViewModes !== undefined) next.enabledViewModes = validateViewModes(raw.enabledViewModes);
  if (raw.defaultViewMode !== undefined) next.defaultViewMode = validateEnum(raw.defaultViewMode, VIEW_MODE_IDS, 'defaultViewMode');
  if (raw.viewPresets !== undefined) next.viewPresets = validateViewPresets(raw.viewPresets);
  if (raw.workspaceRules !== undefined) next.workspaceRules = validateWorkspaceRules(raw.workspaceRules);
  if (raw.evidencePolicy !== undefined) next.evidencePolicy = validateEvidencePolicy(raw.evidencePolicy);
  if (raw.handoffPacket !== undefined) next.handoffPacket = validateHandoffPacket(raw.handoffPacket);
  if (!next.enabledViewModes.includes(next.defaultViewMode)) {
    // Turning the default off moves the default to the first enabled mode, unless one was named.
    if (raw.defaultViewMode !== undefined) {
      throw invalidInput('defaultViewMode', `'defaultViewMode' must be one of the enabled view modes (${next.enabledViewModes.join(', ')})`);
    }
    next.defaultViewMode = next.enabledViewModes[0]!;
  }
  next.viewPresets.forEach((p, i) => {
    if (!next.enabledViewModes.includes(p.viewMode)) {
      throw invalidInput(`viewPresets[${i}].viewMode`, `'viewPresets[${i}].viewMode' '${p.viewMode}' is not an enabled view mode`);
    }
  });
  const changedFields = CUSTOMIZATION_FIELDS.filter((f) => JSON.stringify(next[f]) !== JSON.stringify(current[f]));
  return { settings: next, changedFields };
}

// ---- admin setup path ----------------------------------------------------------------------

/** Facts about a workspace's records, counted by the repository. */
export interface SetupFacts {
  projects: number;
  members: number;
  agents: number;
  tasks: number;
  tasksWithReadyBrief: number;
  knowledgeDocuments: number;
  standardsPublished: boolean;
  customized: boolean;
}

export interface SetupStep {
  id: string;
  title: string;
  done: boolean;
  detail: string;
}

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** The steps an admin takes to make a workspace ready for agents, each checked against the records. */
export function adminSetupPath(f: SetupFacts): SetupStep[] {
  return [
    { id: 'create-project', title: 'Create a project', done: f.projects > 0, detail: f.projects > 0 ? `${plural(f.projects, 'project')}` : 'POST /api/projects' },
    { id: 'invite-members', title: 'Invite the team', done: f.members > 1, detail: f.members > 1 ? plural(f.members, 'member') : 'POST /api/workspaces/{id}/members' },
    { id: 'connect-agent', title: 'Create an agent token', done: f.agents > 0, detail: f.agents > 0 ? plural(f.agents, 'agent') : 'POST /api/api-keys with an agentId' },
    { id: 'plan-tasks', title: 'Plan tasks', done: f.tasks > 0, detail: f.tasks > 0 ? plural(f.tasks, 'task') : 'POST /api/issues' },
    {
      id: 'write-briefs',
      title: 'Write task briefs',
      done: f.tasksWithReadyBrief > 0,
      detail: f.tasksWithReadyBrief > 0 ? `${plural(f.tasksWithReadyBrief, 'task')} with a ready brief` : 'Set goal, expected output and verification on a task',
    },
    {
      id: 'publish-standards',
      title: 'Publish working standards',
      done: f.standardsPublished,
      detail: f.standardsPublished ? 'published' : 'PATCH /api/workspaces/{id}/standards',
    },
    {
      id: 'add-knowledge',
      title: 'Add knowledge documents',
      done: f.knowledgeDocuments > 0,
      detail: f.knowledgeDocuments > 0 ? plural(f.knowledgeDocuments, 'document') : 'POST /api/knowledgebase',
    },
    {
      id: 'customize-views',
      title: 'Review views, rules and evidence policy',
      done: f.customized,
      detail: f.customized ? 'customized' : 'PATCH /api/workspaces/{id}/customization',
    },
  ];
}

// ---- working standards ---------------------------------------------------------------------

export interface StandardsSettings {
  summary: string;
  definitionOfDone: string[];
  reviewExpectations: string[];
  evidenceExpectations: string[];
}

export const STANDARDS_FIELDS = ['summary', 'definitionOfDone', 'reviewExpectations', 'evidenceExpectations'] as const;
export type StandardsField = (typeof STANDARDS_FIELDS)[number];

/** The standards of a workspace that never published its own. */
export function defaultStandards(): StandardsSettings {
  return {
    summary: 'Default working standards; an admin can publish the workspace\'s own.',
    definitionOfDone: [
      'Every acceptance check is done and proven by evidence naming it.',
      'The task brief\'s verification steps were run and their results attached.',
      'A handoff packet is posted before the task moves to in-review.',
    ],
    reviewExpectations: [
      'A person reviews the change while the task is in-review; agents do not move their own work to done without approval when one was requested.',
      'Review comments are answered on the task.',
    ],
    evidenceExpectations: [
      'Test results or logs for each verification step.',
      'Links to the change (commit, pull request or artifact).',
    ],
  };
}

export function applyStandardsPatch(
  current: StandardsSettings,
  raw: Partial<Record<StandardsField, unknown>>,
): { settings: StandardsSettings; changedFields: StandardsField[] } {
  const next: StandardsSettings = structuredClone(current);
  const list = (v: unknown, f: string) => validateTextList(v, f, GUIDANCE_LIMITS.standardItems, GUIDANCE_LIMITS.standardItem);
  if (raw.summary !== undefined) next.summary = validateText(raw.summary, 'summary', GUIDANCE_LIMITS.summary).trim();
  if (raw.definitionOfDone !== undefined) next.definitionOfDone = list(raw.definitionOfDone, 'definitionOfDone');
  if (raw.reviewExpectations !== undefined) next.reviewExpectations = list(raw.reviewExpectations, 'reviewExpectations');
  if (raw.evidenceExpectations !== undefined) next.evidenceExpectations = list(raw.evidenceExpectations, 'evidenceExpectations');
  const changedFields = STANDARDS_FIELDS.filter((f) => JSON.stringify(next[f]) !== JSON.stringify(current[f]));
  return { settings: next, changedFields };
}

// ---- knowledge documents -------------------------------------------------------------------

export interface DocumentFields {
  title: string;
  body: string;
  tags: string[];
  projectId?: string;
  initiativeId?: string;
  path?: string;
  url?: string;
}

export const DOCUMENT_FIELDS = ['title', 'body', 'tags', 'projectId', 'initiativeId', 'path', 'url'] as const;
export type DocumentField = (typeof DOCUMENT_FIELDS)[number];
export const CLEARABLE_DOCUMENT_FIELDS = ['projectId', 'initiativeId', 'path', 'url'] as const;

const PATH_PATTERN = /^[^\0]{1,500}$/;

export function validateDocumentPath(value: unknown, field = 'path'): string {
  if (typeof value !== 'string' || !PATH_PATTERN.test(value)) throw invalidInput(field, `'${field}' must be a path of at most 500 characters`);
  return value;
}

export function validateDocumentBody(value: unknown, field = 'body'): string {
  return validateText(value, field, GUIDANCE_LIMITS.documentBody);
}

export function validateDocumentTags(value: unknown, field = 'tags'): string[] {
  const tags = validateLabels(value, field);
  if (tags.length > GUIDANCE_LIMITS.documentTags) throw invalidInput(field, `'${field}' must hold at most ${GUIDANCE_LIMITS.documentTags} tags`);
  return tags;
}

export function validateNewDocument(raw: { title: unknown; body: unknown; tags: unknown; projectId?: unknown; initiativeId?: unknown; path?: unknown; url?: unknown }): DocumentFields {
  const doc: DocumentFields = {
    title: validateName(raw.title, 'title', LIMITS.title),
    body: validateDocumentBody(raw.body ?? ''),
    tags: validateDocumentTags(raw.tags ?? []),
  };
  const projectId = optionalId(raw.projectId, 'projectId');
  if (projectId) doc.projectId = projectId;
  const initiativeId = optionalId(raw.initiativeId, 'initiativeId');
  if (initiativeId) doc.initiativeId = initiativeId;
  if (raw.path !== undefined && raw.path !== null && raw.path !== '') doc.path = validateDocumentPath(raw.path);
  if (raw.url !== undefined && raw.url !== null && raw.url !== '') doc.url = validateUrl(raw.url, 'url');
  return doc;
}

/** The words of a search: whitespace-separated, case-folded; at most 10. */
export function searchTerms(q: string | undefined): string[] {
  if (!q) return [];
  const words = normalizeForSearch(q).split(/\s+/).filter(Boolean);
  return [...new Set(words)].slice(0, 10);
}

/**
 * How well a document matches every term: title hits count 3, tag hits 2, body hits 1 per term;
 * undefined when some term matches nowhere (every word must match). 0 without terms.
 */
export function scoreDocument(doc: Pick<DocumentFields, 'title' | 'body' | 'tags'>, terms: readonly string[]): number | undefined {
  if (terms.length === 0) return 0;
  const title = normalizeForSearch(doc.title);
  const body = normalizeForSearch(doc.body);
  const tags = doc.tags.map(normalizeForSearch);
  let score = 0;
  for (const term of terms) {
    const inTitle = title.includes(term) ? 3 : 0;
    const inTags = tags.some((t) => t.includes(term)) ? 2 : 0;
    const inBody = body.includes(term) ? 1 : 0;
    if (inTitle + inTags + inBody === 0) return undefined;
    score += inTitle + inTags + inBody;
  }
  return score;
}

/** Up to 240 characters of the body around the first term found (or its start), on one line. */
export function snippetOf(body: string, terms: readonly string[]): string {
  const flat = body.replace(/\s+/g, ' ').trim();
  const max = GUIDANCE_LIMITS.snippet;
  if (flat.length <= max) return flat;
  const folded = normalizeForSearch(flat);
  const at = terms.map((t) => folded.indexOf(t)).filter((i) => i >= 0).sort((a, b) => a - b)[0];
  if (at === undefined || at < max / 2) return `${flat.slice(0, max - 1)}…`;
  const start = Math.max(0, Math.min(at - max / 3, flat.length - max + 2));
  const slice = flat.slice(Math.floor(start), Math.floor(start) + max - 2);
  return `…${slice}${Math.floor(start) + max - 2 < flat.length ? '…' : ''}`;
}
