/**
 * Credential-shaped text, wherever it turns up (a token pasted into a URL path, a cookie value in
 * a query string, a bearer header quoted in an error), replaced before it reaches a log line or
 * an error message. Patterns, not field names: the field a secret lands in is the caller's choice.
 */
const PATTERNS: ReadonlyArray<[RegExp, string]> = [
  // API tokens: `svc_` + base62 (docs/auth.md); a mistyped or truncated one is still a secret.
  [/svc_[A-Za-z0-9]{8,}/g, 'svc_[redacted]'],
  // JWTs (OAuth access and ID tokens): three base64url parts, the first a JSON header.
  [/eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, '[redacted-jwt]'],
  // An Authorization header's credentials, whatever their shape.
  [/\b(Bearer|Basic)(\s+|%20|\+)[A-Za-z0-9._~+/=%-]{8,}/gi, '$1 [redacted]'],
  // The session cookie by name, and 256-bit random values (session cookies, opaque OAuth tokens):
  // exactly 43 base64url characters standing alone.
  [/service_session(=|%3D)[A-Za-z0-9_%-]+/gi, 'service_session=[redacted]'],
  [/(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g, '[redacted]'],
];

/** `text` with every credential-shaped part replaced; the rest stays as it was. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/** Whether `text` holds anything `redactSecrets` would replace. */
export function looksSecret(text: string): boolean {
  return PATTERNS.some(([pattern]) => new RegExp(pattern.source, pattern.flags.replace('g', '')).test(text));
}
