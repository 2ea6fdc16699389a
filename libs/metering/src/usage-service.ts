import type { DescService } from '@bufbuild/protobuf';
import { authorizeWorkspace, type AccessLookup, type AccessRequirement } from '@planning/access';
import { ServiceError } from '@planning/errors';
import { QUOTA_KINDS, quotaPeriod, type QuotaKind } from '@planning/plans';
import { UsageService } from '@planning/proto/planning/usage/v1/usage_pb';
import type { CallContext, ServiceImplementation } from '@planning/rpc';
import type { UsageMeter } from './usage-meter.js';

export { UsageService };

/** Who may read a workspace's usage: an admin (or owner, or system admin) session, or a token with `billing:read`. */
export const USAGE_REQUIREMENT: AccessRequirement = { action: 'manage', scope: 'billing:read' };

export interface UsageLine {
  kind: QuotaKind;
  used: number;
  /** `YYYY-MM`, or '' for a standing count such as stored-tasks. */
  period: string;
}

/** One service's answer for the quota kinds it owns. */
export interface UsageProvider {
  /** For logs and errors, e.g. `issues`. */
  owner: string;
  kinds: readonly QuotaKind[];
  /** Throws unless the caller may read the workspace's usage (404 / 403 / 401 as documented). */
  authorize(ctx: CallContext, workspaceId: string): Promise<void>;
  usage(workspaceId: string, kinds: readonly QuotaKind[], now: Date): Promise<UsageLine[]>;
}

/** The part of a gRPC server (the runtime's `rpc-server` exports) a provider is registered on. */
export interface UsageServiceHost {
  addService<S extends DescService>(service: S, implementation: ServiceImplementation<S>): void;
}

/** An authorizer for providers of services that ask issues for access (see `createRemoteAccess`). */
export function usageAuthorizer(lookup: AccessLookup): UsageProvider['authorize'] {
  return async (ctx, workspaceId) => {
    await authorizeWorkspace(lookup, ctx, workspaceId, USAGE_REQUIREMENT);
  };
}

const registries = new WeakMap<UsageServiceHost, UsageProvider[]>();

/**
 * Registers a service's usage provider on its process's gRPC server. One `planning.usage.v1.UsageService`
 * serves every provider of the process: in all-in-one mode issues, agents-claims and
 * imports-exports share one server, and a gRPC server can hold a service only once.
 * Call from a module's `init` (before the server starts).
 */
export function registerUsageProvider(host: UsageServiceHost, provider: UsageProvider, clock: () => Date = () => new Date()): void {
  let providers = registries.get(host);
  if (providers) {
    const taken = provider.kinds.filter((k) => providers!.some((p) => p.kinds.includes(k)));
    if (taken.length > 0) throw new Error(`usage kinds ${taken.join(', ')} are already registered`);
    providers.push(provider);
    return;
  }
  providers = [provider];
  registries.set(host, providers);
  const all = providers;
  host.addService(UsageService, {
    async getUsage(request, ctx) {
      if (!request.workspaceId) throw new ServiceError('invalid-input', "'workspaceId' is required", { field: 'workspaceId' });
      const served = all.flatMap((p) => p.kinds);
      for (const kind of request.kinds) {
        if (!(QUOTA_KINDS as readonly string[]).includes(kind)) {
          throw new ServiceError('invalid-input', `'kinds' names an unknown quota kind: ${kind}`, { field: 'kinds' });
        }
        if (!served.includes(kind as QuotaKind)) {
          throw new ServiceError('invalid-input', `'kinds': ${kind} is not counted by this service`, { field: 'kinds' });
        }
      }
      const wanted = request.kinds.length > 0 ? (request.kinds as QuotaKind[]) : served;
      const now = clock();
      const lines: UsageLine[] = [];
      for (const provider of all) {
        const kinds = provider.kinds.filter((k) => wanted.includes(k));
        if (kinds.length === 0) continue;
        await provider.authorize(ctx, request.workspaceId);
        lines.push(...(await provider.usage(request.workspaceId, kinds, now)));
      }
      return { usage: lines.map((l) => ({ kind: l.kind, used: BigInt(l.used), period: l.period })) };
    },
  });
}

/**
 * A provider for kinds counted monthly with a `UsageMeter` (agents-claims: agent-runs;
 * imports-exports: imports and exports).
 */
export function meteredUsageProvider(options: {
  owner: string;
  kinds: readonly QuotaKind[];
  meter: UsageMeter;
  access: AccessLookup;
}): UsageProvider {
  return {
    owner: options.owner,
    kinds: options.kinds,
    authorize: usageAuthorizer(options.access),
    async usage(workspaceId, kinds, now) {
      return Promise.all(
        kinds.map(async (kind) => ({ kind, used: await options.meter.used(workspaceId, kind, now), period: quotaPeriod(now) })),
      );
    },
  };
}
