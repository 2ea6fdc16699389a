/**
 * The world the authorization matrix runs in: workspace A (enterprise, so every scope exists)
 * with an owner, an admin, a member and a viewer; workspace B of another owner; a system
 * administrator; an all-scope token per workspace and, in A, one token lacking each scope.
 */
import { randomBytes } from 'node:crypto';
import { SCOPES, type Scope } from '@planning/plans';
import { addMember, createKey, createUser, createWorkspace, type TestKey, type TestUser } from '../support/auth.js';
import { ADMIN_EMAIL, type Cluster } from '../support/cluster.js';
import { login, request } from '../support/http.js';

export const PRINCIPALS = ['anonymous', 'wrongWorkspaceToken', 'tokenLackingScope', 'viewer', 'member', 'admin', 'systemAdmin'] as const;
export type MatrixPrincipal = (typeof PRINCIPALS)[number];

export interface WorkspaceWorld {
  id: string;
  slug: string;
  owner: TestUser;
  /** All of the enterprise plan's scopes. */
  token: TestKey;
}

export interface World {
  baseUrl: string;
  cluster: Cluster;
  systemAdmin: { cookie: string; password: string; email: string };
  a: WorkspaceWorld & { admin: TestUser; member: TestUser; viewer: TestUser; lacking: Record<Scope, TestKey> };
  b: WorkspaceWorld;
  /** A new user (signed in), e.g. to add as a member. */
  freshUser(label?: string): Promise<TestUser>;
  /** A new key of a workspace, made by its owner (e.g. to revoke). */
  freshKey(workspace: 'a' | 'b', scopes?: Scope[]): Promise<TestKey>;
  /** A new member of a workspace with `role`, added by its owner. */
  freshMember(workspace: 'a' | 'b', role: string): Promise<TestUser>;
  /** A new session cookie for a principal that signs in (for requests that end their session). */
  freshCookie(who: MatrixPrincipal): Promise<string | undefined>;
}

export async function buildWorld(cluster: Cluster): Promise<World> {
  const baseUrl = cluster.baseUrl;
  const adminCookie = await login(baseUrl, ADMIN_EMAIL, cluster.adminPassword);
  const ownerA = await createUser(baseUrl, adminCookie, 'owner-a');
  const ownerB = await createUser(baseUrl, adminCookie, 'owner-b');
  const wsA = await createWorkspace(baseUrl, ownerA.cookie, `Matrix A ${randomBytes(3).toString('hex')}`, 'enterprise');
  const wsB = await createWorkspace(baseUrl, ownerB.cookie, `Matrix B ${randomBytes(3).toString('hex')}`, 'enterprise');
  const roles: Record<string, TestUser> = {};
  for (const role of ['admin', 'member', 'viewer']) {
    roles[role] = await createUser(baseUrl, adminCookie, role);
    await addMember(baseUrl, ownerA.cookie, wsA.id, roles[role]!.id, role);
  }
  const all = [...SCOPES];
  const lacking = {} as Record<Scope, TestKey>;
  for (const scope of SCOPES) {
    lacking[scope] = await createKey(baseUrl, ownerA.cookie, wsA.id, 'enterprise', all.filter((s) => s !== scope), `lacks-${scope.replace(':', '-')}`);
  }
  const world: World = {
    baseUrl,
    cluster,
    systemAdmin: { cookie: adminCookie, password: cluster.adminPassword, email: ADMIN_EMAIL },
    a: {
      id: wsA.id,
      slug: wsA.slug,
      owner: ownerA,
      token: await createKey(baseUrl, ownerA.cookie, wsA.id, 'enterprise', all, 'agent-a'),
      admin: roles.admin!,
      member: roles.member!,
      viewer: roles.viewer!,
      lacking,
    },
    b: { id: wsB.id, slug: wsB.slug, owner: ownerB, token: await createKey(baseUrl, ownerB.cookie, wsB.id, 'enterprise', all, 'agent-b') },
    freshUser: (label = 'fresh') => createUser(baseUrl, adminCookie, label),
    freshKey: (workspace, scopes = all) => {
      const ws = workspace === 'a' ? world.a : world.b;
      return createKey(baseUrl, ws.owner.cookie, ws.id, 'enterprise', scopes);
    },
    async freshMember(workspace, role) {
      const user = await createUser(baseUrl, adminCookie, `m-${role}`);
      const ws = workspace === 'a' ? world.a : world.b;
      await addMember(baseUrl, ws.owner.cookie, ws.id, user.id, role);
      return user;
    },
    async freshCookie(who) {
      const user =
        who === 'systemAdmin' ? world.systemAdmin : who === 'viewer' || who === 'member' || who === 'admin' ? world.a[who] : undefined;
      return user ? login(baseUrl, user.email, user.password) : undefined;
    },
  };
  return world;
}

