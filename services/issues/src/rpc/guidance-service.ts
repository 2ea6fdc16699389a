import type { MessageInitShape } from '@bufbuild/protobuf';
import type { AccessRequirement } from '@planning/access';
import { invalidInput, ServiceError } from '@planning/errors';
import {
  GuidanceService,
  type EvidencePolicy as EvidencePolicyMessage,
  type HandoffPacket as HandoffPacketMessage,
  type KnowledgeDocumentSchema,
  type ViewPreset as ViewPresetMessage,
  type WorkingStandardsSchema,
  type WorkspaceCustomizationSchema,
} from '@planning/proto/planning/issues/v1/guidance_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import { LIMITS, optionalId, validateId, validateLabels, validateName, validateQuery, validateUrl } from '../domain/fields.js';
import {
  adminSetupPath,
  CLEARABLE_DOCUMENT_FIELDS,
  defaultCustomization,
  defaultStandards,
  GUIDANCE_LIMITS,
  searchTerms,
  serviceRules,
  snippetOf,
  validateDocumentBody,
  validateDocumentPath,
  validateDocumentTags,
  validateNewDocument,
  VIEW_MODE_IDS,
  VIEW_MODE_LABELS,
  type DocumentFields,
  type RawCustomizationPatch,
} from '../domain/guidance.js';
import { compareQueue } from '../domain/ranking.js';
import { productReadiness } from '../domain/readiness.js';
import type { CustomizationRecord, GuidanceRepository, KnowledgeDocumentRecord, StandardsRecord } from '../store/guidance.js';
import type { PlanningRepository } from '../store/planning.js';
import type { TaskRecordRepository } from '../store/task-records.js';
import type { TaskRepository } from '../store/tasks.js';
import { decodeCursor, encodeCursor, pageLimit } from './cursor.js';
import { READ_TASKS, type PlanningAccess } from './planning-access.js';
import { doneStatusOfTask } from './done-status.js';
import { approvalGateMessages, toDoneStatusMessage, toTaskView } from './task-messages.js';
import { actorOf } from './workspace-service.js';

export { GuidanceService };

/** Changing the customization or the standards: admins (tokens: `admin`). */
export const MANAGE_GUIDANCE: AccessRequirement = { action: 'manage', scope: 'admin' };
/** Writing knowledge documents: admins (tokens: `projects:write`, like context packs). */
export const MANAGE_KNOWLEDGE: AccessRequirement = { action: 'manage', scope: 'projects:write' };

export interface GuidanceServiceDeps {
  guidance: GuidanceRepository;
  planning: PlanningRepository;
  tasks: TaskRepository;
  records: TaskRecordRepository;
  access: PlanningAccess;
  clock: () => Date;
}

export function toDocumentMessage(d: KnowledgeDocumentRecord): MessageInitShape<typeof KnowledgeDocumentSchema> {
  return {
    id: d._id,
    workspaceId: d.workspaceId,
    title: d.title,
    body: d.body,
    tags: d.tags,
    projectId: d.projectId,
    initiativeId: d.initiativeId,
    path: d.path,
    url: d.url,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    createdBy: d.createdBy,
    version: d.version,
  };
}

function toStandardsMessage(workspaceId: string, record: StandardsRecord | undefined): MessageInitShape<typeof WorkingStandardsSchema> {
  const s = record?.settings ?? defaultStandards();
  return {
    workspaceId,
    summary: s.summary,
    definitionOfDone: s.definitionOfDone,
    reviewExpectations: s.reviewExpectations,
    evidenceExpectations: s.evidenceExpectations,
    source: record ? 'published' : 'default',
    version: record?.version ?? 0,
    publishedAt: record?.publishedAt,
    publishedBy: record?.publishedBy,
  };
}

// Plain values of the patch messages, so the domain validates what a REST body would carry.
const presetValue = (p: ViewPresetMessage) => ({
  id: p.id,
  name: p.name,
  viewMode: p.viewMode,
  filters: p.filters
    ? { status: p.filters.status, priority: p.filters.priority, labels: p.filters.labels, assignedAgentId: p.filters.assignedAgentId, projectId: p.filters.projectId }
    : undefined,
  groupBy: p.groupBy,
  sort: p.sort,
  direction: p.direction,
});
const policyValue = (p: EvidencePolicyMessage) => ({
  requiredForDone: p.requiredForDone,
  minimumItems: p.minimumItems,
  acceptedKinds: p.acceptedKinds,
  requireCheckCoverage: p.requireCheckCoverage,
});
const handoffValue = (h: HandoffPacketMessage) => ({ requiredSections: h.requiredSections, template: h.template, postAs: h.postAs });

