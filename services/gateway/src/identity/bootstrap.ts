import { randomBytes } from 'node:crypto';
import { isDuplicateKeyError } from '@planning/store';
import type { UserRepository } from '../store/users.js';
import { hashPassword } from './passwords.js';

export interface BootstrapLogger {
  info(obj: object, msg?: string): void;
}

/**
 * Creates the system administrator when the user directory is empty (DECISIONS §1). Without a
 * configured password one is generated and printed once to the console — never logged.
 * Several gateway replicas may race here: the unique email index lets one win.
 */
export async function bootstrapAdmin(
  users: UserRepository,
  options: { email: string; password?: string; logger: BootstrapLogger; print?: (line: string) => void },
): Promise<{ created: boolean; generatedPassword?: string }> {
  if ((await users.count()) > 0) return { created: false };
  const generated = options.password === undefined;
  const password = options.password ?? randomBytes(18).toString('base64url');
  try {
    const admin = await users.create({
      email: options.email,
      name: 'System administrator',
      passwordHash: await hashPassword(password),
      isAdmin: true,
    });
    options.logger.info({ userId: admin._id }, 'system administrator created');
  } catch (err) {
    if (isDuplicateKeyError(err) || (err as { code?: string }).code === 'invalid-input') return { created: false };
    throw err;
  }
  if (generated) {
    const print = options.print ?? ((line: string) => process.stdout.write(`${line}\n`));
    print(`System administrator ${options.email} created with password: ${password}`);
    print('This password is shown once; set SERVICE_ADMIN_PASSWORD to choose your own.');
    return { created: true, generatedPassword: password };
  }
  return { created: true };
}
