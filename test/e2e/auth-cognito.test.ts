import {
  AdminCreateUserCommand,
  AdminSetUserPasswordCommand,
  CognitoIdentityProviderClient,
  CreateUserPoolClientCommand,
  CreateUserPoolCommand,
} from '@aws-sdk/client-cognito-identity-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../support/cluster.js';
import { startCognitoLocal, type CognitoLocalHandle } from '../support/cognito-local.js';
import { request } from '../support/http.js';

/** The `cognito` identity provider against the cognito-local emulator: USER_PASSWORD_AUTH through the AWS SDK. */
describe('cognito provider', () => {
  let cognito: CognitoLocalHandle;
  let cluster: Cluster;
  const users = {
    ada: { email: 'ada@example.com', password: 'Ada-Cognito-Pass-1' },
    admin: { email: ADMIN_EMAIL, password: 'Admin-Cognito-Pass-1' },
  };

  beforeAll(async () => {
    cognito = await startCognitoLocal();
    const aws = new CognitoIdentityProviderClient({
      region: 'local',
      endpoint: cognito.endpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const pool = await aws.send(new CreateUserPoolCommand({ PoolName: 'planning-test' }));
    const userPoolId = pool.UserPool!.Id!;
    const client = await aws.send(
      new CreateUserPoolClientCommand({ UserPoolId: userPoolId, ClientName: 'gateway', ExplicitAuthFlows: ['ALLOW_USER_PASSWORD_AUTH'] }),
    );
    for (const user of Object.values(users)) {
      await aws.send(
        new AdminCreateUserCommand({
          UserPoolId: userPoolId,
          Username: user.email,
          TemporaryPassword: 'Temporary-Pass-1',
          MessageAction: 'SUPPRESS',
          UserAttributes: [
            { Name: 'email', Value: user.email },
            { Name: 'email_verified', Value: 'true' },
          ],
        }),
      );
      await aws.send(new AdminSetUserPasswordCommand({ UserPoolId: userPoolId, Username: user.email, Password: user.password, Permanent: true }));
    }
    aws.destroy();
    cluster = await startCluster('all-in-one', {
      env: {
        COGNITO_USER_POOL_ID: userPoolId,
        COGNITO_CLIENT_ID: client.UserPoolClient!.ClientId!,
        COGNITO_REGION: 'local',
        COGNITO_ENDPOINT: cognito.endpoint,
      },
    });
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await cognito?.stop();
  });

  it('cognito: a pool user signs in; mode names the provider; a local user record is created on first sign-in', async () => {
    const res = await request(cluster.baseUrl, 'POST', '/api/auth/login', {
      body: { email: users.ada.email, password: users.ada.password, returnTo: '/board' },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ redirectTo: '/board', mode: 'cognito' });
    const cookie = /service_session=[^;]+/.exec(res.headers.get('set-cookie') ?? '')![0];
    const session = await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie });
    expect(session.body.data.user).toMatchObject({ email: users.ada.email, isAdmin: false });
    expect(session.body.data.session.provider).toBe('cognito');
    const again = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: users.ada });
    const second = /service_session=[^;]+/.exec(again.headers.get('set-cookie') ?? '')![0];
    const sameUser = await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: second });
    expect(sameUser.body.data.user.id).toBe(session.body.data.user.id);
    // The user acts like any other: creates a workspace it owns.
    const ws = await request(cluster.baseUrl, 'POST', '/api/workspaces', { cookie, body: { name: 'Cognito team' } });
    expect(ws.status).toBe(201);
    expect(ws.body.data.ownerId).toBe(session.body.data.user.id);
  });

  it('cognito: the pool user with the bootstrap admin email maps to the system administrator', async () => {
    const res = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: users.admin });
    expect(res.status).toBe(200);
    const cookie = /service_session=[^;]+/.exec(res.headers.get('set-cookie') ?? '')![0];
    const session = await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie });
    expect(session.body.data.user).toMatchObject({ email: ADMIN_EMAIL, isAdmin: true });
    // The local password no longer signs in: Cognito decides.
    const local = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: ADMIN_EMAIL, password: cluster.adminPassword } });
    expect(local.status).toBe(401);
  });

  it('cognito: a wrong password and an unknown user get the same 401', async () => {
    const wrong = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: users.ada.email, password: 'Not-The-Password-1' } });
    const unknown = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: 'nobody@example.com', password: 'Not-The-Password-1' } });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.body).toEqual(unknown.body);
    expect(wrong.body).toEqual({ error: { code: 'unauthorized', message: 'Invalid email or password' } });
  });
});
