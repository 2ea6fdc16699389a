/**
 * REST shapes of the guidance records (workspace customization, working standards, knowledge
 * documents, context packs, launch readiness): the mapping from the issues service's
 * GuidanceService messages, and the JSON schemas that document (and serialize) them. The MCP
 * tools return the same shapes.
 */
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type {
  GetContextPackResponseSchema,
  GetLaunchReadinessResponseSchema,
  KnowledgeDocumentSchema,
  KnowledgeHitSchema,
  WorkingStandardsSchema,
  WorkspaceCustomizationSchema,
} from '@planning/proto/planning/issues/v1/guidance_pb';
import type { ContextPackItemSchema } from '@planning/proto/planning/issues/v1/projects_pb';
import { component, described } from '../openapi.js';
import { approvalGateJson, approvalGateSchema, doneStatusJson, doneStatusSchema, refSchema } from './planning-json.js';

type Shape<S extends DescMessage> = MessageShape<S>;

/** The evidence policy is guidance: the service never refuses a status move for missing evidence; reviewers check it. */
export const EVIDENCE_POLICY_RULE_ID = 'evidence-policy';

function evidencePolicyJson(p: Shape<typeof WorkspaceCustomizationSchema>['evidencePolicy']) {
  const policy = {
    requiredForDone: p?.requiredForDone ?? false,
    minimumItems: p?.minimumItems ?? 0,
    acceptedKinds: p?.acceptedKinds ?? [],
    requireCheckCoverage: p?.requireCheckCoverage ?? false,
  };
  const asks = policy.requiredForDone
    ? `Reviewers expect at least ${policy.minimumItems} evidence item(s) (${policy.acceptedKinds.join(', ')})${policy.requireCheckCoverage ? ' and one per acceptance check' : ''} before a task is done.`
    : 'Evidence before done is optional in this workspace.';
  return {
    ...policy,
    enforcedBy: 'reviewers' as const,
    description: `Guidance, not enforced by the service: a move to done is never refused for missing evidence. ${asks}`,
  };
}

/**
 * The service's rules, then the evidence policy as a rule reviewers check (`enforcedBy:
 * reviewers`; left out if a workspace rule already uses its id), then the workspace's own.
 */
function rulesCenterJson(c: Shape<typeof WorkspaceCustomizationSchema>) {
  const rules = c.rulesCenter.map((r) => ({ id: r.id, title: r.title, description: r.description, enforcedBy: r.enforcedBy, severity: r.severity }));
  if (rules.some((r) => r.id === EVIDENCE_POLICY_RULE_ID)) return rules;
  const policy = evidencePolicyJson(c.evidencePolicy);
  const evidence = {
    id: EVIDENCE_POLICY_RULE_ID,
    title: 'Evidence before done',
    description: `${policy.description} Post it with add_evidence.`,
    enforcedBy: 'reviewers',
    severity: policy.requiredForDone ? 'must' : 'should',
  };
  const firstOwn = rules.findIndex((r) => r.enforcedBy !== 'service');
  return firstOwn < 0 ? [...rules, evidence] : [...rules.slice(0, firstOwn), evidence, ...rules.slice(firstOwn)];
}

export function customizationJson(c: Shape<typeof WorkspaceCustomizationSchema> | undefined) {
  if (!c) throw new Error('customization missing');
  return {
    workspaceId: c.workspaceId,
    viewModes: c.viewModes.map((m) => ({ id: m.id, label: m.label, enabled: m.enabled })),
    defaultViewMode: c.defaultViewMode,
    viewPresets: c.viewPresets.map((p) => ({
      id: p.id,
      name: p.name,
      viewMode: p.viewMode,
      filters: {
        status: p.filters?.status ?? [],
        priority: p.filters?.priority ?? [],
        labels: p.filters?.labels ?? [],
        assignedAgentId: p.filters?.assignedAgentId ?? null,
        projectId: p.filters?.projectId ?? null,
      },
      groupBy: p.groupBy ?? null,
      sort: p.sort ?? null,
      direction: p.direction ?? null,
    })),
    adminSetupPath: c.adminSetupPath.map((s) => ({ id: s.id, title: s.title, done: s.done, detail: s.detail })),
    rulesCenter: rulesCenterJson(c),
    evidencePolicy: evidencePolicyJson(c.evidencePolicy),
    handoffPacket: {
      requiredSections: c.handoffPacket?.requiredSections ?? [],
      template: c.handoffPacket?.template ?? '',
      postAs: c.handoffPacket?.postAs ?? 'comment',
    },
    source: c.source,
    version: c.version,
    updatedAt: c.updatedAt ?? null,
    updatedBy: c.updatedBy ?? null,
  };
}

export function standardsJson(s: Shape<typeof WorkingStandardsSchema> | undefined) {
  if (!s) throw new Error('standards missing');
  return {
    workspaceId: s.workspaceId,
    summary: s.summary,
    definitionOfDone: s.definitionOfDone,
    reviewExpectations: s.reviewExpectations,
    evidenceExpectations: s.evidenceExpectations,
    source: s.source,
    version: s.version,
    publishedAt: s.publishedAt ?? null,
    publishedBy: s.publishedBy ?? null,
  };
}

