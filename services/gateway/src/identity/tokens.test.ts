import { describe, expect, it } from 'vitest';
import { hashApiToken, isWellFormedApiToken, newApiToken, TOKEN_LENGTH } from './tokens.js';

describe('tokens: format', () => {
  it('tokens: svc_ prefix, fixed length, base62, valid checksum, unique', () => {
    const tokens = Array.from({ length: 200 }, newApiToken);
    for (const token of tokens) {
      expect(token).toMatch(/^svc_[0-9A-Za-z]+$/);
      expect(token).toHaveLength(TOKEN_LENGTH);
      expect(isWellFormedApiToken(token)).toBe(true);
    }
    expect(new Set(tokens).size).toBe(tokens.length);
  });

  it('tokens: any single-character typo fails the checksum', () => {
    const token = newApiToken();
    for (let i = 4; i < token.length; i++) {
      const c = token[i] === 'a' ? 'b' : 'a';
      expect(isWellFormedApiToken(`${token.slice(0, i)}${c}${token.slice(i + 1)}`)).toBe(false);
    }
  });

  it('tokens: truncated, padded, foreign or empty strings are malformed', () => {
    const token = newApiToken();
    for (const bad of [token.slice(0, -1), `${token}x`, token.replace('svc_', 'ghp_'), '', 'svc_', `${token.slice(0, -1)}-`]) {
      expect(isWellFormedApiToken(bad)).toBe(false);
    }
  });

  it('tokens: only a SHA-256 hex digest is stored', () => {
    const token = newApiToken();
    const hash = hashApiToken(token);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).not.toContain(token.slice(4, 20));
  });
});
