import type { ProcessConfig } from './process-config.js';
import {
  resolveModules,
  type AnyModuleDefinition,
  type ModuleContext,
  type ModuleHandle,
  type ModuleState,
  type ModuleStatus,
  type RuntimeLogger,
  type RuntimeView,
} from './registry.js';

export interface RuntimeOptions {
  definitions: readonly AnyModuleDefinition[];
  /** Target name, for logs and context. */
  target: string;
  /** The modules the target asks for; their dependencies are added. */
  roots: readonly string[];
  config: ProcessConfig;
  /** Each module's parsed settings (`loadModuleSettings`, in `@planning/runtime/config`). */
  settings: ReadonlyMap<string, unknown>;
  logger: RuntimeLogger;
}

export interface Runtime {
  readonly modules: readonly string[];
  readonly view: RuntimeView;
  /** Initialises every module in dependency order, then starts them in the same order. */
  start(): Promise<void>;
  /**
   * Marks the process draining (readiness turns 503), waits `delayMs` so load balancers notice,
   * drains the front doors and stops every module in reverse order. Safe to call more than once.
   */
  shutdown(delayMs?: number): Promise<void>;
}

interface Entry {
  def: AnyModuleDefinition;
  state: ModuleState;
  handle?: ModuleHandle<unknown>;
}

export function createRuntime(options: RuntimeOptions): Runtime {
  const defs = options.definitions;
  const order = resolveModules(defs, options.roots);
  const entries = new Map<string, Entry>();
  for (const name of order) {
    const def = defs.find((d) => d.name === name);
    if (def) entries.set(name, { def, state: 'pending' });
  }
  let draining = false;
  let shutdownPromise: Promise<void> | undefined;

  const view: RuntimeView = {
    get draining() {
      return draining;
    },
    status(): ModuleStatus[] {
      return order.map((name) => ({ name, state: entries.get(name)?.state ?? 'pending' }));
    },
    async ready() {
      const notRunning = order.filter((name) => entries.get(name)?.state !== 'running');
      const details: Record<string, unknown> = {};
      let ok = !draining && notRunning.length === 0;
      await Promise.all(
        order.map(async (name) => {
          const entry = entries.get(name);
          if (!entry?.handle?.ready || entry.state !== 'running') return;
          try {
            const report = await entry.handle.ready();
            if (report.details) details[name] = report.details;
            if (!report.ok) {
              ok = false;
              notRunning.push(name);
            }
          } catch (err) {
            ok = false;
            notRunning.push(name);
            details[name] = { error: err instanceof Error ? err.message : String(err) };
          }
        }),
      );
      return { ok, notRunning, details };
    },
  };

  const contextFor = (name: string): ModuleContext<unknown> => {
    const entry = entries.get(name);
    const deps = new Set(entry?.def.deps ?? []);
    return {
      target: options.target,
      modules: order,
      config: options.config,
      settings: options.settings.get(name),
      logger: options.logger.child({ module: name }),
      runtime: view,
      has: (moduleName) => entries.has(moduleName),
      get<T>(moduleName: string): T {
        if (!deps.has(moduleName)) {
          throw new Error(`module '${name}' asked for '${moduleName}', which is not among its deps`);
        }
        const dep = entries.get(moduleName);
        if (!dep?.handle) throw new Error(`module '${moduleName}' is not initialised`);
        return dep.handle.exports as T;
      },
    };
  };

  const stopAll = async (): Promise<void> => {
    const reversed = [...order].reverse();
    for (const name of reversed) {
      const entry = entries.get(name);
      if (!entry?.handle?.drain || entry.state === 'pending') continue;
      entry.state = 'draining';
      try {
        await entry.handle.drain();
      } catch (err) {
        options.logger.error({ err, module: name }, 'module drain failed');
      }
    }
    for (const name of reversed) {
      const entry = entries.get(name);
      if (!entry || entry.state === 'pending' || entry.state === 'stopped') continue;
      try {
        await entry.handle?.stop?.();
        entry.state = 'stopped';
      } catch (err) {
        entry.state = 'failed';
        options.logger.error({ err, module: name }, 'module stop failed');
      }
    }
  };

  return {
    modules: order,
    view,
    async start() {
      for (const name of order) {
        const entry = entries.get(name);
        if (!entry) continue;
        try {
          entry.handle = await entry.def.init(contextFor(name));
          entry.state = 'initialised';
        } catch (err) {
          entry.state = 'failed';
          options.logger.error({ err, module: name }, 'module init failed');
          await stopAll();
          throw err;
        }
      }
      for (const name of order) {
        const entry = entries.get(name);
        if (!entry) continue;
        entry.state = 'starting';
        try {
          await entry.handle?.start?.();
          entry.state = 'running';
        } catch (err) {
          entry.state = 'failed';
          // Shut down while starting: the module failed on what the shutdown closed under it.
          if (draining) options.logger.info({ err: err instanceof Error ? err.message : String(err), module: name }, 'module start interrupted by the shutdown');
          else options.logger.error({ err, module: name }, 'module start failed');
          await stopAll();
          throw err;
        }
      }
      options.logger.info({ target: options.target, modules: order }, 'all modules running');
    },
    shutdown(delayMs = 0) {
      shutdownPromise ??= (async () => {
        draining = true;
        options.logger.info({ delayMs }, 'draining');
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
        await stopAll();
        options.logger.info({}, 'stopped');
      })();
      return shutdownPromise;
    },
  };
}
