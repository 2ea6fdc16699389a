import { ServiceError } from '@planning/errors';
import { SYSTEM_PRINCIPAL } from '@planning/rpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPlanningHarness, type PlanningHarness } from '../testing/planning-harness.js';

describe('workspaces: GetWorkspaceBySlug', () => {
  let h: PlanningHarness;
  const code = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
      return 'ok';
    } catch (err) {
      if (err instanceof ServiceError) return err.code;
      throw err;
    }
  };

  beforeEach(async () => {
    h = await createPlanningHarness({ now: new Date() });
  });
  afterEach(async () => {
    await h.close();
  });

  it('workspaces: a slug is matched exactly, never as a substring of names or other slugs', async () => {
    const target = await h.workspace({ ownerId: 'usr_owner', name: 'Acme' });
    await h.workspace({ ownerId: 'usr_owner', name: 'Acme Labs' });
    await h.workspace({ ownerId: 'usr_owner', name: 'Big Acme' });
    const slug = (await h.workspaceRpc.getWorkspace({ id: target }, SYSTEM_PRINCIPAL)).workspace!.slug;
    const found = await h.workspaceRpc.getWorkspaceBySlug({ slug }, SYSTEM_PRINCIPAL);
    expect(found.workspace?.id).toBe(target);
    expect(await code(h.workspaceRpc.getWorkspaceBySlug({ slug: slug.slice(0, -1) }, SYSTEM_PRINCIPAL))).toBe('not-found');
    expect(await code(h.workspaceRpc.getWorkspaceBySlug({ slug: '' }, SYSTEM_PRINCIPAL))).toBe('invalid-input');
  });

  it('workspaces: a token of another workspace hears not-found, exactly as for an unknown slug', async () => {
    const a = await h.workspace({ ownerId: 'usr_owner', name: 'Alpha' });
    const b = await h.workspace({ ownerId: 'usr_owner', name: 'Bravo' });
    const slugOf = async (id: string) => (await h.workspaceRpc.getWorkspace({ id }, SYSTEM_PRINCIPAL)).workspace!.slug;
    const tokenA = h.token(a, ['admin', 'projects:read']);
    expect(await code(h.workspaceRpc.getWorkspaceBySlug({ slug: await slugOf(b) }, tokenA))).toBe('not-found');
    expect(await code(h.workspaceRpc.getWorkspaceBySlug({ slug: 'no-such-workspace' }, tokenA))).toBe('not-found');
    expect((await h.workspaceRpc.getWorkspaceBySlug({ slug: await slugOf(a) }, tokenA)).workspace?.id).toBe(a);
    // A signed-in non-member is told what GetWorkspace tells it.
    expect(await code(h.workspaceRpc.getWorkspaceBySlug({ slug: await slugOf(b) }, h.user('usr_stranger')))).toBe(
      await code(h.workspaceRpc.getWorkspace({ id: b }, h.user('usr_stranger'))),
    );
    expect((await h.workspaceRpc.getWorkspaceBySlug({ slug: await slugOf(b) }, h.user('usr_owner'))).workspace?.id).toBe(b);
  });
});
