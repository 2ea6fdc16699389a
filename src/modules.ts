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
// The main thread holds these definitions anyway (with their settings); only the names are used here.
import { SERVICES_THREAD_ROOTS } from './services-thread-modules.js';

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
 * The services' thread's young generation (V8's new space): three semi-spaces of 16 MB, V8's
 * default, above the main thread's 4 MB (scripts/node-flags.mjs). Under writes this thread is the
 * busy one, and most of what a request allocates here lives until its commit is on disk, so a
 * small nursery copies it again and again: with 16 MB semi-spaces it scavenged a third as often
 * under the bench's PATCH load (325 against 989 times, half the time), and the PATCH row answered
 * about 9 % more and the claim row 4 to 6 % more than with 4 MB (quick runs, alternated, two
 * each; by-id and page rows within their noise). The nursery grows to its limit while the
 * modules load; the thread's start-up compaction gives it back once the process idles
 * (libs/runtime/src/quiet-compaction.ts), so the idle RSS after it is the same either way (129-131
 * against 132 MB; 3 s after start, before it, 160 against 146 MB).
 */
const SERVICES_THREAD_LIMITS = { maxYoungGenerationSizeMb: 48 };

/**
 * What the main thread runs: every module of the target, or, when the services run in a worker
 * thread (all-in-one on two cores or more), the gateway, HTTP and demo data with ports into it.
 */
export function mainThreadPlan(
  config: ProcessConfig,
  worker: { entry: URL; execArgv?: string[] },
  /** Every module's parsed settings: the services thread is handed its modules'. */
  settings: ReadonlyMap<string, unknown>,
): { definitions: readonly AnyModuleDefinition[]; roots: string[] } {
  if (!usesServicesThread(config)) return { definitions: MODULES, roots: rootsOf(config.target) };
  return {
    definitions: [
      metricsModule,
      createServicesThreadModule(worker.entry, {
        settings: new Map([...settings].filter(([name]) => (SERVICES_THREAD_ROOTS as readonly string[]).includes(name))),
        ...(worker.execArgv ? { execArgv: worker.execArgv } : {}),
        resourceLimits: SERVICES_THREAD_LIMITS,
      }),
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
