/**
 * A Spectral function (.spectral.yaml): an operation that accepts API tokens documents the
 * RateLimit and RateLimit-Policy headers on every 2xx and 4xx response except 401 — the answers
 * the service sends them on.
 */
export default function tokenRateLimitHeaders(operation) {
  if (!operation || typeof operation !== 'object') return [];
  const tokens = (operation.security ?? []).some((requirement) => requirement && 'bearerToken' in requirement);
  if (!tokens) return [];
  const problems = [];
  for (const [status, response] of Object.entries(operation.responses ?? {})) {
    if (!/^[24]/.test(status) || status === '401') continue;
    const headers = response?.headers ?? {};
    for (const name of ['RateLimit', 'RateLimit-Policy']) {
      if (!(name in headers)) problems.push({ message: `${status} does not document ${name}`, path: ['responses', status, 'headers'] });
    }
  }
  return problems;
}
