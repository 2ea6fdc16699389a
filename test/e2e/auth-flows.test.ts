import { execFileSync } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { findBinary } from '@planning/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, createKey, createUser, createWorkspace, type TestUser } from '../support/auth.js';
import { findSecrets, readTree } from '../support/canary.js';
import { ADMIN_EMAIL, startCluster, type Cluster, type Mode } from '../support/cluster.js';
import { eventually, login, request } from '../support/http.js';

const cookieValue = (setCookie: string | null): string => /service_session=([^;]*)/.exec(setCookie ?? '')?.[1] ?? '';

/**
 * Sign-in, sessions, users, members, workspace changes, API keys, usage and the audit of
 * denials, in both modes. The last tests throttle the test client's address and then scan
 * everything the processes stored and printed for the secrets used along the way.
 */
describe.each<Mode>(['all-in-one', 'distributed'])('auth flows (%s)', (mode) => {
  let cluster: Cluster;
  let admin: string;
  let owner: TestUser;
  let viewer: TestUser;
  let workspace: { id: string };
  /** Every raw secret the suite used: none may appear in stored records, the audit store or logs. */
  const secrets: string[] = [];

  beforeAll(async () => {
    cluster = await startCluster(mode, {
      env: { LOGIN_MAX_FAILURES_PER_EMAIL: '3', LOGIN_MAX_FAILURES_PER_ADDRESS: '20', WORKSPACE_CACHE_MS: '0' },
    });
    admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
    owner = await createUser(cluster.baseUrl, admin, 'owner');
    viewer = await createUser(cluster.baseUrl, admin, 'viewer');
    workspace = await createWorkspace(cluster.baseUrl, owner.cookie, `Auth ${mode}`, 'pro');
    await addMember(cluster.baseUrl, owner.cookie, workspace.id, viewer.id, 'viewer');
    secrets.push(cluster.adminPassword, owner.password, viewer.password, cookieValue(admin), cookieValue(owner.cookie), cookieValue(viewer.cookie));
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('sessions: a new cookie value at every sign-in; the old session ends; logout clears the cookie', async () => {
    const first = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: owner.email, password: owner.password } });
    const firstCookie = `service_session=${cookieValue(first.headers.get('set-cookie'))}`;
    const setCookie = first.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Lax/i);
    expect(setCookie).toMatch(/Max-Age=43200/);
    expect(setCookie).not.toMatch(/Secure/i);
    const second = await request(cluster.baseUrl, 'POST', '/api/auth/login', {
      cookie: firstCookie,
      body: { email: owner.email.toUpperCase(), password: owner.password },
    });
    expect(second.status).toBe(200);
    const secondCookie = `service_session=${cookieValue(second.headers.get('set-cookie'))}`;
    secrets.push(cookieValue(firstCookie), cookieValue(secondCookie));
    expect(secondCookie).not.toBe(firstCookie);
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: firstCookie })).status).toBe(401);

    const session = await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: secondCookie });
    expect(session.status).toBe(200);
    expect(session.body.data.user).toEqual({
      id: owner.id,
      email: owner.email,
      name: 'owner',
      isAdmin: false,
      disabled: false,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(session.body.data.session).toEqual({ id: expect.stringMatching(/^ses_/), provider: 'local', createdAt: expect.any(String), expiresAt: expect.any(String) });
    expect(Date.parse(session.body.data.session.expiresAt) - Date.parse(session.body.data.session.createdAt)).toBe(12 * 3600 * 1000);

    const out = await request(cluster.baseUrl, 'POST', '/api/auth/logout', { cookie: secondCookie });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ data: { signedOut: true } });
    expect(out.headers.get('set-cookie')).toMatch(/service_session=;.*(Max-Age=0|Expires=Thu, 01 Jan 1970)/i);
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: secondCookie })).status).toBe(401);
    // A token is not a session.
    const anonymous = await request(cluster.baseUrl, 'GET', '/api/auth/session');
    expect(anonymous.status).toBe(401);
  });

  it('login: an unknown email and a wrong password get identical 401s', async () => {
    const canary = `canary-password-${mode}-0123456789`;
    secrets.push(canary);
    const wrong = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: viewer.email, password: canary } });
    const unknown = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: 'nobody-here@example.com', password: canary } });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.body).toEqual(unknown.body);
    expect(wrong.body).toEqual({ error: { code: 'unauthorized', message: 'Invalid email or password' } });
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect([...wrong.headers.keys()].sort()).toEqual([...unknown.headers.keys()].sort());
  });

  it('login: open-redirect attempts land on /; same-site paths are kept', async () => {
    const attempts = ['https://evil.example/x', '//evil.example', '/\\evil.example', 'javascript:alert(1)', '\\\\evil', 'evil.example/path', '/%0d%0aLocation:x'];
    for (const returnTo of attempts) {
      const res = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: viewer.email, password: viewer.password, returnTo } });
      expect(res.status).toBe(200);
      expect(new URL(res.body.data.redirectTo, 'https://service.invalid').origin).toBe('https://service.invalid');
      if (returnTo !== '/%0d%0aLocation:x') expect(res.body.data.redirectTo).toBe('/');
      secrets.push(cookieValue(res.headers.get('set-cookie')));
    }
    const kept = await request(cluster.baseUrl, 'POST', '/api/auth/login', {
      body: { email: viewer.email, password: viewer.password, returnTo: '/projects/p1?tab=tasks' },
    });
    expect(kept.body.data).toEqual({ redirectTo: '/projects/p1?tab=tasks', mode: 'local' });
    secrets.push(cookieValue(kept.headers.get('set-cookie')));
  });

  it('login: failures per email are throttled (429 with Retry-After) even for the right password; other emails are not', async () => {
    const target = await createUser(cluster.baseUrl, admin, 'throttled');
    secrets.push(target.password, cookieValue(target.cookie));
    for (let i = 0; i < 3; i++) {
      const res = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: target.email, password: `wrong-${i}-password` } });
      expect(res.status).toBe(401);
    }
    const throttled = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: target.email, password: target.password } });
    expect(throttled.status).toBe(429);
    expect(throttled.body.error.code).toBe('rate-limited');
    expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThan(0);
    // The same throttle for an unknown email: no hint that an account exists.
    for (let i = 0; i < 3; i++) {
      await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: 'ghost@example.com', password: `wrong-${i}-password` } });
    }
    expect((await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: 'ghost@example.com', password: 'x' } })).status).toBe(429);
    const other = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: viewer.email, password: viewer.password } });
    expect(other.status).toBe(200);
    secrets.push(cookieValue(other.headers.get('set-cookie')));
  });

  it('users: only system administrators create users; emails are unique; no hash is shown', async () => {
    const body = { email: `new-${mode}@example.com`, name: 'New', password: 'a-long-enough-password' };
    secrets.push(body.password);
    const byOwner = await request(cluster.baseUrl, 'POST', '/api/users', { cookie: owner.cookie, body });
    expect(byOwner.status).toBe(403);
    const created = await request(cluster.baseUrl, 'POST', '/api/users', { cookie: admin, body });
    expect(created.status).toBe(201);
    expect(Object.keys(created.body.data).sort()).toEqual(['createdAt', 'disabled', 'email', 'id', 'isAdmin', 'name', 'updatedAt']);
    const again = await request(cluster.baseUrl, 'POST', '/api/users', { cookie: admin, body: { ...body, email: body.email.toUpperCase() } });
    expect(again.status).toBe(400);
    expect(again.body.error).toMatchObject({ code: 'invalid-input', field: 'email' });
    const short = await request(cluster.baseUrl, 'POST', '/api/users', { cookie: admin, body: { email: 'short@example.com', name: 'S', password: 'short' } });
    expect(short.status).toBe(400);
    expect(short.body.error.field).toBe('password');
  });

  it('users: administrators list, rename, disable and reset users; a disabled or reset user’s sessions end at once', async () => {
    const carol = await createUser(cluster.baseUrl, admin, `carol-${mode}`);
    const carolAgain = await login(cluster.baseUrl, carol.email, carol.password);
    secrets.push(carol.password, cookieValue(carol.cookie), cookieValue(carolAgain));
    const path = `/api/users/${carol.id}`;

    // The list: literal text in email or name, pages without gaps.
    const found = await request(cluster.baseUrl, 'GET', `/api/users?q=${encodeURIComponent(`CAROL-${mode}`)}`, { cookie: admin });
    expect(found.status).toBe(200);
    expect(found.body.data.map((u: { id: string }) => u.id)).toEqual([carol.id]);
    expect((await request(cluster.baseUrl, 'GET', '/api/users?q=.*', { cookie: admin })).body.data).toEqual([]);
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: { data: { id: string }[]; page: { nextCursor: string | null } } } = await request(cluster.baseUrl, 'GET', `/api/users?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { cookie: admin });
      expect(res.status).toBe(200);
      ids.push(...res.body.data.map((u: { id: string }) => u.id));
      cursor = res.body.page.nextCursor;
    } while (cursor);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toContain(carol.id);
    expect((await request(cluster.baseUrl, 'GET', '/api/users?limit=0', { cookie: admin })).body.error.field).toBe('limit');

    // Bad changes: nothing applied.
    for (const [body, field] of [[{}, null], [{ disabled: 'yes' }, 'disabled'], [{ name: '   ' }, 'name'], [{ password: 'short' }, 'password'], [{ role: 'x' }, 'role']] as const) {
      const res = await request(cluster.baseUrl, 'PATCH', path, { cookie: admin, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe('invalid-input');
      if (field) expect(res.body.error.field).toBe(field);
    }
    expect((await request(cluster.baseUrl, 'PATCH', '/api/users/usr_missing', { cookie: admin, body: { name: 'X' } })).status).toBe(404);
    const me = (await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: admin })).body.data.user.id as string;
    expect((await request(cluster.baseUrl, 'PATCH', `/api/users/${me}`, { cookie: admin, body: { disabled: true } })).body.error.field).toBe('disabled');
    expect((await request(cluster.baseUrl, 'PATCH', `/api/users/${me}`, { cookie: admin, body: { isAdmin: false } })).body.error.field).toBe('isAdmin');

    const renamed = await request(cluster.baseUrl, 'PATCH', path, { cookie: admin, body: { name: ' Carol C. ' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({ id: carol.id, name: 'Carol C.', disabled: false });

    // Disabled: both sessions stop at once; signing in answers like a wrong password.
    expect((await request(cluster.baseUrl, 'PATCH', path, { cookie: admin, body: { disabled: true } })).body.data.disabled).toBe(true);
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: carol.cookie })).status).toBe(401);
    expect((await request(cluster.baseUrl, 'GET', '/api/workspaces', { cookie: carolAgain })).status).toBe(401);
    const refused = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: carol.email, password: carol.password } });
    expect(refused.status).toBe(401);
    expect(refused.body.error.message).toBe('Invalid email or password');

    // Enabled again, then a reset: sessions from before the reset stay ended; the new password works.
    await request(cluster.baseUrl, 'PATCH', path, { cookie: admin, body: { disabled: false } });
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: carol.cookie })).status).toBe(200);
    const newPassword = `reset-${mode}-password-1`;
    secrets.push(newPassword);
    expect((await request(cluster.baseUrl, 'PATCH', path, { cookie: admin, body: { password: newPassword } })).status).toBe(200);
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: carol.cookie })).status).toBe(401);
    expect((await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: carol.email, password: carol.password } })).status).toBe(401);
    const fresh = await login(cluster.baseUrl, carol.email, newPassword);
    secrets.push(cookieValue(fresh));
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: fresh })).status).toBe(200);

    // The audit names the changed fields, never a value.
    const events = await eventually(async () => {
      const res = await request(cluster.baseUrl, 'GET', '/api/admin/audit-events?limit=200', { cookie: admin });
      const list = (res.body.data as Array<{ type: string; subject: { id: string }; changedFields?: string[] }>).filter(
        (e) => e.type === 'user.updated' && e.subject.id === carol.id,
      );
      return list.length >= 4 ? list : undefined;
    }, 20_000, 'user.updated events');
    expect(events.flatMap((e) => e.changedFields ?? []).sort()).toEqual(['disabled', 'disabled', 'name', 'password']);
  });

  it('users: a signed-in user changes their own password; other sessions end, this one continues', async () => {
    const dave = await createUser(cluster.baseUrl, admin, `dave-${mode}`);
    const other = await login(cluster.baseUrl, dave.email, dave.password);
    const next = `dave-${mode}-new-password`;
    secrets.push(dave.password, next, cookieValue(dave.cookie), cookieValue(other));
    const change = (body: unknown, cookie = dave.cookie) => request(cluster.baseUrl, 'POST', '/api/auth/password', { cookie, body });

    const wrong = await change({ currentPassword: 'not-my-password', newPassword: next });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toMatchObject({ code: 'invalid-input', field: 'currentPassword' });
    expect((await change({ currentPassword: dave.password, newPassword: dave.password })).body.error.field).toBe('newPassword');
    expect((await change({ currentPassword: dave.password, newPassword: 'short' })).body.error.field).toBe('newPassword');
    expect((await change({ currentPassword: dave.password })).body.error.field).toBe('newPassword');
    const viaToken = await request(cluster.baseUrl, 'POST', '/api/auth/password', { token: 'svc_x', body: { currentPassword: 'a', newPassword: next } });
    expect(viaToken.status).toBe(401);
    // Nothing changed so far: the old password still signs in.
    secrets.push(cookieValue(await login(cluster.baseUrl, dave.email, dave.password)));

    const changed = await change({ currentPassword: dave.password, newPassword: next });
    expect(changed.status).toBe(200);
    expect(changed.body.data).toEqual({ changed: true });
    const renewed = `service_session=${cookieValue(changed.headers.get('set-cookie'))}`;
    secrets.push(cookieValue(renewed));
    expect(renewed).not.toBe(dave.cookie);
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: renewed })).status).toBe(200);
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: dave.cookie })).status).toBe(401);
    expect((await request(cluster.baseUrl, 'GET', '/api/auth/session', { cookie: other })).status).toBe(401);
    expect((await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: dave.email, password: dave.password } })).status).toBe(401);
    secrets.push(cookieValue(await login(cluster.baseUrl, dave.email, next)));
  });

  it('members: roles by userId or email; admins manage, owners own; the last owner stays', async () => {
    const ws = await createWorkspace(cluster.baseUrl, owner.cookie, `Members ${mode}`, 'hobbyist');
    const alice = await createUser(cluster.baseUrl, admin, 'alice');
    const bob = await createUser(cluster.baseUrl, admin, 'bob');
    secrets.push(alice.password, bob.password, cookieValue(alice.cookie), cookieValue(bob.cookie));
    const path = `/api/workspaces/${ws.id}/members`;

    const added = await request(cluster.baseUrl, 'POST', path, { cookie: owner.cookie, body: { email: alice.email, role: 'admin' } });
    expect(added.status).toBe(201);
    expect(added.body.data).toEqual({
      workspaceId: ws.id,
      userId: alice.id,
      role: 'admin',
      email: alice.email,
      name: 'alice',
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    // An admin manages ordinary roles but cannot make owners.
    expect((await request(cluster.baseUrl, 'POST', path, { cookie: alice.cookie, body: { userId: bob.id, role: 'member' } })).status).toBe(201);
    expect((await request(cluster.baseUrl, 'POST', path, { cookie: alice.cookie, body: { userId: bob.id, role: 'viewer' } })).status).toBe(200);
    const makeOwner = await request(cluster.baseUrl, 'POST', path, { cookie: alice.cookie, body: { userId: bob.id, role: 'owner' } });
    expect(makeOwner.status).toBe(403);
    // A viewer manages nothing, and learns nothing about users.
    const byViewer = await request(cluster.baseUrl, 'POST', path, { cookie: bob.cookie, body: { email: 'nobody@example.com', role: 'member' } });
    expect(byViewer.status).toBe(403);
    expect((await request(cluster.baseUrl, 'POST', path, { cookie: owner.cookie, body: { email: 'nobody@example.com', role: 'member' } })).status).toBe(404);
    expect((await request(cluster.baseUrl, 'POST', path, { cookie: owner.cookie, body: { userId: bob.id, email: bob.email, role: 'member' } })).status).toBe(400);
    expect((await request(cluster.baseUrl, 'POST', path, { cookie: owner.cookie, body: { userId: bob.id, role: 'boss' } })).body.error.field).toBe('role');

    const listed = await request(cluster.baseUrl, 'GET', `${path}?limit=2`, { cookie: bob.cookie });
    expect(listed.status).toBe(200);
    expect(listed.body.data).toHaveLength(2);
    expect(listed.body.page.nextCursor).toEqual(expect.any(String));
    const rest = await request(cluster.baseUrl, 'GET', `${path}?limit=2&cursor=${listed.body.page.nextCursor}`, { cookie: bob.cookie });
    expect(rest.body.data).toHaveLength(1);
    expect(new Set([...listed.body.data, ...rest.body.data].map((m: { userId: string }) => m.userId))).toEqual(new Set([owner.id, alice.id, bob.id]));

    // The last owner can be neither demoted nor removed.
    const demote = await request(cluster.baseUrl, 'POST', path, { cookie: owner.cookie, body: { userId: owner.id, role: 'admin' } });
    expect(demote.status).toBe(409);
    expect(demote.body.error).toMatchObject({ code: 'work-already-claimed', reason: 'last-owner' });
    expect((await request(cluster.baseUrl, 'DELETE', `${path}/${owner.id}`, { cookie: owner.cookie })).status).toBe(409);
    // With a second owner, the first may go.
    expect((await request(cluster.baseUrl, 'POST', path, { cookie: owner.cookie, body: { userId: alice.id, role: 'owner' } })).status).toBe(200);
    expect((await request(cluster.baseUrl, 'POST', path, { cookie: alice.cookie, body: { userId: owner.id, role: 'member' } })).status).toBe(200);
    // Anyone may leave; removing others needs manage.
    expect((await request(cluster.baseUrl, 'DELETE', `${path}/${owner.id}`, { cookie: bob.cookie })).status).toBe(403);
    const left = await request(cluster.baseUrl, 'DELETE', `${path}/${bob.id}`, { cookie: bob.cookie });
    expect(left.status).toBe(200);
    expect(left.body.data.userId).toBe(bob.id);
    expect((await request(cluster.baseUrl, 'GET', path, { cookie: bob.cookie })).status).toBe(403);
    expect((await request(cluster.baseUrl, 'DELETE', `${path}/${bob.id}`, { cookie: alice.cookie })).status).toBe(404);
    const ws2 = await request(cluster.baseUrl, 'GET', `/api/workspaces?q=${encodeURIComponent(`Members ${mode}`)}`, { cookie: alice.cookie });
    expect(ws2.body.data[0].ownerId).toBe(alice.id);
  });

  it('workspaces: PATCH name and status by admins, plan and owner by owners; retry-safe version', async () => {
    const ws = await createWorkspace(cluster.baseUrl, owner.cookie, `Patch ${mode}`, 'beginner');
    const adminUser = await createUser(cluster.baseUrl, admin, 'wsadmin');
    secrets.push(adminUser.password, cookieValue(adminUser.cookie));
    await addMember(cluster.baseUrl, owner.cookie, ws.id, adminUser.id, 'admin');
    const path = `/api/workspaces/${ws.id}`;

    const renamed = await request(cluster.baseUrl, 'PATCH', path, { cookie: adminUser.cookie, body: { name: 'Renamed' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({ name: 'Renamed', version: 2, planId: 'beginner', slug: ws.slug });
    const retry = await request(cluster.baseUrl, 'PATCH', path, { cookie: adminUser.cookie, body: { name: 'Renamed' } });
    expect(retry.body.data.version).toBe(2);
    expect((await request(cluster.baseUrl, 'PATCH', path, { cookie: adminUser.cookie, body: { planId: 'pro' } })).status).toBe(403);
    expect((await request(cluster.baseUrl, 'PATCH', path, { cookie: viewer.cookie, body: { name: 'x' } })).status).toBe(403);
    const upgraded = await request(cluster.baseUrl, 'PATCH', path, { cookie: owner.cookie, body: { planId: 'pro', status: 'active' } });
    expect(upgraded.body.data).toMatchObject({ planId: 'pro', version: 3 });
    expect((await request(cluster.baseUrl, 'PATCH', path, { cookie: admin, body: { planId: 'enterprise' } })).body.data.planId).toBe('enterprise');
    expect((await request(cluster.baseUrl, 'PATCH', path, { cookie: owner.cookie, body: { planId: 'gold' } })).body.error).toMatchObject({
      code: 'invalid-input',
      field: 'planId',
    });
    expect((await request(cluster.baseUrl, 'PATCH', path, { cookie: owner.cookie, body: {} })).status).toBe(400);
    expect((await request(cluster.baseUrl, 'PATCH', '/api/workspaces/ws_missing', { cookie: owner.cookie, body: { name: 'x' } })).status).toBe(404);
    const transfer = await request(cluster.baseUrl, 'PATCH', path, { cookie: owner.cookie, body: { ownerId: adminUser.id } });
    expect(transfer.body.data.ownerId).toBe(adminUser.id);
    const members = await request(cluster.baseUrl, 'GET', `${path}/members`, { cookie: adminUser.cookie });
    const roles = Object.fromEntries(members.body.data.map((m: { userId: string; role: string }) => [m.userId, m.role]));
    expect(roles).toEqual({ [owner.id]: 'admin', [adminUser.id]: 'owner' });
  });

  it('api keys: creation follows the plan; the token is shown once; lists never show token material', async () => {
    const free = await createWorkspace(cluster.baseUrl, owner.cookie, `Free ${mode}`, 'free');
    const create = (body: Record<string, unknown>, cookie = owner.cookie) => request(cluster.baseUrl, 'POST', '/api/api-keys', { cookie, body });
    const base = { workspaceId: workspace.id, agentId: 'builder-1', planId: 'pro', scopes: ['issues:read'], label: 'Builder' };

    expect((await create({ ...base, workspaceId: free.id, planId: 'free' })).body.error).toMatchObject({ code: 'forbidden' });
    expect((await create({ ...base, planId: 'beginner' })).body.error).toMatchObject({ code: 'invalid-input', field: 'planId' });
    expect((await create({ ...base, scopes: ['issues:read', 'root'] })).body.error).toMatchObject({ code: 'invalid-input', field: 'scopes' });
    const beyond = await create({ ...base, scopes: ['admin'] });
    expect(beyond.status).toBe(403);
    expect(beyond.body.error.reason).toBe('scope-beyond-plan');
    expect((await create({ ...base, scopes: [] })).status).toBe(400);
    expect((await create({ ...base, agentId: 'Bad Agent' })).body.error).toMatchObject({ code: 'invalid-input', field: 'agentId' });
    expect((await create(base, viewer.cookie)).status).toBe(403);
    expect((await create({ ...base, workspaceId: 'ws_missing' })).status).toBe(404);

    const created = await create(base);
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    expect(created.body.data).toEqual({
      apiKey: {
        id: expect.stringMatching(/^key_/),
        workspaceId: workspace.id,
        agentId: 'builder-1',
        scopes: ['issues:read'],
        rateLimit: { requestsPerMinute: 600, burst: 1200 },
        label: 'Builder',
        actorType: 'agent',
        createdAt: expect.any(String),
      },
      token: expect.stringMatching(/^svc_[0-9A-Za-z]{49}$/),
    });
    const token = created.body.data.token as string;
    secrets.push(token);

    const listed = await request(cluster.baseUrl, 'GET', `/api/api-keys?workspaceId=${workspace.id}`, { cookie: owner.cookie });
    expect(listed.status).toBe(200);
    const entry = listed.body.data.find((k: { id: string }) => k.id === created.body.data.apiKey.id);
    expect(entry).toMatchObject({ agentId: 'builder-1', planId: 'pro', revokedAt: null, disabled: false, createdBy: owner.id });
    expect(JSON.stringify(listed.body)).not.toContain(token.slice(4, 24));
    expect(Object.keys(entry)).not.toContain('tokenHash');
    const agents = await request(cluster.baseUrl, 'GET', `/api/workspaces/${workspace.id}/agents`, { cookie: viewer.cookie });
    expect(agents.body.data.map((a: { agentId: string }) => a.agentId)).toContain('builder-1');
  });

  it('api keys: Bearer and x-api-key; malformed, unknown and revoked tokens get 401; a plan downgrade caps the key', async () => {
    const ws = await createWorkspace(cluster.baseUrl, owner.cookie, `Keys ${mode}`, 'pro');
    const key = await createKey(cluster.baseUrl, owner.cookie, ws.id, 'pro', ['projects:read', 'issues:write', 'billing:read']);
    secrets.push(key.token);
    const bearer = await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token });
    expect(bearer.status).toBe(200);
    expect(bearer.body.data.map((w: { id: string }) => w.id)).toEqual([ws.id]);
    expect(bearer.headers.get('ratelimit-policy')).toBe('"burst";q=1200;w=60');
    expect(bearer.headers.get('ratelimit')).toMatch(/^"burst";r=\d+;t=\d+$/);
    const header = await request(cluster.baseUrl, 'GET', '/api/workspaces', { headers: { 'x-api-key': key.token } });
    expect(header.status).toBe(200);

    const typo = `${key.token.slice(0, 10)}${key.token[10] === 'a' ? 'b' : 'a'}${key.token.slice(11)}`;
    for (const bad of [typo, 'svc_short', key.token.replace('svc_', 'xyz_')]) {
      const res = await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: bad });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
    expect((await request(cluster.baseUrl, 'GET', '/api/workspaces', { headers: { authorization: `Basic ${key.token}` } })).status).toBe(401);

    // The plan moves down: the key keeps only what the new plan has; free turns API access off.
    await request(cluster.baseUrl, 'PATCH', `/api/workspaces/${ws.id}`, { cookie: owner.cookie, body: { planId: 'beginner' } });
    const capped = await request(cluster.baseUrl, 'GET', `/api/billing/usage?workspaceId=${ws.id}`, { token: key.token });
    expect(capped.status).toBe(403);
    expect(capped.headers.get('ratelimit-policy')).toBe('"burst";q=120;w=60');
    expect((await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token })).status).toBe(200);
    await request(cluster.baseUrl, 'PATCH', `/api/workspaces/${ws.id}`, { cookie: owner.cookie, body: { planId: 'free' } });
    const off = await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token });
    expect(off.status).toBe(403);
    expect(off.body.error.reason).toBe('plan-without-api');
    await request(cluster.baseUrl, 'PATCH', `/api/workspaces/${ws.id}`, { cookie: owner.cookie, body: { planId: 'pro' } });
    expect((await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token })).status).toBe(200);
    // A suspended workspace's tokens are refused.
    await request(cluster.baseUrl, 'PATCH', `/api/workspaces/${ws.id}`, { cookie: owner.cookie, body: { status: 'suspended' } });
    expect((await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token })).status).toBe(403);
    await request(cluster.baseUrl, 'PATCH', `/api/workspaces/${ws.id}`, { cookie: owner.cookie, body: { status: 'active' } });

    const revoked = await request(cluster.baseUrl, 'DELETE', `/api/api-keys/${key.id}`, { cookie: owner.cookie });
    expect(revoked.status).toBe(200);
    expect(revoked.body.data.revokedAt).toEqual(expect.any(String));
    expect((await request(cluster.baseUrl, 'DELETE', `/api/api-keys/${key.id}`, { cookie: owner.cookie })).status).toBe(200);
    const after = await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token });
    expect(after.status).toBe(401);
    expect((await request(cluster.baseUrl, 'DELETE', '/api/api-keys/key_missing', { cookie: owner.cookie })).status).toBe(404);
    const list = await request(cluster.baseUrl, 'GET', `/api/api-keys?workspaceId=${ws.id}`, { cookie: owner.cookie });
    expect(list.body.data.find((k: { id: string }) => k.id === key.id).lastUsedAt).toEqual(expect.any(String));
  });

  it('billing: usage shows every quota with limit, use and reset; tokens need billing:read; viewers are refused', async () => {
    const ws = await createWorkspace(cluster.baseUrl, owner.cookie, `Billing ${mode}`, 'hobbyist');
    const key = await createKey(cluster.baseUrl, owner.cookie, ws.id, 'hobbyist', ['projects:read']);
    secrets.push(key.token);
    for (let i = 0; i < 3; i++) await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: key.token });
    const usage = await request(cluster.baseUrl, 'GET', `/api/billing/usage?workspaceId=${ws.id}`, { cookie: owner.cookie });
    expect(usage.status).toBe(200);
    const month = new Date().toISOString().slice(0, 7);
    expect(usage.body.data).toMatchObject({ workspaceId: ws.id, planId: 'hobbyist', period: month });
    const byKind = Object.fromEntries(usage.body.data.quotas.map((q: { kind: string }) => [q.kind, q]));
    expect(byKind['api-requests']).toMatchObject({ limit: 500_000, used: 3 });
    expect(byKind['agent-runs']).toMatchObject({ limit: 1_000, used: 0 });
    expect(byKind.imports).toMatchObject({ limit: 50, used: 0 });
    expect(byKind.exports).toMatchObject({ limit: 100, used: 0 });
    expect(byKind['stored-tasks']).toEqual({ kind: 'stored-tasks', limit: 10_000, used: 0, resetsAt: null });
    expect(Date.parse(byKind['api-requests'].resetsAt)).toBeGreaterThan(Date.now());
    expect((await request(cluster.baseUrl, 'GET', `/api/billing/usage?workspaceId=${ws.id}`, { token: key.token })).status).toBe(403);
    expect((await request(cluster.baseUrl, 'GET', `/api/billing/usage?workspaceId=${workspace.id}`, { cookie: viewer.cookie })).status).toBe(403);
    // The gateway's first gate: the scope is missing whichever workspace is named.
    expect((await request(cluster.baseUrl, 'GET', `/api/billing/usage?workspaceId=${workspace.id}`, { token: key.token })).status).toBe(403);
    expect((await request(cluster.baseUrl, 'GET', '/api/billing/usage', { cookie: owner.cookie })).body.error.field).toBe('workspaceId');
  });

  it('audit: sign-in, token and access denials become redacted events', async () => {
    await request(cluster.baseUrl, 'GET', '/api/workspaces', { token: 'svc_obviouslywrong' });
    await request(cluster.baseUrl, 'GET', `/api/workspaces/${workspace.id}/members`);
    await request(cluster.baseUrl, 'POST', '/api/api-keys', {
      cookie: viewer.cookie,
      body: { workspaceId: workspace.id, agentId: 'x', planId: 'pro', scopes: ['issues:read'] },
    });
    const types = await eventually(async () => {
      const res = await request(cluster.baseUrl, 'GET', '/api/admin/audit-events?limit=200', { cookie: admin });
      const events = res.body.data as Array<{ type: string; reason: string | null; outcome: string; workspaceId: string | null; actor: { id: string } }>;
      const wanted = [
        ['auth.login.denied', 'invalid-credentials'],
        ['auth.login.denied', 'login-throttled'],
        ['auth.token.denied', 'malformed-token'],
        ['auth.token.denied', 'revoked-token'],
        ['access.denied', 'missing-credentials'],
        ['access.denied', 'insufficient-role'],
        ['access.denied', 'missing-scope'],
      ];
      const found = wanted.every(([type, reason]) => events.some((e) => e.type === type && e.reason === reason && e.outcome === 'denied'));
      return found ? events : undefined;
    }, 20_000, 'denial audit events');
    const denial = types.find((e) => e.type === 'access.denied' && e.reason === 'insufficient-role' && e.workspaceId === workspace.id);
    expect(denial?.actor.id).toBe(viewer.id);
    expect(types.some((e) => e.type === 'api-key.created')).toBe(true);
    expect(types.some((e) => e.type === 'api-key.revoked')).toBe(true);
  });

  it('login: failures from one client address are throttled across emails', async () => {
    let status = 0;
    for (let i = 0; i < 25 && status !== 429; i++) {
      const res = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: `spray-${i}@example.com`, password: 'wrong-password' } });
      status = res.status;
    }
    expect(status).toBe(429);
    const fresh = await request(cluster.baseUrl, 'POST', '/api/auth/login', { body: { email: 'another@example.com', password: 'wrong-password' } });
    expect(fresh.status).toBe(429);
  });

  it('canary: no raw password, token or cookie value in stored records, the audit store, Redis or the logs', async () => {
    const all = secrets.filter(Boolean);
    expect(all.length).toBeGreaterThan(15);
    let redisDump = '';
    if (cluster.redis) {
      const cli = findBinary('redis-cli', 'redis-tools');
      const keys = execFileSync(cli, ['-p', String(cluster.redis.port), '--scan'], { encoding: 'utf8' }).split('\n').filter(Boolean);
      expect(keys.some((k) => k.startsWith('planning:session:'))).toBe(true);
      redisDump = keys.join('\n');
      for (const key of keys.filter((k) => k.startsWith('planning:session:'))) {
        redisDump += execFileSync(cli, ['-p', String(cluster.redis.port), 'GET', key], { encoding: 'utf8' });
      }
    }
    const logs = [...cluster.processes.values()].map((p) => ({ path: `log:${p.name}`, text: p.output.join('\n') }));
    await cluster.stop({ keepData: true });
    try {
      const files = await readTree(cluster.dataDir);
      expect(files.some((f) => f.path.includes('audit'))).toBe(true);
      expect(files.some((f) => f.text.includes('auth.login.denied'))).toBe(true);
      expect(findSecrets([...files, ...logs, { path: 'redis', text: redisDump }], all)).toEqual([]);
    } finally {
      await rm(cluster.dataDir, { recursive: true, force: true });
    }
  });
});