export function documentJson(d: Shape<typeof KnowledgeDocumentSchema> | undefined) {
  if (!d) throw new Error('document missing');
  return {
    id: d.id,
    workspaceId: d.workspaceId,
    title: d.title,
    body: d.body,
    tags: d.tags,
    projectId: d.projectId ?? null,
    initiativeId: d.initiativeId ?? null,
    path: d.path ?? null,
    url: d.url ?? null,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    createdBy: d.createdBy,
    version: d.version,
  };
}

export function hitJson(h: Shape<typeof KnowledgeHitSchema>) {
  return { document: documentJson(h.document), score: h.score, snippet: h.snippet };
}

const itemJson = (i: Shape<typeof ContextPackItemSchema>) => ({ kind: i.kind, title: i.title, path: i.path ?? null, url: i.url ?? null, note: i.note ?? null });

export function contextPackJson(p: Shape<typeof GetContextPackResponseSchema>) {
  const source = (s: { id: string; name: string; goal: string; items: Shape<typeof ContextPackItemSchema>[] } | undefined) =>
    s ? { id: s.id, name: s.name, goal: s.goal, items: s.items.map(itemJson) } : null;
  return {
    issue: { id: p.issue?.id ?? '', title: p.issue?.title ?? '', status: p.issue?.status ?? '' },
    project: source(p.project),
    initiative: source(p.initiative),
    documents: p.documents.map(documentJson),
    done: doneStatusJson(p.done),
    approvals: p.approvals.map(approvalGateJson),
  };
}

export function launchReadinessJson(r: Shape<typeof GetLaunchReadinessResponseSchema>) {
  const launch = r.launchProof;
  return {
    implementation: { completionPercent: r.implementation?.completionPercent ?? 0, verifiedCount: r.implementation?.verifiedCount ?? 0 },
    launchProof: {
      readyForPublicLaunch: launch?.readyForPublicLaunch ?? true,
      nextProof: launch?.nextProof ? { id: launch.nextProof.id, nextAction: launch.nextProof.nextAction } : null,
      summary: {
        publicLaunchBlockerCount: launch?.summary?.publicLaunchBlockerCount ?? 0,
        proofPacketCount: launch?.summary?.proofPacketCount ?? 0,
      },
    },
    blockers: r.blockers.map((b) => ({
      id: b.id,
      title: b.title,
      status: b.status,
      priority: b.priority,
      dueDate: b.dueDate ?? null,
      evidenceCount: b.evidenceCount,
      doneEvidence: { completed: b.checksDone, total: b.checksTotal },
      nextAction: b.nextAction,
    })),
  };
}

// ---- schemas ---------------------------------------------------------------------------------

const str = { type: 'string' } as const;
const nullableStr = { type: ['string', 'null'] } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const strings = { type: 'array', items: str } as const;
const time = { type: 'string', format: 'date-time' } as const;
const nullableTime = { type: ['string', 'null'], format: 'date-time' } as const;
const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  ({ type: 'object', required: Object.keys(properties), properties, ...extra }) as const;

export const customizationSchema = component('WorkspaceCustomization', obj({
  workspaceId: str,
  viewModes: { type: 'array', items: obj({ id: { type: 'string', enum: ['cards', 'list', 'tags', 'swimlanes'] }, label: str, enabled: bool }) },
  defaultViewMode: str,
  viewPresets: {
    type: 'array',
    items: obj({
      id: str,
      name: str,
      viewMode: str,
      filters: obj({ status: strings, priority: strings, labels: strings, assignedAgentId: nullableStr, projectId: nullableStr }),
      groupBy: nullableStr,
      sort: nullableStr,
      direction: nullableStr,
    }),
  },
  adminSetupPath: { type: 'array', description: 'Setup steps, `done` computed from the workspace\'s records.', items: obj({ id: str, title: str, done: bool, detail: str }) },
  rulesCenter: {
    type: 'array',
    description:
      'Rules the service enforces (`enforcedBy: service`, refused when broken), then the evidence policy (`reviewers`: guidance people check, never refused by the service), then the workspace\'s own (`workspace`: guidance).',
    items: obj({ id: str, title: str, description: str, enforcedBy: { type: 'string', enum: ['service', 'reviewers', 'workspace'] }, severity: { type: 'string', enum: ['must', 'should'] } }),
  },
  evidencePolicy: obj(
    { requiredForDone: bool, minimumItems: int, acceptedKinds: strings, requireCheckCoverage: bool, enforcedBy: { type: 'string', enum: ['reviewers'] }, description: str },
    { description: 'Guidance, not enforced: `requiredForDone` asks reviewers to expect evidence before done; the service never refuses a status move for missing evidence.' },
  ),
  handoffPacket: obj({ requiredSections: strings, template: str, postAs: { type: 'string', enum: ['comment', 'evidence'] } }),
  source: { type: 'string', enum: ['default', 'stored'] },
  version: int,
  updatedAt: nullableTime,
  updatedBy: nullableStr,
}));

