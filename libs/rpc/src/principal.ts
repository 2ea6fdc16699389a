import { createHmac, timingSafeEqual } from 'node:crypto';
import { ServiceError } from '@planning/errors';

export type PrincipalType = 'user' | 'api-key' | 'system' | 'anonymous';

/** Who is calling, as authenticated by the gateway and passed to services in gRPC metadata. */
export interface Principal {
  type: PrincipalType;
  id: string;
  userId?: string;
  email?: string;
  isAdmin: boolean;
  /** API-key tokens are tied to one workspace. */
  workspaceId?: string;
  agentId?: string;
  keyId?: string;
  planId?: string;
  scopes: string[];
}

/** Services acting on their own behalf (bus consumers, schedulers). */
export const SYSTEM_PRINCIPAL: Readonly<Principal> = Object.freeze({
  type: 'system',
  id: 'system',
  isAdmin: true,
  scopes: Object.freeze([]) as unknown as string[],
});

/** What a client sends when the caller names no principal: authenticated transport, no rights. */
export const ANONYMOUS_PRINCIPAL: Readonly<Principal> = Object.freeze({
  type: 'anonymous',
  id: 'anonymous',
  isAdmin: false,
  scopes: Object.freeze([]) as unknown as string[],
});

/** Metadata keys that carry the signed principal. */
export const PRINCIPAL_HEADER = 'x-planning-principal';
export const PRINCIPAL_SIGNATURE_HEADER = 'x-planning-principal-sig';

/** The two header values of a signed principal. */
export interface SignedPrincipal {
  principal: string;
  signature: string;
}

export interface PrincipalSigner {
  sign(principal: Principal): SignedPrincipal;
}

export interface PrincipalVerifier {
  /** The principal of a correctly signed, unexpired header pair; throws `ServiceError('unauthorized')` otherwise. */
  verify(headers: { principal?: string | undefined; signature?: string | undefined }): Principal;
}

/** An HMAC key: at least 32 bytes (a string is taken as UTF-8). */
export type PrincipalSecret = string | Uint8Array;

export interface PrincipalVerifierOptions {
  /** How long a signed header stays valid after it was issued. Default 5 minutes. */
  maxAgeMs?: number;
  /** Tolerated clock skew for an issued-at in the future. Default 30 seconds. */
  clockSkewMs?: number;
  now?: () => number;
}

export interface PrincipalSignerOptions {
  now?: () => number;
}

const MIN_SECRET_BYTES = 32;
const PRINCIPAL_TYPES: ReadonlySet<string> = new Set<PrincipalType>(['user', 'api-key', 'system', 'anonymous']);
const OPTIONAL_STRING_FIELDS = ['userId', 'email', 'workspaceId', 'agentId', 'keyId', 'planId'] as const;

function toKey(secret: PrincipalSecret): Buffer {
  const key = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret);
  if (key.length < MIN_SECRET_BYTES) {
    throw new Error(`principal signing secret must be at least ${MIN_SECRET_BYTES} bytes`);
  }
  return key;
}

function mac(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(payload, 'utf8').digest();
}

/**
 * Signs principals for outgoing calls. The header is base64url JSON `{ p: principal, iat }` and
 * the signature an HMAC-SHA256 over exactly that header string, so nothing is re-serialised
 * before verification.
 */
export function createPrincipalSigner(secret: PrincipalSecret, options: PrincipalSignerOptions = {}): PrincipalSigner {
  const key = toKey(secret);
  const now = options.now ?? Date.now;
  return {
    sign(principal) {
      const payload = Buffer.from(JSON.stringify({ p: principal, iat: now() }), 'utf8').toString('base64url');
      return { principal: payload, signature: mac(key, payload).toString('base64url') };
    },
  };
}

/**
 * Verifies signed principals on incoming calls. Accepts several secrets so a key can be rotated:
 * signers switch to the new key while verifiers accept both.
 */
export function createPrincipalVerifier(
  secret: PrincipalSecret | readonly PrincipalSecret[],
  options: PrincipalVerifierOptions = {},
): PrincipalVerifier {
  const secrets: readonly PrincipalSecret[] = Array.isArray(secret) ? secret : [secret as PrincipalSecret];
  if (secrets.length === 0) throw new Error('createPrincipalVerifier: at least one secret is required');
  const keys = secrets.map(toKey);
  const maxAgeMs = options.maxAgeMs ?? 5 * 60_000;
  const clockSkewMs = options.clockSkewMs ?? 30_000;
  const now = options.now ?? Date.now;
  const reject = (why: string): never => {
    throw new ServiceError('unauthorized', `Invalid principal: ${why}`);
  };

  return {
    verify({ principal: payload, signature }) {
      if (!payload || !signature) return reject('missing signed principal');
      const given = Buffer.from(signature, 'base64url');
      // Every key is tried (no early exit) so timing does not reveal which one matched.
      let valid = false;
      for (const key of keys) {
        const expected = mac(key, payload);
        if (given.length === expected.length && timingSafeEqual(given, expected)) valid = true;
      }
      if (!valid) return reject('bad signature');

      let decoded: unknown;
      try {
        decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        return reject('malformed principal');
      }
      const { p, iat } = (decoded ?? {}) as { p?: unknown; iat?: unknown };
      if (typeof iat !== 'number' || !Number.isFinite(iat)) return reject('missing issued-at');
      const age = now() - iat;
      if (age > maxAgeMs) return reject('expired');
      if (age < -clockSkewMs) return reject('issued in the future');
      return parsePrincipal(p) ?? reject('malformed principal');
    },
  };
}

/**
 * The principal a direct (in-process) call hands its handler: a copy holding only the known
 * fields, checked like a verified header's; throws `ServiceError('unauthorized')` when malformed.
 */
export function copyPrincipal(principal: Principal): Principal {
  const copy = parsePrincipal(principal);
  if (!copy) throw new ServiceError('unauthorized', 'Invalid principal: malformed principal');
  return copy;
}

/** A copy holding only the known fields, or undefined when the shape is wrong. */
function parsePrincipal(value: unknown): Principal | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const raw = value as Record<string, unknown>;
  if (typeof raw.type !== 'string' || !PRINCIPAL_TYPES.has(raw.type)) return undefined;
  if (typeof raw.id !== 'string' || typeof raw.isAdmin !== 'boolean') return undefined;
  if (!Array.isArray(raw.scopes) || !raw.scopes.every((s) => typeof s === 'string')) return undefined;
  const principal: Principal = {
    type: raw.type as PrincipalType,
    id: raw.id,
    isAdmin: raw.isAdmin,
    scopes: [...(raw.scopes as string[])],
  };
  for (const field of OPTIONAL_STRING_FIELDS) {
    const v = raw[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') return undefined;
    principal[field] = v;
  }
  return principal;
}
