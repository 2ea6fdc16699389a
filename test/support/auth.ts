/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
/** Fixtures for authentication and access tests: users, workspaces, members and API keys over the REST API. */
import { randomBytes } from 'node:crypto';
import { login, request } from './http.js';

export interface TestUser {
  id: string;
  email: string;
  password: string;
  cookie: string;
}

function expectStatus(res: { status: number; body: unknown }, status: number, what: string): void {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
}

/** Creates a user (as a system admin) and signs it in. */
export async function createUser(baseUrl: string, adminCookie: string, label: string, options: { isAdmin?: boolean } = {}): Promise<TestUser> {
  const email = `${label}-${randomBytes(4).toString('hex')}@example.com`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const res = await request(baseUrl, 'POST', '/api/users', {
    cookie: adminCookie,
    body: { email, name: label, password, isAdmin: options.isAdmin ?? false },
  });
  expectStatus(res, 201, `create user ${label}`);
  return { id: res.body.data.id, email, password, cookie: await login(baseUrl, email, password) };
}

export async function createWorkspace(baseUrl: string, cookie: string, name: string, planId = 'enterprise'): Promise<any> {
  const res = await request(baseUrl, 'POST', '/api/workspaces', { cookie, body: { name, planId } });
  expectStatus(res, 201, `create workspace ${name}`);
  return res.body.data;
}

export async function addMember(baseUrl: string, cookie: string, workspaceId: string, userId: string, role: string): Promise<void> {
  const res = await request(baseUrl, 'POST', `/api/workspaces/${workspaceId}/members`, { cookie, body: { userId, role } });
  if (res.status !== 201 && res.status !== 200) expectStatus(res, 201, `add member ${userId} as ${role}`);
}

export interface TestKey {
  id: string;
  token: string;
  scopes: string[];
}

export async function createKey(
  baseUrl: string,
  cookie: string,
  workspaceId: string,
  planId: string,
  scopes: string[],
  agentId = `agent-${randomBytes(3).toString('hex')}`,
): Promise<TestKey> {
  const res = await request(baseUrl, 'POST', '/api/api-keys', { cookie, body: { workspaceId, agentId, planId, scopes, label: 'test key' } });
  expectStatus(res, 201, `create key ${scopes.join(',')}`);
  return { id: res.body.data.apiKey.id, token: res.body.data.token, scopes };
}
