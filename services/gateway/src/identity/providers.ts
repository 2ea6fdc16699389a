import { createHmac } from 'node:crypto';
import { ServiceError } from '@planning/errors';
import { isDuplicateKeyError } from '@planning/store';
import type { UserRecord, UserRepository } from '../store/users.js';
import { decoyHash, hashPassword, needsRehash, verifyPassword } from './passwords.js';

/**
 * The identity provider port: who a sign-in is. Every failure (unknown email, wrong password,
 * disabled user, a challenge the API cannot complete) is the same `null`, so the login route
 * answers one identical 401. An unreachable provider throws `unavailable`.
 */
export interface IdentityProvider {
  /** Named in the login response's `mode`. */
  readonly mode: 'local' | 'cognito';
  authenticate(email: string, password: string): Promise<UserRecord | null>;
}

/** The built-in user directory with argon2id hashes. */
export function createLocalProvider(users: UserRepository): IdentityProvider {
  return {
    mode: 'local',
    async authenticate(email, password) {
      const user = await users.findByEmail(email);
      if (!user || user.disabled || !user.passwordHash) {
        // Verify against a decoy so an unknown email takes as long as a wrong password.
        await verifyPassword(await decoyHash(), password);
        return null;
      }
      if (!(await verifyPassword(user.passwordHash, password))) return null;
      if (needsRehash(user.passwordHash)) await users.setPasswordHash(user._id, await hashPassword(password));
      return user;
    },
  };
}

export interface CognitoOptions {
  userPoolId: string;
  clientId: string;
  clientSecret?: string;
  region?: string;
  endpoint?: string;
}

/** Errors Cognito answers for a sign-in that must simply fail (one identical 401). */
const SIGN_IN_FAILURES = new Set([
  'NotAuthorizedException',
  'UserNotFoundException',
  'UserNotConfirmedException',
  'PasswordResetRequiredException',
  'InvalidParameterException',
  // Real Cognito answers NotAuthorizedException for a wrong password; the emulator this one.
  'InvalidPasswordException',
]);

/**
 * Amazon Cognito with USER_PASSWORD_AUTH. A Cognito user is mapped to the local user record with
 * the same email (the gateway's directory holds roles, memberships and the admin flag), created
 * at the first sign-in without a local password.
 */
export function createCognitoProvider(users: UserRepository, options: CognitoOptions): IdentityProvider {
  const region = options.region ?? options.userPoolId.split('_')[0] ?? 'us-east-1';
  // The AWS SDK loads only when Cognito is configured, and then in the background from the start.
  const sdk = import('@aws-sdk/client-cognito-identity-provider').then((loaded) => {
    // The SDK is CommonJS: in the bundle a dynamic import of it yields its exports under `default`.
    const aws = 'CognitoIdentityProviderClient' in loaded ? loaded : (loaded as unknown as { default: typeof loaded }).default;
    const client = new aws.CognitoIdentityProviderClient({
      region,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      // InitiateAuth and GetUser are public APIs: no AWS credentials are needed or used.
      credentials: { accessKeyId: 'unused', secretAccessKey: 'unused' },
      maxAttempts: 2,
    });
    return { aws, client };
  });
  sdk.catch(() => undefined);
  const secretHash = (username: string): Record<string, string> =>
    options.clientSecret
      ? { SECRET_HASH: createHmac('sha256', options.clientSecret).update(username + options.clientId).digest('base64') }
      : {};

  const localUser = async (email: string, name: string): Promise<UserRecord | null> => {
    const existing = await users.findByEmail(email);
    if (existing) return existing.disabled ? null : existing;
    try {
      return await users.create({ email, name, passwordHash: null, isAdmin: false });
    } catch (err) {
      if (isDuplicateKeyError(err) || (err as { code?: string }).code === 'invalid-input') return users.findByEmail(email);
      throw err;
    }
  };

  return {
    mode: 'cognito',
    async authenticate(email, password) {
      const username = email.trim();
      let accessToken: string | undefined;
      try {
        const { aws, client } = await sdk;
        const auth = await client.send(
          new aws.InitiateAuthCommand({
            AuthFlow: 'USER_PASSWORD_AUTH',
            ClientId: options.clientId,
            AuthParameters: { USERNAME: username, PASSWORD: password, ...secretHash(username) },
          }),
        );
        // A challenge (new password, MFA) cannot be completed through this API: the sign-in fails.
        accessToken = auth.AuthenticationResult?.AccessToken;
        if (!accessToken) return null;
        const profile = await client.send(new aws.GetUserCommand({ AccessToken: accessToken }));
        const attribute = (name: string) => profile.UserAttributes?.find((a) => a.Name === name)?.Value;
        const mappedEmail = (attribute('email') ?? username).toLowerCase();
        return await localUser(mappedEmail, attribute('name') ?? mappedEmail);
      } catch (err) {
        if (SIGN_IN_FAILURES.has((err as { name?: string }).name ?? '')) return null;
        if (err instanceof ServiceError) throw err;
        throw new ServiceError('unavailable', 'The identity provider cannot be reached', {}, { cause: err });
      }
    },
  };
}
