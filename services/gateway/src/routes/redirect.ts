/**
 * The post-login target: `returnTo` when it is a path on this site, else `/`. Never an open
 * redirect: protocol-relative (`//evil`), backslash tricks (`/\evil`), absolute URLs, control
 * characters and anything that a browser would resolve off-site are refused.
 */
export function safeRedirect(returnTo: unknown): string {
  if (typeof returnTo !== 'string' || returnTo.length === 0 || returnTo.length > 2048) return '/';
  if (!returnTo.startsWith('/')) return '/';
  if (returnTo.startsWith('//') || returnTo.startsWith('/\\')) return '/';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(returnTo)) return '/';
  try {
    const resolved = new URL(returnTo, 'https://service.invalid');
    if (resolved.origin !== 'https://service.invalid') return '/';
    return `${resolved.pathname}${resolved.search}${resolved.hash}`;
  } catch {
    return '/';
  }
}
