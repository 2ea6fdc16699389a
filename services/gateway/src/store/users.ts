import { ServiceError } from '@planning/errors';
import { newId } from '@planning/ids';
import { escapeRegExp, isDuplicateKeyError, type Collection, type DocumentStore, type Filter, type StoredDocument } from '@planning/store';

export interface UserRecord extends StoredDocument {
  email: string;
  name: string;
  passwordHash: string | null;
  isAdmin: boolean;
  disabled: boolean;
  /** Sessions created before this instant are refused (set by a password change or reset). */
  sessionsNotBefore?: string;
  createdAt: string;
  updatedAt: string;
}

/** A user as the API shows it: never the password hash. */
export interface PublicUser {
  id: string;
  email: string;
  name: string;
  isAdmin: boolean;
  disabled: boolean;
  createdAt: string;
  updatedAt: string;
}

export function toPublicUser(user: UserRecord): PublicUser {
  return {
    id: user._id,
    email: user.email,
    name: user.name,
    isAdmin: user.isAdmin,
    disabled: user.disabled,
    createdAt: user.createdAt,
    updatedAt: user.updatedAt,
  };
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export interface NewUser {
  email: string;
  name: string;
  passwordHash: string | null;
  isAdmin: boolean;
}

/** The built-in user directory (the `local` identity provider's data and every user's profile). */
export class UserRepository {
  private constructor(private readonly users: Collection<UserRecord>) {}

  static async open(store: DocumentStore): Promise<UserRepository> {
    const users = store.collection<UserRecord>('users');
    await users.createIndexes([{ name: 'email_unique', keys: { email: 1 }, unique: true }]);
    return new UserRepository(users);
  }

  async create(input: NewUser, now = new Date()): Promise<UserRecord> {
    const at = now.toISOString();
    const record: UserRecord = {
      _id: newId('usr'),
      email: normalizeEmail(input.email),
      name: input.name,
      passwordHash: input.passwordHash,
      isAdmin: input.isAdmin,
      disabled: false,
      createdAt: at,
      updatedAt: at,
    };
    try {
      await this.users.insertOne(record);
    } catch (err) {
      if (isDuplicateKeyError(err, 'email_unique')) {
        throw new ServiceError('invalid-input', 'A user with this email already exists', { field: 'email' });
      }
      throw err;
    }
    return record;
  }

  findByEmail(email: string): Promise<UserRecord | null> {
    return this.users.findOne({ email: normalizeEmail(email) });
  }

  findById(id: string): Promise<UserRecord | null> {
    return this.users.findOne({ _id: id });
  }

  count(): Promise<number> {
    return this.users.countDocuments({});
  }

  async setPasswordHash(id: string, passwordHash: string, now = new Date()): Promise<void> {
    await this.users.updateOne({ _id: id }, { $set: { passwordHash, updatedAt: now.toISOString() } });
  }

  /** Users by id; `q` matches email or name literally (case-insensitive). */
  list(options: { q?: string; limit: number; after?: string }): Promise<UserRecord[]> {
    const filter: Filter = {};
    if (options.after) filter._id = { $gt: options.after };
    if (options.q) {
      const pattern = escapeRegExp(options.q);
      filter.$or = [{ email: { $regex: pattern, $options: 'i' } }, { name: { $regex: pattern, $options: 'i' } }];
    }
    return this.users.find(filter, { sort: { _id: 1 }, limit: options.limit });
  }

  /**
   * Applies a change and returns the user as it was and as it is now (null: no such user). A new
   * password hash also ends every session the user had (`sessionsNotBefore`).
   */
  async update(id: string, change: UserChange, now = new Date()): Promise<{ before: UserRecord; after: UserRecord } | null> {
    const at = now.toISOString();
    const set: Partial<UserRecord> = { updatedAt: at };
    if (change.name !== undefined) set.name = change.name;
    if (change.isAdmin !== undefined) set.isAdmin = change.isAdmin;
    if (change.disabled !== undefined) set.disabled = change.disabled;
    if (change.passwordHash !== undefined) {
      set.passwordHash = change.passwordHash;
      set.sessionsNotBefore = at;
    }
    const before = await this.users.findOneAndUpdate({ _id: id }, { $set: set }, { returnDocument: 'before' });
    if (!before) return null;
    return { before, after: { ...before, ...set } };
  }
}

export interface UserChange {
  name?: string;
  isAdmin?: boolean;
  disabled?: boolean;
  passwordHash?: string;
}

/** Whether a session (created at `createdAt`) is still honoured for this user. */
export function sessionAllowed(user: UserRecord, createdAt: string): boolean {
  return !user.disabled && (user.sessionsNotBefore === undefined || Date.parse(createdAt) >= Date.parse(user.sessionsNotBefore));
}
