import { hash, verify } from '@node-rs/argon2';

/**
 * Password hashing with argon2id at OWASP's recommended minimum (m = 19 MiB, t = 2, p = 1).
 * The hash string (PHC format) carries its own salt and parameters, so raising the cost later
 * only needs `needsRehash` at the next successful login.
 */
const PARAMS = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return hash(password, PARAMS);
}

export async function verifyPassword(hashString: string, password: string): Promise<boolean> {
  try {
    return await verify(hashString, password);
  } catch {
    return false;
  }
}

export function needsRehash(hashString: string): boolean {
  return !hashString.startsWith(`$argon2id$v=19$m=${PARAMS.memoryCost},t=${PARAMS.timeCost},p=${PARAMS.parallelism}$`);
}

/**
 * A hash of a random password, verified against when the email is unknown so that a wrong email
 * and a wrong password take the same time.
 */
let decoy: Promise<string> | undefined;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(`decoy-${Math.random()}`);
  return decoy;
}
