import { describe, expect, it } from 'vitest';
import { safeRedirect } from './redirect.js';

describe('login: redirect target', () => {
  it('login: keeps same-site paths with query and fragment', () => {
    expect(safeRedirect('/projects/p1?tab=tasks#top')).toBe('/projects/p1?tab=tasks#top');
  });

  it.each([
    'https://evil.example/',
    '//evil.example',
    '/\\evil.example',
    '\\\\evil.example',
    'javascript:alert(1)',
    '/%0d%0aSet-Cookie:x=y',
    '/foo\nbar',
    'evil.example',
    '',
    undefined,
    42,
  ])('login: refuses open-redirect attempt %j', (attempt) => {
    const target = safeRedirect(attempt);
    expect(target.startsWith('/')).toBe(true);
    expect(target.startsWith('//')).toBe(false);
    expect(new URL(target, 'https://service.invalid').origin).toBe('https://service.invalid');
    if (attempt !== '/%0d%0aSet-Cookie:x=y') expect(target).toBe('/');
  });
});
