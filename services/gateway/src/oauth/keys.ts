/**
 * The authorization server's keys, derived from one secret so that every gateway replica holds
 * the same ones without storing or shipping key material: an Ed25519 signing key (id tokens, the
 * JWKS) and the keys that sign its cookies (interaction and session state between the browser's
 * steps, which may land on different replicas). HKDF-SHA256 with a distinct label per key.
 */
import { createHash, createPrivateKey, hkdfSync } from 'node:crypto';

/** PKCS #8 DER header of an Ed25519 private key; the 32-byte seed follows (RFC 8410). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

function derive(secret: string, label: string, length = 32): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), `planning-service oauth ${label}`, length));
}

export interface AuthorizationServerKeys {
  /** A private JWK set (one Ed25519 key) for oidc-provider's `jwks`. */
  jwks: { keys: Record<string, unknown>[] };
  /** For oidc-provider's `cookies.keys` (Koa's keygrip). */
  cookieKeys: string[];
}

export function deriveKeys(secret: string): AuthorizationServerKeys {
  const seed = derive(secret, 'signing key ed25519');
  const jwk = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' }).export({ format: 'jwk' });
  const kid = createHash('sha256').update(String(jwk.x)).digest('base64url').slice(0, 16);
  return {
    jwks: { keys: [{ ...jwk, kid, alg: 'EdDSA', use: 'sig' }] },
    cookieKeys: [derive(secret, 'cookie key').toString('base64url')],
  };
}