/** The credentials of a principal for a route that needs `scope` (null: session-only or public). */
export function credentialsOf(world: World, who: MatrixPrincipal, scope: Scope | null): { cookie?: string; token?: string } {
  switch (who) {
    case 'anonymous':
      return {};
    case 'wrongWorkspaceToken':
      return { token: world.b.token.token };
    case 'tokenLackingScope':
      return { token: scope ? world.a.lacking[scope].token : world.a.token.token };
    case 'systemAdmin':
      return { cookie: world.systemAdmin.cookie };
    default:
      return { cookie: world.a[who].cookie };
  }
}

export async function send(world: World, spec: RequestSpec, credentials: { cookie?: string; token?: string }) {
  return request(world.baseUrl, spec.method, spec.path, {
    ...credentials,
    ...(spec.cookie ? { cookie: spec.cookie } : {}),
    ...(spec.headers ? { headers: spec.headers } : {}),
    body: spec.body,
  });
}

export interface RequestSpec {
  method: string;
  path: string;
  body?: unknown;
  /** Overrides the principal's session cookie (requests that end a session use a fresh one). */
  cookie?: string;
  /** Extra request headers (e.g. `idempotency-key`). */
  headers?: Record<string, string>;
}

export type Expectation = Record<MatrixPrincipal, number>;

export interface MatrixEntry {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';
  /** As in the OpenAPI document: `/api/workspaces/{id}/members`. */
  path: string;
  /** The scope a token needs (the route's `config.access.scope`); null for session-only and public routes. */
  scope: Scope | null;
  /** A request against workspace A, made for `who` (make fresh resources when the request uses them up). */
  request(world: World, who: MatrixPrincipal): Promise<RequestSpec> | RequestSpec;
  /**
   * For BOLA: the same request naming workspace B's resources. Omit only for routes that name no
   * workspace resource (login, the workspace list, user creation).
   */
  againstB?(world: World): Promise<RequestSpec> | RequestSpec;
  expect: Expectation;
}

/** Expectations of the common shapes. */
export const expectFor = {
  public: (status = 200): Expectation => ({
    anonymous: status,
    wrongWorkspaceToken: status,
    tokenLackingScope: status,
    viewer: status,
    member: status,
    admin: status,
    systemAdmin: status,
  }),
  /** Session-only; `minRole` is the lowest workspace role that succeeds (`none`: any signed-in user). */
  session: (minRole: 'none' | 'viewer' | 'member' | 'admin' | 'systemAdmin', ok = 200): Expectation => ({
    anonymous: 401,
    wrongWorkspaceToken: 403,
    tokenLackingScope: 403,
    viewer: ['none', 'viewer'].includes(minRole) ? ok : 403,
    member: ['none', 'viewer', 'member'].includes(minRole) ? ok : 403,
    admin: minRole !== 'systemAdmin' ? ok : 403,
    systemAdmin: ok,
  }),
  /** A session or a token with the scope, on a workspace-A resource (tokens of B: 404). */
  workspace: (minRole: 'viewer' | 'member' | 'admin', ok = 200): Expectation => ({
    anonymous: 401,
    wrongWorkspaceToken: 404,
    tokenLackingScope: 403,
    viewer: minRole === 'viewer' ? ok : 403,
    member: minRole !== 'admin' ? ok : 403,
    admin: ok,
    systemAdmin: ok,
  }),
};
