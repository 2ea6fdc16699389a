import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API tokens (DECISIONS §3): `svc_` + 43 base62 characters of randomness (32 bytes, 256 bits) +
 * 6 base62 characters of the CRC32 of everything before them. Like GitHub's tokens: secret
 * scanners recognise the prefix, and a mistyped or truncated token fails the checksum, so the
 * server rejects it before any lookup. Only the SHA-256 of a token is ever stored.
 */
export const TOKEN_PREFIX = 'svc_';
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_CHARS = 43; // 62^43 > 2^256
const CHECKSUM_CHARS = 6; // 62^6 > 2^32
export const TOKEN_LENGTH = TOKEN_PREFIX.length + RANDOM_CHARS + CHECKSUM_CHARS;
const TOKEN_PATTERN = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${RANDOM_CHARS + CHECKSUM_CHARS}}$`);

function base62(value: bigint, width: number): string {
  let out = '';
  let n = value;
  while (n > 0n) {
    out = ALPHABET[Number(n % 62n)]! + out;
    n /= 62n;
  }
  return out.padStart(width, '0');
}

function checksumOf(body: string): string {
  return base62(BigInt(crc32(body)), CHECKSUM_CHARS);
}

export function newApiToken(): string {
  const random = base62(BigInt(`0x${randomBytes(32).toString('hex')}`), RANDOM_CHARS);
  const body = `${TOKEN_PREFIX}${random}`;
  return `${body}${checksumOf(body)}`;
}

/** Whether a presented string is shaped like one of our tokens and its checksum matches. */
export function isWellFormedApiToken(token: string): boolean {
  if (token.length !== TOKEN_LENGTH || !TOKEN_PATTERN.test(token)) return false;
  const body = token.slice(0, -CHECKSUM_CHARS);
  return checksumOf(body) === token.slice(-CHECKSUM_CHARS);
}

/** What is stored instead of the token. */
export function hashApiToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
