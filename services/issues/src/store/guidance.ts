import { conflict, ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import type { Outbox } from '@planning/outbox';
import type { Collection, DocumentStore, Filter, StoredDocument } from '@planning/store';
import {
  applyCustomizationPatch,
  applyStandardsPatch,
  defaultCustomization,
  defaultStandards,
  DOCUMENT_FIELDS,
  GUIDANCE_LIMITS,
  scoreDocument,
  type CLEARABLE_DOCUMENT_FIELDS,
  type CustomizationSettings,
  type DocumentField,
  type DocumentFields,
  type RawCustomizationPatch,
  type SetupFacts,
  type StandardsField,
  type StandardsSettings,
} from '../domain/guidance.js';
import { CLOSED_STATUSES } from '../domain/task-status.js';
import type { Actor } from './task-documents.js';

export interface CustomizationRecord extends StoredDocument {
  /** `_id` is the workspace id. */
  settings: CustomizationSettings;
  version: number;
  updatedAt: string;
  updatedBy: string;
}

export interface StandardsRecord extends StoredDocument {
  /** `_id` is the workspace id. */
  settings: StandardsSettings;
  version: number;
  publishedAt: string;
  publishedBy: string;
}

export interface KnowledgeDocumentRecord extends StoredDocument, DocumentFields {
  workspaceId: string;
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  version: number;
}

/** A stored setting, or the default when the workspace never changed it. */
export type Stored<R> = { record: R; source: 'stored' } | { record: undefined; source: 'default' };

export interface DocumentPatch extends Partial<Record<DocumentField, unknown>> {
  clear?: (typeof CLEARABLE_DOCUMENT_FIELDS)[number][];
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

function versionGuard(current: number, expected: number | undefined, what: string): void {
  if (expected !== undefined && expected !== current) {
    throw conflict('version-conflict', `The ${what} is at version ${current}, not ${expected}; read it again`);
  }
}

/**
 * Guidance records of the issues service: each workspace's customization and working standards
 * (one document per workspace, absent until an admin changes them) and its knowledge documents.
 * Every change and its event are written in one outbox transaction; events carry ids and
 * changed field names, never text.
 */
export class GuidanceRepository {
  private constructor(
    readonly customizations: Collection<CustomizationRecord>,
    readonly standards: Collection<StandardsRecord>,
    readonly documents: Collection<KnowledgeDocumentRecord>,
    private readonly store: DocumentStore,
    private readonly outbox: Outbox,
  ) {}

  static async open(store: DocumentStore, outbox: Outbox): Promise<GuidanceRepository> {
    const customizations = store.collection<CustomizationRecord>('workspace_customizations');
    const standards = store.collection<StandardsRecord>('working_standards');
    const documents = store.collection<KnowledgeDocumentRecord>('knowledge_documents');
    await documents.createIndexes([
      { name: 'workspace_updated', keys: { workspaceId: 1, updatedAt: -1 } },
      { name: 'workspace_project', keys: { workspaceId: 1, projectId: 1 } },
      { name: 'workspace_initiative', keys: { workspaceId: 1, initiativeId: 1 } },
    ]);
    return new GuidanceRepository(customizations, standards, documents, store, outbox);
  }

  // ---- customization ---------------------------------------------------------------------

  async customization(workspaceId: string): Promise<Stored<CustomizationRecord>> {
    const record = await this.customizations.findOne({ _id: workspaceId });
    return record ? { record, source: 'stored' } : { record: undefined, source: 'default' };
  }

  /** Applies the sections of `patch` that differ; the same patch again changes nothing. */
  async updateCustomization(
    workspaceId: string,
    patch: RawCustomizationPatch,
    options: { expectedVersion?: number; actor: Actor; now: Date },
  ): Promise<{ record: CustomizationRecord | undefined; changedFields: string[] }> {
    return this.outbox.transaction(async (session) => {
      const current = await this.customizations.findOne({ _id: workspaceId }, { session });
      versionGuard(current?.version ?? 0, options.expectedVersion, 'customization');
      const { settings, changedFields } = applyCustomizationPatch(current?.settings ?? defaultCustomization(), patch);
      if (changedFields.length === 0) return { record: current ?? undefined, changedFields };
      const at = options.now.toISOString();
      const record: CustomizationRecord = { _id: workspaceId, settings, version: (current?.version ?? 0) + 1, updatedAt: at, updatedBy: options.actor.id };
      if (current) {
        const result = await this.customizations.updateOne(
          { _id: workspaceId, version: current.version },
          { $set: { settings, version: record.version, updatedAt: at, updatedBy: record.updatedBy } },
          { session },
        );
        if (result.matchedCount === 0) throw conflict('version-conflict', 'The customization changed meanwhile; read it again');
      } else {
        await this.customizations.insertOne(record, { session });
      }
      await this.outbox.add(
        {
          type: 'workspace-customization.updated',
          workspaceId,
          actor: options.actor,
          data: { subject: { type: 'workspace-customization', id: workspaceId }, changedFields, version: record.version },
        },
        { session },
      );
      return { record, changedFields };
    });
  }

  // ---- working standards -----------------------------------------------------------------

  async workingStandards(workspaceId: string): Promise<Stored<StandardsRecord>> {
    const record = await this.standards.findOne({ _id: workspaceId });
    return record ? { record, source: 'stored' } : { record: undefined, source: 'default' };
  }

  /**
   * Publishes the standards with the sections of `patch` applied. The first publication stores
   * the defaults with the patch (even an empty one), so an admin can adopt the defaults as-is.
   */
  async publishStandards(
    workspaceId: string,
    patch: Partial<Record<StandardsField, unknown>>,
    options: { expectedVersion?: number; actor: Actor; now: Date },
  ): Promise<{ record: StandardsRecord; changedFields: string[] }> {
    return this.outbox.transaction(async (session) => {
      const current = await this.standards.findOne({ _id: workspaceId }, { session });
      versionGuard(current?.version ?? 0, options.expectedVersion, 'working standards');
      const { settings, changedFields } = applyStandardsPatch(current?.settings ?? defaultStandards(), patch);
      if (current && changedFields.length === 0) return { record: current, changedFields };
      const at = options.now.toISOString();
      const record: StandardsRecord = { _id: workspaceId, settings, version: (current?.version ?? 0) + 1, publishedAt: at, publishedBy: options.actor.id };
      if (current) {
        const result = await this.standards.updateOne(
          { _id: workspaceId, version: current.version },
          { $set: { settings, version: record.version, publishedAt: at, publishedBy: record.publishedBy } },
          { session },
        );
        if (result.matchedCount === 0) throw conflict('version-conflict', 'The working standards changed meanwhile; read them again');
      } else {
        await this.standards.insertOne(record, { session });
      }
      await this.outbox.add(
        {
          type: 'working-standards.published',
          workspaceId,
          actor: options.actor,
          data: { subject: { type: 'working-standards', id: workspaceId }, changedFields, version: record.version },
        },
        { session },
      );
      return { record, changedFields };
    });
  }

  // ---- knowledge documents ---------------------------------------------------------------

  findDocument(id: string): Promise<KnowledgeDocumentRecord | null> {
    return this.documents.findOne({ _id: id });
  }

  async createDocument(workspaceId: string, fields: DocumentFields, actor: Actor, now: Date): Promise<KnowledgeDocumentRecord> {
    const at = now.toISOString();
    const record: KnowledgeDocumentRecord = { _id: newId('kb'), workspaceId, ...fields, createdAt: at, updatedAt: at, createdBy: actor.id, version: 1 };
    await this.outbox.transaction(async (session) => {
      await this.documents.insertOne(record, { session });
      await this.outbox.add(
        {
          type: 'knowledge-document.created',
          workspaceId,
          actor,
          data: { subject: { type: 'knowledge-document', id: record._id }, ...(fields.projectId ? { projectId: fields.projectId } : {}) },
        },
        { session },
      );
    });
    return record;
  }

  /** Applies the validated fields that differ; the same change again writes nothing. */
  async updateDocument(
    id: string,
    fields: Partial<DocumentFields>,
    clear: readonly (typeof CLEARABLE_DOCUMENT_FIELDS)[number][],
    options: { expectedVersion?: number; actor: Actor; now: Date },
  ): Promise<{ record: KnowledgeDocumentRecord; changedFields: string[] }> {
    return this.outbox.transaction(async (session) => {
      const current = await this.documents.findOne({ _id: id }, { session });
      if (!current) throw new ServiceError('not-found', 'Knowledge document not found');
      versionGuard(current.version, options.expectedVersion, 'document');
      const set: Record<string, unknown> = {};
      const unset: Record<string, ''> = {};
      for (const field of DOCUMENT_FIELDS) {
        const value = fields[field];
        if (value !== undefined && !sameJson(value, current[field])) set[field] = value;
      }
      for (const field of clear) if (current[field] !== undefined) unset[field] = '';
      const changedFields = [...Object.keys(set), ...Object.keys(unset)];
      if (changedFields.length === 0) return { record: current, changedFields };
      const at = options.now.toISOString();
      const update: Record<string, unknown> = { $set: { ...set, updatedAt: at, version: current.version + 1 } };
      if (Object.keys(unset).length > 0) update.$unset = unset;
      const result = await this.documents.updateOne({ _id: id, version: current.version }, update, { session });
      if (result.matchedCount === 0) throw conflict('version-conflict', 'The document changed meanwhile; read it again');
      await this.outbox.add(
        {
          type: 'knowledge-document.updated',
          workspaceId: current.workspaceId,
          actor: options.actor,
          data: { subject: { type: 'knowledge-document', id }, changedFields },
        },
        { session },
      );
      const record = { ...current, ...set, updatedAt: at, version: current.version + 1 } as KnowledgeDocumentRecord;
      for (const field of Object.keys(unset)) delete (record as unknown as Record<string, unknown>)[field];
      return { record, changedFields };
    });
  }

  async deleteDocument(id: string, actor: Actor): Promise<KnowledgeDocumentRecord> {
    return this.outbox.transaction(async (session) => {
      const removed = await this.documents.findOneAndDelete({ _id: id }, { session });
      if (!removed) throw new ServiceError('not-found', 'Knowledge document not found');
      await this.outbox.add(
        { type: 'knowledge-document.deleted', workspaceId: removed.workspaceId, actor, data: { subject: { type: 'knowledge-document', id } } },
        { session },
      );
      return removed;
    });
  }

  /**
   * Documents of one workspace matching every term, ranked by score, then newest change, then
   * id. Ranks at most the newest `GUIDANCE_LIMITS.searchScan` candidates.
   */
  async searchDocuments(
    workspaceId: string,
    options: { terms: readonly string[]; tags: readonly string[]; projectId?: string; initiativeId?: string },
  ): Promise<{ record: KnowledgeDocumentRecord; score: number }[]> {
    const filter: Filter = { workspaceId };
    if (options.tags.length > 0) filter.tags = { $in: [...options.tags] };
    if (options.projectId) filter.projectId = options.projectId;
    if (options.initiativeId) filter.initiativeId = options.initiativeId;
    const rows = await this.documents.find(filter, { sort: { updatedAt: -1, _id: 1 }, limit: GUIDANCE_LIMITS.searchScan });
    const hits: { record: KnowledgeDocumentRecord; score: number }[] = [];
    for (const record of rows) {
      const score = scoreDocument(record, options.terms);
      if (score !== undefined) hits.push({ record, score });
    }
    // Stable sort keeps the newest-first order among equal scores.
    return hits.sort((a, b) => b.score - a.score);
  }

  /** Documents linked to a project or an initiative, newest first. */
  linkedDocuments(workspaceId: string, projectId: string, initiativeId: string | undefined): Promise<KnowledgeDocumentRecord[]> {
    const or: Filter[] = [{ projectId }];
    if (initiativeId) or.push({ initiativeId });
    return this.documents.find({ workspaceId, $or: or }, { sort: { updatedAt: -1, _id: 1 }, limit: GUIDANCE_LIMITS.contextDocuments });
  }

  // ---- setup facts -----------------------------------------------------------------------

  /** What the admin setup path checks, counted from the workspace's records. */
  async setupFacts(workspaceId: string): Promise<SetupFacts> {
    const count = (name: string, filter: Filter) => this.store.collection(name).countDocuments(filter);
    const [projects, members, agents, tasks, tasksWithReadyBrief, knowledgeDocuments, standards, customization] = await Promise.all([
      count('projects', { workspaceId }),
      count('members', { workspaceId }),
      count('agents', { workspaceId }),
      count('tasks', { workspaceId }),
      count('tasks', {
        workspaceId,
        status: { $nin: [...CLOSED_STATUSES] },
        'agent.instructions.objective': { $nin: ['', null] },
        'agent.instructions.expectedOutput': { $nin: ['', null] },
        'agent.instructions.verification.0': { $exists: true },
      }),
      this.documents.countDocuments({ workspaceId }),
      this.standards.countDocuments({ _id: workspaceId }),
      this.customizations.countDocuments({ _id: workspaceId }),
    ]);
    return { projects, members, agents, tasks, tasksWithReadyBrief, knowledgeDocuments, standardsPublished: standards > 0, customized: customization > 0 };
  }
}
