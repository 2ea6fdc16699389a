import type { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import { completeness, emptyInstructions, mergeInstructions, validateInstructionsPatch, type Instructions } from './task-contract.js';

const full: Instructions = {
  objective: 'Ship search',
  constraints: ['No API change'],
  expectedOutput: 'A pull request',
  verification: ['pnpm test'],
  permissions: ['repo:write'],
  escalation: 'Ask the owner',
};

describe('task contract: completeness', () => {
  it('task contract: an empty brief scores 0 and is not ready', () => {
    expect(completeness(emptyInstructions())).toEqual({
      ready: false,
      score: 0,
      missing: ['goal', 'constraints', 'expectedOutput', 'verification', 'permissions', 'escalation'],
    });
  });

  it('task contract: score is filled sections / 6 with two decimals', () => {
    expect(completeness({ ...emptyInstructions(), objective: 'x' }).score).toBe(0.17);
    expect(completeness({ ...emptyInstructions(), objective: 'x', escalation: 'y' }).score).toBe(0.33);
    expect(completeness({ ...full, permissions: [] }).score).toBe(0.83);
    expect(completeness(full).score).toBe(1);
  });

  it('task contract: ready needs goal, expected output and a verification step (other sections optional)', () => {
    const minimal = { ...emptyInstructions(), objective: 'g', expectedOutput: 'o', verification: ['v'] };
    expect(completeness(minimal)).toMatchObject({ ready: true, score: 0.5 });
    expect(completeness({ ...minimal, verification: [] }).ready).toBe(false);
    expect(completeness({ ...minimal, objective: '   ' }).ready).toBe(false);
    expect(completeness({ ...full, expectedOutput: '' }).ready).toBe(false);
  });
});

describe('task contract: merge', () => {
  it('task contract: sections sent replace theirs; others stay', () => {
    const { next, changed } = mergeInstructions(full, { objective: 'New goal', verification: ['a', 'b'] });
    expect(next).toEqual({ ...full, objective: 'New goal', verification: ['a', 'b'] });
    expect(changed).toEqual(['goal', 'verification']);
  });

  it('task contract: the same patch twice changes nothing the second time (retry-safe)', () => {
    const first = mergeInstructions(emptyInstructions(), { objective: 'g', constraints: ['c'] });
    const second = mergeInstructions(first.next, { objective: 'g', constraints: ['c'] });
    expect(second.changed).toEqual([]);
    expect(second.next).toEqual(first.next);
  });

  it('task contract: null, empty text and empty lists unset a section', () => {
    const { next, changed } = mergeInstructions(full, { objective: null, constraints: [], escalation: '' });
    expect(next.objective).toBe('');
    expect(next.constraints).toEqual([]);
    expect(next.escalation).toBe('');
    expect(changed).toEqual(['goal', 'constraints', 'escalation']);
  });

  it('task contract: merging never changes the brief it was given', () => {
    const before = structuredClone(full);
    mergeInstructions(full, { constraints: ['other'] });
    expect(full).toEqual(before);
  });

  it('task contract: validation trims text, drops blank list items and names bad fields', () => {
    expect(validateInstructionsPatch({ objective: '  goal  ', verification: ['a', '  ', 'b'] })).toEqual({ objective: 'goal', verification: ['a', 'b'] });
    const bad = (raw: Record<string, unknown>): ServiceError => {
      try {
        validateInstructionsPatch(raw);
      } catch (err) {
        return err as ServiceError;
      }
      throw new Error('expected a refusal');
    };
    expect(bad({ objective: 5 }).details.field).toBe('agent.instructions.objective');
    expect(bad({ constraints: 'x' }).details.field).toBe('agent.instructions.constraints');
    expect(bad({ verification: [1] }).details.field).toBe('agent.instructions.verification[0]');
    expect(bad({ expectedOutput: 'x'.repeat(2001) }).details.field).toBe('agent.instructions.expectedOutput');
    expect(bad({ permissions: Array.from({ length: 31 }, () => 'p') }).code).toBe('invalid-input');
  });
});
