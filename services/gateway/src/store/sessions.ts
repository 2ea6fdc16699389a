import { createHash, randomBytes } from 'node:crypto';
import { newId } from '@planning/ids';
import type { Collection, DocumentStore, StoredDocument } from '@planning/store';

/** A signed-in session. Only the SHA-256 of the cookie value is ever stored. */
export interface SessionRecord {
  id: string;
  userId: string;
  provider: string;
  createdAt: string;
  expiresAt: string;
}

/** Where sessions live: the gateway's store, or Redis when configured. */
export interface SessionStore {
  readonly kind: string;
  create(tokenHash: string, session: SessionRecord): Promise<void>;
  /** The session for a token hash, or null when unknown or expired. */
  get(tokenHash: string, now?: Date): Promise<SessionRecord | null>;
  delete(tokenHash: string): Promise<void>;
}

export function hashSessionToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A new cookie value: 256 random bits, base64url. */
export function newSessionToken(): string {
  return randomBytes(32).toString('base64url');
}

export function newSessionRecord(userId: string, provider: string, ttlMs: number, now = new Date()): SessionRecord {
  return {
    id: newId('ses'),
    userId,
    provider,
    createdAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
  };
}

interface StoredSession extends StoredDocument {
  session: SessionRecord;
  /** Date copy of expiresAt for the TTL index (housekeeping only; reads check expiresAt). */
  expiresAtDate: Date;
}

export async function createStoreSessionStore(store: DocumentStore): Promise<SessionStore> {
  const sessions: Collection<StoredSession> = store.collection<StoredSession>('sessions');
  await sessions.createIndexes([{ name: 'expiry_ttl', keys: { expiresAtDate: 1 }, expireAfterSeconds: 0 }]);
  return {
    kind: 'store',
    async create(tokenHash, session) {
      await sessions.insertOne({ _id: tokenHash, session, expiresAtDate: new Date(session.expiresAt) });
    },
    async get(tokenHash, now = new Date()) {
      const found = await sessions.findOne({ _id: tokenHash, expiresAtDate: { $gt: now } });
      return found?.session ?? null;
    },
    async delete(tokenHash) {
      await sessions.deleteOne({ _id: tokenHash });
    },
  };
}