export const standardsSchema = component('WorkingStandards', obj({
  workspaceId: str,
  summary: str,
  definitionOfDone: strings,
  reviewExpectations: strings,
  evidenceExpectations: strings,
  source: { type: 'string', enum: ['default', 'published'] },
  version: int,
  publishedAt: nullableTime,
  publishedBy: nullableStr,
}));

export const documentSchema = component('KnowledgeDocument', obj({
  id: str,
  workspaceId: str,
  title: str,
  body: str,
  tags: strings,
  projectId: nullableStr,
  initiativeId: nullableStr,
  path: nullableStr,
  url: nullableStr,
  createdAt: time,
  updatedAt: time,
  createdBy: str,
  version: int,
}));

export const hitSchema = component('KnowledgeHit', obj({ document: documentSchema, score: int, snippet: str }));

const contextItemSchema = component('ContextSourceItem', obj({ kind: str, title: str, path: nullableStr, url: nullableStr, note: nullableStr }));
const contextSourceSchema = { anyOf: [component('ContextSource', obj({ id: str, name: str, goal: str, items: { type: 'array', items: contextItemSchema } })), { type: 'null' }] };

export const contextPackSchema = component('TaskContextPack', obj({
  issue: refSchema,
  project: contextSourceSchema,
  initiative: contextSourceSchema,
  documents: { type: 'array', items: documentSchema },
  done: described(doneStatusSchema, 'What moving the task to done still needs under the done policy.'),
  approvals: { type: 'array', items: approvalGateSchema, description: "The task's approval requests (pending, and the latest decided per `for`)." },
}));

export const launchReadinessSchema = component('LaunchReadiness', obj({
  implementation: obj({ completionPercent: int, verifiedCount: int }),
  launchProof: obj({
    readyForPublicLaunch: bool,
    nextProof: { anyOf: [obj({ id: str, nextAction: str }), { type: 'null' }] },
    summary: obj({ publicLaunchBlockerCount: int, proofPacketCount: int }),
  }),
  blockers: {
    type: 'array',
    items: obj({
      id: str,
      title: str,
      status: str,
      priority: str,
      dueDate: { type: ['string', 'null'], format: 'date' },
      evidenceCount: int,
      doneEvidence: obj({ completed: int, total: int }),
      nextAction: str,
    }),
  },
}));

// ---- bootstrap and preflight schemas ---------------------------------------------------------

const nullableInt = { type: ['integer', 'null'] } as const;

export const bootstrapSchema = component('ClientBootstrap', obj({
  identity: obj({ keyId: str, agentId: str, actorType: str, label: str }),
  workspace: obj({ id: str, name: nullableStr, slug: nullableStr, planId: str, status: str }),
  scopes: strings,
  rateLimit: { anyOf: [obj({ requestsPerMinute: { type: 'integer' }, burst: { type: 'integer' } }), { type: 'null' }] },
  quotas: obj({ apiRequests: obj({ limit: nullableInt, used: { type: 'integer' } }) }),
  mcp: obj({ endpoint: str, protocolVersions: strings, toolsets: obj({ full: { type: 'integer' }, core: { type: 'integer' } }), availableTools: strings }),
  recommendedCallOrder: {
    type: 'array',
    items: obj({ step: { type: 'integer' }, tool: str, purpose: str, available: { type: 'boolean' }, missingScopes: strings }),
  },
}));

const checkStatus = { type: 'string', enum: ['pass', 'warn', 'fail', 'skipped'] } as const;
const check = (extra: Record<string, unknown>) => ({
  type: 'object',
  required: ['id', 'status', 'detail'],
  properties: { id: str, status: checkStatus, detail: str, ...extra },
});

export const preflightSchema = component('AgentPreflight', obj({
  generatedAt: { type: 'string', format: 'date-time' },
  agent: obj({ agentId: str, keyId: str }),
  workspace: obj({ id: str, planId: str, status: str }),
  firstSessionDecision: obj({
    decision: { type: 'string', enum: ['resume-claim', 'wait-for-approval', 'claim-next', 'no-ready-work', 'read-only', 'blocked'] },
    reason: str,
    nextTool: nullableStr,
    issueId: nullableStr,
  }),
  checks: {
    type: 'array',
    description: 'scopes, api-quota, agent-run-quota, held-claim, pending-approvals, ready-work.',
    // One schema for every check (each carries the fields of its kind), so serialization keeps them all.
    items: check({
      scopes: strings,
      missing: strings,
      used: { type: 'integer' },
      limit: nullableInt,
      quotaState: nullableStr,
      claim: { anyOf: [obj({ issueId: str, expiresAt: str, fencingToken: { type: 'integer' } }), { type: 'null' }] },
      approvals: { type: 'array', items: obj({ id: str, issueId: str, reason: str, createdAt: str }) },
      decided: {
        type: 'array',
        description: 'pending-approvals: your requests on your held task that a member decided, or that expired.',
        items: obj({ id: str, issueId: str, for: str, status: str, decidedAt: nullableStr }),
      },
      claimable: nullableInt,
      total: nullableInt,
    }),
  },
}));

