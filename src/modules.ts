/**
 * Every module the entry point knows, and which of them a target turns on. This is the one
 * place that knows the shape of a deployment; the modules themselves never ask.
 */
import { agentsClaimsModule } from '@planning/agents-claims';
import { auditModule } from '@planning/audit';
import { gatewayModule } from '@planning/gateway';
import { importsExportsModule } from '@planning/imports-exports';
import { demoModule, issuesModule } from '@planning/issues';
import {
  busModule,
  createServicesThreadModule,
  metricsModule,
  resolveModules,
  rpcClientsModule,
  rpcServerModule,
  servicesOf,
  threadBusModule,
  threadClientsModule,
  usesServicesThread,
  type AnyModuleDefinition,
  type ProcessConfig,
  type Target,
} from '@planning/runtime';
import { httpModule } from '@planning/runtime/http';

/** In definition order: infrastructure first, then the services, the gateway, then the demo data. */
export const MODULES: readonly AnyModuleDefinition[] = [
  metricsModule,
  busModule,
  rpcServerModule,
  rpcClientsModule,
  httpModule,
  issuesModule,
  agentsClaimsModule,
  importsExportsModule,
  auditModule,
  gatewayModule,
  demoModule,
];

/**
 * The modules a target asks for: its services, plus the HTTP server every process has for `/live`
 * and `/ready`, and the metrics endpoint. The all-in-one mode (local use) also seeds the demo workspace (DECISIONS §1;
 * `SERVICE_DEMO=0` turns the seeding off).
 */
export function rootsOf(target: Target): string[] {
  return ['metrics', ...servicesOf(target), 'http', ...(target === 'all' ? ['demo'] : [])];
}

/** The modules a target runs, in start order. */
export function modulesFor(target: Target): string[] {
  return resolveModules(MODULES, rootsOf(target));
}

/**
 * The services' thread's young generation (V8's new space: two semi-spaces of 4 MB here). V8's
 * default lets it grow to two of 16 MB during start-up, and those pages stay resident while the
 * process idles (about 17 MB of the idle RSS). The process-wide `--max-semi-space-size=4` every
 * start command passes (scripts/node-flags.mjs) caps this isolate too, so the two agree. The
 * smaller nursery costs throughput under writes: with two 16 MB semi-spaces (the V8 flag raised
 * before the worker starts) the thread scavenged a third as often and the bench's PATCH and claim
 * rows answered about 5 to 10 % more, for 17 MB more idle RSS (147 -> 164 MB). Memory won: the
 * idle target is the one a laptop feels (docs/benchmarks.md).
 */
const SERVICES_THREAD_LIMITS = { maxYoungGenerationSizeMb: 12 };

/**
 * What the main thread runs: every module of the target, or, when the services run in a worker
 * thread (all-in-one on two cores or more), the gateway, HTTP and demo data with ports into it.
 */
export function mainThreadPlan(
  config: ProcessConfig,
  worker: { entry: URL; execArgv?: string[] },
): { definitions: readonly AnyModuleDefinition[]; roots: string[] } {
  if (!usesServicesThread(config)) return { definitions: MODULES, roots: rootsOf(config.target) };
  return {
    definitions: [
      metricsModule,
      createServicesThreadModule(worker.entry, { ...(worker.execArgv ? { execArgv: worker.execArgv } : {}), resourceLimits: SERVICES_THREAD_LIMITS }),
      threadBusModule,
      threadClientsModule,
      httpModule,
      gatewayModule,
      demoModule,
    ],
    // The metrics endpoint stays here: it reads the services thread's instruments too.
    roots: ['metrics', 'gateway', 'http', 'demo'],
  };
}
