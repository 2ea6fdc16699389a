import { randomBytes } from 'node:crypto';
import { request } from '../../support/http.js';
import { expectFor, type MatrixEntry, type RequestSpec, type World } from '../world.js';

/**
 * JSON issue imports (imports-exports service). Imports are an admin action (DECISIONS §1): a
 * session of a workspace admin or owner, a system admin, or a token with `admin` for its own
 * workspace. The schema names no workspace, so any signed-in user or admin token reads it.
 */

const projects = new WeakMap<World, Promise<{ a: string; b: string }>>();

async function projectOf(world: World, ws: 'a' | 'b'): Promise<string> {
  let found = projects.get(world);
  if (!found) {
    const make = async (w: 'a' | 'b') => {
      const res = await request(world.baseUrl, 'POST', '/api/projects', { cookie: world[w].owner.cookie, body: { workspaceId: world[w].id, name: `Imports matrix ${w}` } });
      if (res.status !== 201) throw new Error(`fixture project: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.data.id as string;
    };
    found = Promise.all([make('a'), make('b')]).then(([a, b]) => ({ a, b }));
    projects.set(world, found);
  }
  return (await found)[ws];
}

const key = () => `matrix-${randomBytes(8).toString('hex')}`;

async function previewBody(world: World, ws: 'a' | 'b') {
  const projectId = await projectOf(world, ws);
  return {
    plan: 'enterprise',
    format: 'json',
    workspaceId: world[ws].id,
    payload: [{ workspaceId: world[ws].id, projectId, title: 'Imports matrix row' }],
  };
}

/** A fresh ready preview of the workspace, made by its owner. */
async function freshPreview(world: World, ws: 'a' | 'b'): Promise<string> {
  const res = await request(world.baseUrl, 'POST', '/api/imports/preview', {
    cookie: world[ws].owner.cookie,
    headers: { 'idempotency-key': key() },
    body: await previewBody(world, ws),
  });
  if (res.status !== 200) throw new Error(`fixture preview: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.id as string;
}

const preview = async (world: World, ws: 'a' | 'b'): Promise<RequestSpec> => ({
  method: 'POST',
  path: '/api/imports/preview',
  headers: { 'idempotency-key': key() },
  body: await previewBody(world, ws),
});

const commit = async (world: World, ws: 'a' | 'b'): Promise<RequestSpec> => ({
  method: 'POST',
  path: '/api/imports/commit',
  headers: { 'idempotency-key': key() },
  body: { previewId: await freshPreview(world, ws) },
});

export const entries: MatrixEntry[] = [
  {
    method: 'GET',
    path: '/api/imports/schema',
    scope: 'admin',
    // Names no workspace: a token of B with `admin` reads it too, and so does any signed-in user.
    request: () => ({ method: 'GET', path: '/api/imports/schema' }),
    expect: { ...expectFor.workspace('viewer'), wrongWorkspaceToken: 200 },
  },
  {
    method: 'POST',
    path: '/api/imports/preview',
    scope: 'admin',
    request: (world) => preview(world, 'a'),
    againstB: (world) => preview(world, 'b'),
    expect: expectFor.workspace('admin'),
  },
  {
    method: 'POST',
    path: '/api/imports/commit',
    scope: 'admin',
    request: (world) => commit(world, 'a'),
    againstB: (world) => commit(world, 'b'),
    expect: expectFor.workspace('admin'),
  },
];
