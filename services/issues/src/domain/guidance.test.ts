import { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import {
  adminSetupPath,
  applyCustomizationPatch,
  applyStandardsPatch,
  defaultCustomization,
  defaultStandards,
  scoreDocument,
  searchTerms,
  serviceRules,
  snippetOf,
  validateEvidencePolicy,
  validateNewDocument,
} from './guidance.js';
import { allowedMoves } from './task-status.js';

const fieldOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    return (err as ServiceError).details.field;
  }
  throw new Error('expected an invalid-input error');
};

describe('guidance: customization patches', () => {
  it('guidance: only the sections sent change, in canonical order; the same patch again changes nothing', () => {
    const base = defaultCustomization();
    const first = applyCustomizationPatch(base, { enabledViewModes: ['swimlanes', 'cards', 'cards'] , viewPresets: [] });
    expect(first.settings.enabledViewModes).toEqual(['cards', 'swimlanes']);
    expect(first.changedFields).toEqual(['enabledViewModes', 'viewPresets']);
    expect(first.settings.evidencePolicy).toEqual(base.evidencePolicy);
    expect(applyCustomizationPatch(first.settings, { enabledViewModes: ['cards', 'swimlanes'], viewPresets: [] }).changedFields).toEqual([]);
    // The input is never mutated.
    expect(base.enabledViewModes).toHaveLength(4);
  });

  it('guidance: every bad value names its field', () => {
    const base = defaultCustomization();
    expect(fieldOf(() => applyCustomizationPatch(base, { enabledViewModes: [] }))).toBe('enabledViewModes');
    expect(fieldOf(() => applyCustomizationPatch(base, { enabledViewModes: ['board'] }))).toBe('enabledViewModes[0]');
    expect(fieldOf(() => applyCustomizationPatch(base, { viewPresets: [{ id: 'Bad Id', name: 'x', viewMode: 'list' }] }))).toBe('viewPresets[0].id');
    expect(fieldOf(() => applyCustomizationPatch(base, { viewPresets: [{ id: 'a', name: 'x', viewMode: 'list', groupBy: 'colour' }] }))).toBe('viewPresets[0].groupBy');
    expect(fieldOf(() => applyCustomizationPatch(base, { viewPresets: [{ id: 'a', name: 'x', viewMode: 'list', filters: { assignedAgentId: 'Not An Agent' } }] }))).toBe(
      'viewPresets[0].filters.assignedAgentId',
    );
    expect(
      fieldOf(() =>
        applyCustomizationPatch(base, {
          viewPresets: [
            { id: 'a', name: 'x', viewMode: 'list' },
            { id: 'a', name: 'y', viewMode: 'list' },
          ],
        }),
      ),
    ).toBe('viewPresets[1].id');
    expect(fieldOf(() => applyCustomizationPatch(base, { workspaceRules: [{ id: 'r', title: 'T', severity: 'may' }] }))).toBe('workspaceRules[0].severity');
    expect(fieldOf(() => applyCustomizationPatch(base, { handoffPacket: { postAs: 'email' } }))).toBe('handoffPacket.postAs');
    expect(fieldOf(() => validateEvidencePolicy({ minimumItems: 1.5 }))).toBe('evidencePolicy.minimumItems');
    expect(fieldOf(() => validateEvidencePolicy({ acceptedKinds: [] }))).toBe('evidencePolicy.acceptedKinds');
    expect(fieldOf(() => validateEvidencePolicy({ requiredForDone: 'yes' }))).toBe('evidencePolicy.requiredForDone');
  });

  it('guidance: the service rules describe the status moves the status rule allows', () => {
    const moves = serviceRules().find((r) => r.id === 'status-moves');
    expect(moves?.description).toContain(`in-progress → ${allowedMoves('in-progress').join(', ')}`);
  });
});

describe('guidance: setup path and standards', () => {
  it('guidance: each setup step is done exactly when its records exist', () => {
    const none = { projects: 0, members: 1, agents: 0, tasks: 0, tasksWithReadyBrief: 0, knowledgeDocuments: 0, standardsPublished: false, customized: false };
    expect(adminSetupPath(none).every((s) => !s.done)).toBe(true);
    const all = { projects: 2, members: 3, agents: 1, tasks: 9, tasksWithReadyBrief: 4, knowledgeDocuments: 1, standardsPublished: true, customized: true };
    const steps = adminSetupPath(all);
    expect(steps.every((s) => s.done)).toBe(true);
    expect(steps.find((s) => s.id === 'write-briefs')?.detail).toBe('4 tasks with a ready brief');
    expect(steps.find((s) => s.id === 'connect-agent')?.detail).toBe('1 agent');
  });

  it('guidance: standards patches replace lists, drop blank items, and report changed sections', () => {
    const base = defaultStandards();
    const { settings, changedFields } = applyStandardsPatch(base, { definitionOfDone: ['  Tests pass ', ''], summary: base.summary });
    expect(settings.definitionOfDone).toEqual(['Tests pass']);
    expect(changedFields).toEqual(['definitionOfDone']);
    expect(fieldOf(() => applyStandardsPatch(base, { reviewExpectations: 'one' }))).toBe('reviewExpectations');
  });
});

describe('guidance: knowledge search', () => {
  const doc = { title: 'Deploy runbook', body: 'Roll out with a canary. Watch the error rate.', tags: ['ops', 'release'] };

  it('guidance: every word must match somewhere; title 3, tags 2, body 1 per word', () => {
    expect(scoreDocument(doc, searchTerms('deploy'))).toBe(3);
    expect(scoreDocument(doc, searchTerms('RELEASE canary'))).toBe(3);
    expect(scoreDocument(doc, searchTerms('deploy unicorn'))).toBeUndefined();
    expect(scoreDocument(doc, [])).toBe(0);
    // Literal text: regular-expression characters match themselves.
    expect(scoreDocument({ ...doc, body: 'costs $5 (roughly)' }, searchTerms('$5 (roughly)'))).toBe(2);
  });

  it('guidance: search terms are folded, unique and at most ten', () => {
    expect(searchTerms('  Ａbc abc  ABC ')).toEqual(['abc']);
    expect(searchTerms(Array.from({ length: 12 }, (_, i) => `w${i}`).join(' '))).toHaveLength(10);
    expect(searchTerms(undefined)).toEqual([]);
  });

  it('guidance: a snippet shows the text around the first match on one line', () => {
    const body = `${'intro '.repeat(80)}\nthe needle is here ${'outro '.repeat(80)}`;
    const snippet = snippetOf(body, ['needle']);
    expect(snippet).toContain('the needle is here');
    expect(snippet.startsWith('…')).toBe(true);
    expect(snippet.length).toBeLessThanOrEqual(242);
    expect(snippetOf('short\nbody', ['x'])).toBe('short body');
    expect(snippetOf('x'.repeat(500), ['nothing'])).toHaveLength(240);
  });

  it('guidance: new documents are validated field by field', () => {
    expect(validateNewDocument({ title: ' Title ', body: 'b', tags: ['a', 'a'], path: 'docs/x.md' })).toEqual({ title: 'Title', body: 'b', tags: ['a'], path: 'docs/x.md' });
    expect(fieldOf(() => validateNewDocument({ title: 'T', body: 'b', tags: 'a' }))).toBe('tags');
    expect(fieldOf(() => validateNewDocument({ title: 'T', body: 'b', tags: [], projectId: 'bad id' }))).toBe('projectId');
    expect(fieldOf(() => validateNewDocument({ title: 'T', body: 'x'.repeat(50_001), tags: [] }))).toBe('body');
  });
});
