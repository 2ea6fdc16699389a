import { describeEnv } from '@planning/config';
import {
  compactWhenQuiet,
  configureFailpoints,
  createRuntime,
  importLegacyDataDir,
  IN_MEMORY,
  servicesOf,
  type RuntimeLogger,
} from '@planning/runtime';
import { describeProcessConfig, loadModuleSettings, loadProcessConfig } from '@planning/runtime/config';
import { createLogger, type Telemetry } from '@planning/telemetry';
import { bannerFactsOf, consoleLogLevel, explainStartFailure, printBanner, stopSignals } from './first-run.js';
import { MODULES, mainThreadPlan, modulesFor } from './modules.js';

export interface RunOptions {
  target: string | undefined;
  /** The services' worker thread entry (all-in-one on two cores or more; see SERVICES_THREAD). */
  worker: { entry: URL; execArgv?: string[] };
  printConfig: boolean;
  telemetry: Telemetry;
}

function fail(lines: string[]): never {
  process.stderr.write(`${lines.join('\n')}\n`);
  process.exit(2);
}

export async function run(options: RunOptions): Promise<void> {
  const loaded = loadProcessConfig(process.env, options.target);
  if (!loaded.ok) {
    fail([
      `Invalid configuration (${loaded.problems.length} problem${loaded.problems.length === 1 ? '' : 's'}):`,
      ...loaded.problems.map((p) => `  - ${p.variable}: ${p.message}`),
    ]);
  }
  const config = loaded.value;
  const modules = modulesFor(config.target);
  const settings = loadModuleSettings(MODULES, modules, config, process.env);
  const failpointProblems = configureFailpoints(config.SERVICE_FAILPOINTS);
  const problems = [
    ...(settings.ok ? [] : settings.problems),
    ...failpointProblems.map((message) => ({ variable: 'SERVICE_FAILPOINTS', message })),
  ];
  if (!settings.ok || problems.length > 0) {
    fail([
      `Invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):`,
      ...problems.map((p) => `  - ${p.variable}: ${p.message}`),
    ]);
  }

  if (options.printConfig) {
    const perModule: Record<string, unknown> = {};
    for (const name of modules) {
      const def = MODULES.find((m) => m.name === name);
      const values = settings.settings.get(name);
      if (def?.settings && values) perModule[name] = describeEnv(def.settings, values as never);
    }
    process.stdout.write(
      `${JSON.stringify({ target: config.target, modules, process: describeProcessConfig(config), settings: perModule }, null, 2)}\n`,
    );
    process.exit(0);
  }

  const logLevel = consoleLogLevel(config.LOG_LEVEL, process.env);
  const logger = createLogger({ name: config.target === 'all' ? 'planning-service' : `planning-${config.target}`, level: logLevel });
  if (config.dataDir !== undefined) {
    logger.info(
      { dataDir: config.dataDir },
      config.dataDir === IN_MEMORY ? 'embedded store in memory: nothing is kept after exit' : `embedded store keeps its data in ${config.dataDir}`,
    );
  }
  const plan = mainThreadPlan(config, options.worker, settings.settings);
  const runtime = createRuntime({
    definitions: plan.definitions,
    target: config.target,
    roots: plan.roots,
    config,
    settings: settings.settings,
    logger: logger as unknown as RuntimeLogger,
  });

  const decide = stopSignals();
  let stopping = false;
  const shutdown = (signal: string): void => {
    const decision = decide(signal);
    if (decision === 'ignore') {
      logger.debug({ signal }, 'the same signal again (a terminal and a package manager both sent it): already stopping');
      return;
    }
    if (decision === 'exit-now') {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, delayMs: config.shutdownDelayMs }, 'shutting down');
    void runtime
      .shutdown(config.shutdownDelayMs)
      .then(() => options.telemetry.shutdown())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('unhandledRejection', (err) => {
    logger.error({ err }, 'unhandled rejection');
  });

  try {
    await importLegacyDataDir(config, servicesOf(config.target), (details, message) => logger.info(details, message));
    await runtime.start();
    if (!stopping) printBanner(bannerFactsOf(config, settings.settings, logLevel));
    // The start-up's nursery back to the system once the process idles (quiet-compaction.ts).
    compactWhenQuiet({ onCollected: (report) => logger.debug(report, 'start-up memory compacted') });
  } catch (err) {
    // Stopped while starting (Ctrl-C right after the HTTP port opened): the modules still starting
    // fail on their closed stores. That is the stop, not a failure: the shutdown above exits 0.
    if (stopping) {
      logger.info({ err: err instanceof Error ? err.message : String(err) }, 'start interrupted by the stop signal');
      return;
    }
    logger.fatal({ err }, 'start failed');
    const explained = explainStartFailure(err, config as unknown as Record<string, unknown>);
    if (explained) process.stderr.write(`${explained}\n`);
    await options.telemetry.shutdown().catch(() => undefined);
    process.exit(1);
  }
}
