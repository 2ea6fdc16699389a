import { describe, expect, it } from 'vitest';
import { newId, timeOfId } from './index.js';

describe('ids: newId', () => {
  it('ids: carry the prefix and 26 base32 characters', () => {
    expect(newId('iss')).toMatch(/^iss_[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  it('ids: sort in creation order, also within one millisecond', () => {
    const ids = Array.from({ length: 1000 }, () => newId('x', 1_700_000_000_000));
    const later = newId('x', 1_700_000_000_001);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(later > ids[ids.length - 1]!).toBe(true);
  });

  it('ids: encode their creation time', () => {
    expect(timeOfId(newId('evt', 4_000_000_000_123))).toBe(4_000_000_000_123);
    expect(timeOfId('evt_short')).toBeUndefined();
  });
});
