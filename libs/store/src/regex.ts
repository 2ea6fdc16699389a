/**
 * Escapes text for use inside a `$regex` so it matches literally (user search input must never be
 * interpreted as a pattern).
 */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
