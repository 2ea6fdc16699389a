import type { ConfigProblem, EnvShape } from '@planning/config';
import type { ProcessConfig } from './process-config.js';

/**
 * The module registry: which modules a target turns on, and in which order they start.
 * Mode checks live here and only here; domain code never asks which mode it runs in.
 */

/** Minimal structured logger (pino-compatible). */
export interface RuntimeLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
  child(bindings: Record<string, unknown>): RuntimeLogger;
}

export interface ReadyReport {
  ok: boolean;
  details?: Record<string, unknown>;
}

/** What a module hands back from `init`. */
export interface ModuleHandle<TExports = unknown> {
  /** Made available to modules that depend on this one through `ctx.get(name)`. */
  exports?: TExports;
  /** Begin work (listen, consume, sweep). Called in dependency order after every module's init. */
  start?(): Promise<void>;
  /** Stop taking new work and finish what is in flight (front doors: HTTP, gRPC). Reverse order. */
  drain?(): Promise<void>;
  /** Release everything (timers, connections, stores). Reverse order, after every drain. */
  stop?(): Promise<void>;
  /** Readiness beyond "started": e.g. a backend that cannot be reached. */
  ready?(): ReadyReport | Promise<ReadyReport>;
}

export interface ModuleContext<TSettings = unknown> {
  /** The target this process runs (`all`, `gateway`, ...). */
  readonly target: string;
  /** The names of every module this process runs. */
  readonly modules: readonly string[];
  /** Process-wide configuration (ports, backends, peers). */
  readonly config: ProcessConfig;
  /** This module's own settings, parsed from its `settings` shape. */
  readonly settings: TSettings;
  readonly logger: RuntimeLogger;
  /** Exports of a module this one depends on. */
  get<T>(moduleName: string): T;
  /** Is a module running in this process? (e.g. to dial the local gRPC server in all-in-one) */
  has(moduleName: string): boolean;
  /** Live view of the runtime, for health endpoints. */
  readonly runtime: RuntimeView;
}

export interface ModuleDefinition<TSettings = unknown, TExports = unknown> {
  name: string;
  /** Modules that must be initialised and started before this one (and stopped after it). */
  deps: readonly string[];
  /**
   * The environment variables this module reads, parsed once at start-up together with every
   * other module's (all problems reported at once). Reaches the module as `ctx.settings`.
   */
  settings?: EnvShape;
  /** Cross-variable checks on the parsed settings (impossible combinations). */
  validate?(settings: TSettings, config: ProcessConfig): ConfigProblem[];
  init(ctx: ModuleContext<TSettings>): Promise<ModuleHandle<TExports>>;
}

/** What a module runs: the part of its definition a runtime loads only when it starts the module. */
export interface ModuleImplementation<TSettings = unknown, TExports = unknown> {
  init(ctx: ModuleContext<TSettings>): Promise<ModuleHandle<TExports>>;
}

/**
 * A module definition whose implementation is loaded (by `load`, a dynamic `import()`) only when a
 * runtime initialises the module, in the thread that runs it. Its name, dependencies and settings
 * are all the entry point needs to resolve a target, check the configuration and print it, so a
 * thread that runs no instance of the module (the gateway's thread beside the services' thread,
 * `--print-config`, another target) never reads its code.
 */
export function lazyModule<TSettings = unknown, TExports = unknown>(
  light: Omit<ModuleDefinition<TSettings, TExports>, 'init'>,
  load: () => Promise<ModuleImplementation<TSettings, TExports>>,
): ModuleDefinition<TSettings, TExports> {
  return {
    ...light,
    async init(ctx) {
      return (await load()).init(ctx);
    },
  };
}

/** Any module definition, whatever its settings and exports. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyModuleDefinition = ModuleDefinition<any, any>;

export type ModuleState = 'pending' | 'initialised' | 'starting' | 'running' | 'draining' | 'stopped' | 'failed';

export interface ModuleStatus {
  name: string;
  state: ModuleState;
}

export interface RuntimeView {
  readonly draining: boolean;
  status(): ModuleStatus[];
  /** Runs every module's readiness check. */
  ready(): Promise<{ ok: boolean; notRunning: string[]; details: Record<string, unknown> }>;
}

/**
 * The modules a target needs, in start order: the target's own modules plus everything they
 * depend on, each after its dependencies (ties keep definition order).
 */
export function resolveModules(
  definitions: readonly AnyModuleDefinition[],
  roots: readonly string[],
): string[] {
  const byName = new Map(definitions.map((d) => [d.name, d]));
  const order: string[] = [];
  const visiting = new Set<string>();
  const done = new Set<string>();

  const visit = (name: string, path: string[]): void => {
    if (done.has(name)) return;
    const def = byName.get(name);
    if (!def) {
      const via = path.length ? ` (needed by ${path.join(' -> ')})` : '';
      throw new Error(`unknown module '${name}'${via}`);
    }
    if (visiting.has(name)) throw new Error(`module dependency cycle: ${[...path, name].join(' -> ')}`);
    visiting.add(name);
    for (const dep of def.deps) visit(dep, [...path, name]);
    visiting.delete(name);
    done.add(name);
    order.push(name);
  };

  // Visit roots in definition order so the result does not depend on how the target lists them.
  const rootSet = new Set(roots);
  for (const root of roots) if (!byName.has(root)) visit(root, []);
  for (const def of definitions) if (rootSet.has(def.name)) visit(def.name, []);
  return order;
}