const OFFSET_CURSOR = /^o:(\d{1,6})$/;

export function createGuidanceService(deps: GuidanceServiceDeps): ServiceImplementation<typeof GuidanceService> {
  const { guidance, planning, tasks, records, access } = deps;

  const customizationMessage = async (workspaceId: string, record: CustomizationRecord | undefined): Promise<MessageInitShape<typeof WorkspaceCustomizationSchema>> => {
    const s = record?.settings ?? defaultCustomization();
    return {
      workspaceId,
      viewModes: VIEW_MODE_IDS.map((id) => ({ id, label: VIEW_MODE_LABELS[id], enabled: s.enabledViewModes.includes(id) })),
      defaultViewMode: s.defaultViewMode,
      viewPresets: s.viewPresets.map((p) => ({ ...p, filters: { ...p.filters } })),
      adminSetupPath: adminSetupPath(await guidance.setupFacts(workspaceId)),
      rulesCenter: [
        ...serviceRules().map((r) => ({ ...r, enforcedBy: 'service' })),
        ...s.workspaceRules.map((r) => ({ ...r, enforcedBy: 'workspace' })),
      ],
      evidencePolicy: s.evidencePolicy,
      handoffPacket: s.handoffPacket,
      source: record ? 'stored' : 'default',
      version: record?.version ?? 0,
      updatedAt: record?.updatedAt,
      updatedBy: record?.updatedBy,
    };
  };

  const expectedVersion = (value: number | undefined): number | undefined => {
    if (value === undefined) return undefined;
    if (!Number.isInteger(value) || value < 0) throw invalidInput('version', "'version' must be a non-negative integer");
    return value;
  };

  /** A document by id, if the caller may do `requirement` in its workspace. */
  const documentFor = async (ctx: CallContext, id: string, requirement: AccessRequirement): Promise<KnowledgeDocumentRecord> => {
    const doc = await guidance.findDocument(validateId(id, 'id'));
    if (!doc) throw new ServiceError('not-found', 'Knowledge document not found');
    await access.record(ctx, 'Knowledge document', doc.workspaceId, requirement);
    return doc;
  };

  /** A project or initiative a document links to must be of the document's workspace. */
  const checkLinks = async (workspaceId: string, fields: Partial<DocumentFields>): Promise<void> => {
    if (fields.projectId) {
      const project = await planning.findProject(fields.projectId);
      if (!project || project.workspaceId !== workspaceId) throw new ServiceError('not-found', 'Project not found');
    }
    if (fields.initiativeId) {
      const initiative = await planning.findInitiative(fields.initiativeId);
      if (!initiative || initiative.workspaceId !== workspaceId) throw new ServiceError('not-found', 'Initiative not found');
    }
  };

  return {
    async getWorkspaceCustomization(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      await access.workspace(ctx, workspaceId, READ_TASKS);
      const stored = await guidance.customization(workspaceId);
      return { customization: await customizationMessage(workspaceId, stored.record) };
    },

    async updateWorkspaceCustomization(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      const patch: RawCustomizationPatch = {};
      if (request.enabledViewModes) patch.enabledViewModes = request.enabledViewModes.values;
      if (request.defaultViewMode !== undefined) patch.defaultViewMode = request.defaultViewMode;
      if (request.viewPresets) patch.viewPresets = request.viewPresets.presets.map(presetValue);
      if (request.workspaceRules) patch.workspaceRules = request.workspaceRules.rules.map((r) => ({ id: r.id, title: r.title, description: r.description, severity: r.severity }));
      if (request.evidencePolicy) patch.evidencePolicy = policyValue(request.evidencePolicy);
      if (request.handoffPacket) patch.handoffPacket = handoffValue(request.handoffPacket);
      if (Object.keys(patch).length === 0) {
        throw invalidInput('viewPresets', 'Send at least one of enabledViewModes, defaultViewMode, viewPresets, workspaceRules, evidencePolicy, handoffPacket');
      }
      const version = expectedVersion(request.expectedVersion);
      await access.workspace(ctx, workspaceId, MANAGE_GUIDANCE);
      const result = await guidance.updateCustomization(workspaceId, patch, {
        ...(version !== undefined ? { expectedVersion: version } : {}),
        actor: actorOf(ctx.principal),
        now: deps.clock(),
      });
      return { customization: await customizationMessage(workspaceId, result.record), changedFields: result.changedFields };
    },

    async getWorkingStandards(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      await access.workspace(ctx, workspaceId, READ_TASKS);
      const stored = await guidance.workingStandards(workspaceId);
      return { standards: toStandardsMessage(workspaceId, stored.record) };
    },

    async updateWorkingStandards(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      const patch: Record<string, unknown> = {};
      if (request.summary !== undefined) patch.summary = request.summary;
      if (request.definitionOfDone) patch.definitionOfDone = request.definitionOfDone.values;
      if (request.reviewExpectations) patch.reviewExpectations = request.reviewExpectations.values;
      if (request.evidenceExpectations) patch.evidenceExpectations = request.evidenceExpectations.values;
      const version = expectedVersion(request.expectedVersion);
      await access.workspace(ctx, workspaceId, MANAGE_GUIDANCE);
      const result = await guidance.publishStandards(workspaceId, patch, {
        ...(version !== undefined ? { expectedVersion: version } : {}),
        actor: actorOf(ctx.principal),
        now: deps.clock(),
      });
      return { standards: toStandardsMessage(workspaceId, result.record), changedFields: result.changedFields };
    },

    async createKnowledgeDocument(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      const fields = validateNewDocument(request);
      await access.workspace(ctx, workspaceId, MANAGE_KNOWLEDGE);
      await checkLinks(workspaceId, fields);
      const record = await guidance.createDocument(workspaceId, fields, actorOf(ctx.principal), deps.clock());
      return { document: toDocumentMessage(record) };
    },

    async getKnowledgeDocument(request, ctx) {
      return { document: toDocumentMessage(await documentFor(ctx, request.id, READ_TASKS)) };
    },

    async updateKnowledgeDocument(request, ctx) {
      const fields: Partial<DocumentFields> = {};
      if (request.title !== undefined) fields.title = validateName(request.title, 'title', LIMITS.title);
      if (request.body !== undefined) fields.body = validateDocumentBody(request.body);
      if (request.tags) fields.tags = validateDocumentTags(request.tags.values);
      if (request.projectId !== undefined) fields.projectId = validateId(request.projectId, 'projectId');
      if (request.initiativeId !== undefined) fields.initiativeId = validateId(request.initiativeId, 'initiativeId');
      if (request.path !== undefined) fields.path = validateDocumentPath(request.path);
      if (request.url !== undefined) fields.url = validateUrl(request.url, 'url');
      const clear = request.clearFields.map((f, i) => {
        const allowed = CLEARABLE_DOCUMENT_FIELDS as readonly string[];
        if (!allowed.includes(f) || (fields as Record<string, unknown>)[f] !== undefined) {
          throw invalidInput(`clearFields[${i}]`, `'clearFields[${i}]' must be one of ${CLEARABLE_DOCUMENT_FIELDS.join(', ')} (and not also set)`);
        }
        return f as (typeof CLEARABLE_DOCUMENT_FIELDS)[number];
      });
      if (Object.keys(fields).length === 0 && clear.length === 0) {
        throw invalidInput('title', 'Send at least one of title, body, tags, projectId, initiativeId, path, url');
      }
      const version = expectedVersion(request.expectedVersion);
      const doc = await documentFor(ctx, request.id, MANAGE_KNOWLEDGE);
      await checkLinks(doc.workspaceId, fields);
      const result = await guidance.updateDocument(doc._id, fields, clear, {
        ...(version !== undefined ? { expectedVersion: version } : {}),
        actor: actorOf(ctx.principal),
        now: deps.clock(),
      });
      return { document: toDocumentMessage(result.record), changedFields: result.changedFields };
    },

    async deleteKnowledgeDocument(request, ctx) {
      const doc = await documentFor(ctx, request.id, MANAGE_KNOWLEDGE);
      return { document: toDocumentMessage(await guidance.deleteDocument(doc._id, actorOf(ctx.principal))) };
    },

    async searchKnowledgeDocuments(request, ctx) {
      const principal = ctx.principal;
      let workspaceId = optionalId(request.workspaceId, 'workspaceId');
      if (!workspaceId && principal.type === 'api-key') workspaceId = principal.workspaceId;
      if (!workspaceId) throw invalidInput('workspaceId', "'workspaceId' is required");
      const q = validateQuery(request.q);
      const tags = request.tags.length > 0 ? validateLabels(request.tags, 'tags') : [];
      const projectId = optionalId(request.projectId, 'projectId');
      const initiativeId = optionalId(request.initiativeId, 'initiativeId');
      const limit = pageLimit(request.limit);
      const cursor = decodeCursor(request.cursor);
      let offset = 0;
      if (cursor !== undefined) {
        const match = OFFSET_CURSOR.exec(cursor);
        if (!match) throw invalidInput('cursor', "'cursor' is not a valid cursor");
        offset = Number(match[1]);
      }
      await access.workspace(ctx, workspaceId, READ_TASKS);
      const terms = searchTerms(q);
      const hits = await guidance.searchDocuments(workspaceId, {
        terms,
        tags,
        ...(projectId ? { projectId } : {}),
        ...(initiativeId ? { initiativeId } : {}),
      });
      const page = hits.slice(offset, offset + limit);
      return {
        hits: page.map((h) => ({ document: toDocumentMessage(h.record), score: h.score, snippet: snippetOf(h.record.body, terms) })),
        ...(hits.length > offset + limit ? { nextCursor: encodeCursor(`o:${offset + limit}`) } : {}),
      };
    },

    async getContextPack(request, ctx) {
      const issueId = validateId(request.issueId, 'issueId');
      const task = await tasks.get(issueId);
      if (!task) throw new ServiceError('not-found', 'Issue not found');
      await access.record(ctx, 'Issue', task.workspaceId, READ_TASKS);
      const project = await planning.findProject(task.projectId);
      if (!project) throw new ServiceError('not-found', 'Project not found');
      const initiativeId = task.initiativeId ?? project.initiativeId;
      const initiative = initiativeId ? await planning.findInitiative(initiativeId) : null;
      const [documents, done] = await Promise.all([guidance.linkedDocuments(task.workspaceId, project._id, initiative?._id), doneStatusOfTask(tasks, task, deps.clock())]);
      return {
        done: toDoneStatusMessage(done),
        approvals: approvalGateMessages(task.approvalGates, deps.clock()),
        issue: { id: task._id, title: task.title, status: task.status },
        project: { id: project._id, name: project.name, goal: project.goal, items: project.contextPack },
        ...(initiative ? { initiative: { id: initiative._id, name: initiative.name, goal: initiative.goal, items: initiative.contextPack } } : {}),
        documents: documents.map(toDocumentMessage),
      };
    },

    async getLaunchReadiness(request, ctx) {
      const workspaceId = validateId(request.workspaceId, 'workspaceId');
      await access.workspace(ctx, workspaceId, READ_TASKS);
      const scope = { all: false as const, ids: [workspaceId] };
      const now = deps.clock();
      // The same counts and rule as the diagnostics (TaskService.GetProductReadiness), for one workspace.
      const [counts, proofPacketCount] = await Promise.all([tasks.readinessCounts(scope), records.countEvidence(scope)]);
      const ranked = [...counts.openBlockers].sort((a, b) => compareQueue({ ...a, id: a._id }, { ...b, id: b._id }));
      const views = ranked.slice(0, GUIDANCE_LIMITS.launchBlockers).map((t) => ({ t, health: toTaskView(t, { now }).health }));
      const top = views[0];
      const readiness = productReadiness({
        doneCount: counts.done,
        notCancelledCount: counts.notCancelled,
        verifiedCount: counts.verified,
        openBlockerCount: counts.openBlockers.length,
        proofPacketCount,
        ...(top ? { nextBlocker: { id: top.t._id, nextAction: top.health?.nextAction ?? '' } } : {}),
      });
      return {
        implementation: readiness.implementation,
        launchProof: {
          readyForPublicLaunch: readiness.launchProof.readyForPublicLaunch,
          nextProof: readiness.launchProof.nextProof ?? undefined,
          summary: readiness.launchProof.summary,
        },
        blockers: views.map(({ t, health }) => ({
          id: t._id,
          title: t.title,
          status: t.status,
          priority: t.priority,
          dueDate: t.dueDate,
          evidenceCount: t.evidenceCount,
          checksDone: t.acceptanceChecks.filter((c) => c.done).length,
          checksTotal: t.acceptanceChecks.length,
          nextAction: health?.nextAction ?? '',
        })),
      };
    },
  };
}
