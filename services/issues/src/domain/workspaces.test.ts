import { describe, expect, it } from 'vitest';
import { slugify, validatePlanId, validateWorkspaceName } from './workspaces.js';

describe('workspaces: slugs', () => {
  it('workspaces: slug is lower-case ascii with single dashes', () => {
    expect(slugify('  Agent Ops — Platform Team! ')).toBe('agent-ops-platform-team');
    expect(slugify('Café Déjà Vu')).toBe('cafe-deja-vu');
  });

  it('workspaces: slug falls back when the name has no letters or digits', () => {
    expect(slugify('!!!')).toBe('workspace');
  });

  it('workspaces: numbered candidates for taken slugs', () => {
    expect(slugify('Demo', 3)).toBe('demo-3');
  });

  it('workspaces: slug is bounded', () => {
    expect(slugify('x'.repeat(300)).length).toBe(48);
  });
});

describe('workspaces: validation', () => {
  it('workspaces: names are trimmed and bounded', () => {
    expect(validateWorkspaceName('  Demo ')).toBe('Demo');
    expect(() => validateWorkspaceName('')).toThrow(/must not be empty/);
    expect(() => validateWorkspaceName(42)).toThrow(/must be a string/);
    expect(() => validateWorkspaceName('x'.repeat(201))).toThrow(/at most 200/);
  });

  it('workspaces: plan ids are checked', () => {
    expect(validatePlanId('pro')).toBe('pro');
    expect(() => validatePlanId('gold')).toThrow(/must be one of/);
  });
});
