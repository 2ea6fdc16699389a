/* eslint-disable @typescript-eslint/no-explicit-any -- answers are whatever the server sent; tests assert on them. */
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

/** Credentials anywhere in a log line — not only in the fields named for them — are redacted. */
describe('logger: redaction', () => {
  it('logger: token-shaped strings in messages, paths and errors are redacted and the line stays JSON', () => {
    const chunks: string[] = [];
    const logger = createLogger({ name: 'redaction', destination: { write: (chunk: string) => void chunks.push(chunk) } });
    const token = `svc_${'Ab3'.repeat(14)}x1y2z3`;
    const session = 'A'.repeat(20) + '_-' + 'b'.repeat(21);
    const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlLXZhbHVl';
    logger.info({ http: { path: `/api/issues/${token}` }, note: `Bearer ${jwt}`, cookie: `service_session=${session}` }, `saw ${session} "quoted"`);
    logger.error({ err: new Error(`lookup failed for ${token}`) }, 'request failed');
    const text = chunks.join('');
    for (const secret of [token.slice(4), session, jwt]) expect(text).not.toContain(secret);
    const lines = text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
    expect(lines[0]!.http.path).toBe('/api/issues/svc_[redacted]');
    expect(lines[0]!.msg).toBe('saw [redacted] "quoted"');
    expect(lines[0]!.cookie).toBe('service_session=[redacted]');
    expect(lines[1]!.err.message).toBe('lookup failed for svc_[redacted]');
  });

  it('logger: ids, hashes and trace ids are left alone', () => {
    const chunks: string[] = [];
    const logger = createLogger({ name: 'redaction', destination: { write: (chunk: string) => void chunks.push(chunk) } });
    const fields = { workspaceId: 'ws_01M8B3CNRC0KE301SHGXP2ZDT8', sha256: 'a'.repeat(64), traceId: 'b'.repeat(32), reqId: 'req_0123456789abcdef' };
    logger.info(fields, 'plain');
    expect(JSON.parse(chunks.join(''))).toMatchObject(fields);
  });
});
