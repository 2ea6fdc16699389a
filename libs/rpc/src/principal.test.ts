import { createHmac } from 'node:crypto';
import { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import {
  SYSTEM_PRINCIPAL,
  createPrincipalSigner,
  createPrincipalVerifier,
  type Principal,
  type SignedPrincipal,
} from './principal.js';

const SECRET = 'principal-secret-0123456789abcdef-0123';
const USER: Principal = { type: 'user', id: 'u-1', userId: 'u-1', email: 'a@b.test', isAdmin: true, scopes: ['admin'] };

function rejection(verify: () => unknown): ServiceError {
  try {
    verify();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('unauthorized');
    return err as ServiceError;
  }
  throw new Error('expected verify() to throw');
}

function reencode(signed: SignedPrincipal, change: (decoded: Record<string, unknown>) => unknown): string {
  const decoded = JSON.parse(Buffer.from(signed.principal, 'base64url').toString('utf8')) as Record<string, unknown>;
  return Buffer.from(JSON.stringify(change(decoded))).toString('base64url');
}

describe('principal signing', () => {
  it('principal: a signed principal verifies to an equal principal', () => {
    const signed = createPrincipalSigner(SECRET).sign(USER);
    expect(createPrincipalVerifier(SECRET).verify(signed)).toEqual(USER);
    expect(createPrincipalVerifier(SECRET).verify(createPrincipalSigner(SECRET).sign(SYSTEM_PRINCIPAL))).toEqual({
      type: 'system',
      id: 'system',
      isAdmin: true,
      scopes: [],
    });
  });

  it('principal: missing headers are unauthorized', () => {
    const verifier = createPrincipalVerifier(SECRET);
    const signed = createPrincipalSigner(SECRET).sign(USER);
    rejection(() => verifier.verify({}));
    rejection(() => verifier.verify({ principal: signed.principal }));
    rejection(() => verifier.verify({ signature: signed.signature }));
  });

  it('principal: a changed payload or signature is unauthorized', () => {
    const verifier = createPrincipalVerifier(SECRET);
    const signed = createPrincipalSigner(SECRET).sign({ ...USER, isAdmin: false });
    const escalated = reencode(signed, (d) => ({ ...d, p: { ...(d.p as object), isAdmin: true } }));
    expect(rejection(() => verifier.verify({ principal: escalated, signature: signed.signature })).message).toMatch(/signature/);
    rejection(() => verifier.verify({ principal: signed.principal, signature: `${signed.signature}A` }));
    rejection(() => verifier.verify({ principal: signed.principal, signature: 'short' }));
  });

  it('principal: another secret is unauthorized', () => {
    const signed = createPrincipalSigner('other-secret-0123456789abcdef-0123456').sign(USER);
    rejection(() => createPrincipalVerifier(SECRET).verify(signed));
  });

  it('principal: expires after maxAgeMs and refuses issue times in the future', () => {
    let now = 1_000_000;
    const signer = createPrincipalSigner(SECRET, { now: () => now });
    const verifier = createPrincipalVerifier(SECRET, { maxAgeMs: 60_000, clockSkewMs: 5_000, now: () => now });
    const signed = signer.sign(USER);
    now += 60_000;
    expect(verifier.verify(signed)).toEqual(USER);
    now += 1;
    expect(rejection(() => verifier.verify(signed)).message).toMatch(/expired/);
    now = 1_000_000 - 5_001;
    expect(rejection(() => verifier.verify(signed)).message).toMatch(/future/);
  });

  it('principal: a verifier with several secrets accepts each (key rotation)', () => {
    const next = 'next-secret-0123456789abcdef-0123456789';
    const verifier = createPrincipalVerifier([next, SECRET]);
    expect(verifier.verify(createPrincipalSigner(SECRET).sign(USER))).toEqual(USER);
    expect(verifier.verify(createPrincipalSigner(next).sign(USER))).toEqual(USER);
  });

  it('principal: a correctly signed but malformed principal is unauthorized', () => {
    const key = SECRET;
    // Sign arbitrary payloads the way the signer does, to reach the shape checks.
    const signPayload = (payload: unknown): SignedPrincipal => {
      const signer = createPrincipalSigner(key);
      const signed = signer.sign(USER);
      const principal = reencode(signed, () => payload);
      // Re-sign: the HMAC covers the header string.
      return { principal, signature: createHmac('sha256', key).update(principal).digest('base64url') };
    };
    const verifier = createPrincipalVerifier(key);
    const iat = Date.now();
    rejection(() => verifier.verify(signPayload({ p: { ...USER, type: 'root' }, iat })));
    rejection(() => verifier.verify(signPayload({ p: { ...USER, scopes: 'admin' }, iat })));
    rejection(() => verifier.verify(signPayload({ p: { ...USER, isAdmin: 'yes' }, iat })));
    rejection(() => verifier.verify(signPayload({ p: { ...USER, workspaceId: 7 }, iat })));
    rejection(() => verifier.verify(signPayload({ p: USER })));
    // Unknown fields are dropped, not passed on.
    expect(verifier.verify(signPayload({ p: { ...USER, extra: 'x' }, iat }))).toEqual(USER);
  });

  it('principal: short secrets are refused', () => {
    expect(() => createPrincipalSigner('too-short')).toThrow(/at least 32 bytes/);
    expect(() => createPrincipalVerifier('too-short')).toThrow(/at least 32 bytes/);
    expect(() => createPrincipalVerifier([])).toThrow(/at least one secret/);
  });
});
