import type { DescService } from '@bufbuild/protobuf';
import { ServiceError } from '@planning/errors';
import type { CallContext, Principal, ServiceImplementation } from '@planning/rpc';
import { describe, expect, it } from 'vitest';
import type { UsageService} from './index.js';
import { registerUsageProvider, type UsageProvider, type UsageServiceHost } from './index.js';

function fakeHost() {
  const added: Array<{ service: DescService; implementation: unknown }> = [];
  const host: UsageServiceHost = {
    addService(service, implementation) {
      added.push({ service, implementation });
    },
  };
  const impl = () => added[0]!.implementation as ServiceImplementation<typeof UsageService>;
  return { host, added, impl };
}

const ctx = (principal: Principal) => ({ principal }) as unknown as CallContext;
const user: Principal = { type: 'user', id: 'usr_1', isAdmin: false, scopes: [] };

function provider(owner: string, kinds: UsageProvider['kinds'], allow = true): UsageProvider {
  return {
    owner,
    kinds,
    async authorize() {
      if (!allow) throw new ServiceError('forbidden', 'no');
    },
    async usage(_workspaceId, wanted) {
      return wanted.map((kind) => ({ kind, used: 7, period: kind === 'stored-tasks' ? '' : '2025-03' }));
    },
  };
}

describe('metering: usage service', () => {
  it('metering: one UsageService per server answers for every provider registered on it', async () => {
    const { host, added, impl } = fakeHost();
    registerUsageProvider(host, provider('issues', ['stored-tasks']));
    registerUsageProvider(host, provider('agents-claims', ['agent-runs']));
    expect(added).toHaveLength(1);
    const all = await impl().getUsage({ workspaceId: 'ws_a', kinds: [] } as never, ctx(user));
    expect(all.usage).toEqual([
      { kind: 'stored-tasks', used: 7n, period: '' },
      { kind: 'agent-runs', used: 7n, period: '2025-03' },
    ]);
    const one = await impl().getUsage({ workspaceId: 'ws_a', kinds: ['agent-runs'] } as never, ctx(user));
    expect(one.usage).toEqual([{ kind: 'agent-runs', used: 7n, period: '2025-03' }]);
  });

  it('metering: unknown or foreign kinds are invalid input; a kind is registered once', async () => {
    const { host, impl } = fakeHost();
    registerUsageProvider(host, provider('issues', ['stored-tasks']));
    expect(() => registerUsageProvider(host, provider('x', ['stored-tasks']))).toThrow(/already registered/);
    await expect(impl().getUsage({ workspaceId: 'ws_a', kinds: ['gold'] } as never, ctx(user))).rejects.toMatchObject({
      code: 'invalid-input',
    });
    await expect(impl().getUsage({ workspaceId: 'ws_a', kinds: ['imports'] } as never, ctx(user))).rejects.toMatchObject({
      code: 'invalid-input',
    });
  });

  it('metering: each provider authorizes before it answers', async () => {
    const { host, impl } = fakeHost();
    registerUsageProvider(host, provider('issues', ['stored-tasks'], false));
    await expect(impl().getUsage({ workspaceId: 'ws_a', kinds: [] } as never, ctx(user))).rejects.toMatchObject({
      code: 'forbidden',
    });
  });
});
