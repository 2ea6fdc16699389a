/**
 * What a person starting the service in a terminal needs to read, apart from the JSON log lines
 * machines read: a short banner once the service is up (where it is, where its reference and MCP
 * endpoint are, how to sign in, where the data lives) and start failures in words, with the
 * variable to change. Not on a terminal (a container, CI, a pipe) nothing here prints: the logs
 * say everything as JSON.
 */
import { IN_MEMORY, type ProcessConfig } from '@planning/runtime';

export interface ConsoleLike {
  isTTY?: boolean;
  write(text: string): unknown;
}

/**
 * On a terminal with LOG_LEVEL unset, the logs show warnings and errors only: the banner says
 * the rest. LOG_LEVEL, when set, always wins.
 */
export function consoleLogLevel(configured: string, env: NodeJS.ProcessEnv, stdout: ConsoleLike = process.stdout): string {
  return stdout.isTTY && env.LOG_LEVEL === undefined ? 'warn' : configured;
}

export interface BannerFacts {
  config: Pick<ProcessConfig, 'target' | 'HOST' | 'PORT' | 'dataDir' | 'MONGODB_URI' | 'LOG_LEVEL'>;
  env: NodeJS.ProcessEnv;
  /** The system administrator's email (gateway settings), when this process runs the gateway. */
  adminEmail?: string;
  /** Whether the demo workspace is seeded (issues settings, all-in-one). */
  demo: boolean;
  /** The log level the console got (consoleLogLevel). */
  logLevel: string;
}

/** The address a browser on this machine reaches the service at: a wildcard host is localhost. */
export function localUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' || host === '' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `http://${reachable}:${port}`;
}

/** The banner's lines (no trailing newline), or none when this process serves no HTTP API. */
export function bannerLines(facts: BannerFacts): string[] {
  const { config, env } = facts;
  if (config.target !== 'all' && config.target !== 'gateway') return [];
  const url = localUrl(config.HOST, config.PORT);
  const data = config.MONGODB_URI
    ? 'MongoDB (MONGODB_URI)'
    : config.dataDir === undefined || config.dataDir === IN_MEMORY
      ? 'in memory: gone when the process stops (DATA_DIR chooses a folder)'
      : `${config.dataDir} (DATA_DIR)`;
  const password = env.SERVICE_ADMIN_PASSWORD !== undefined ? 'the password in SERVICE_ADMIN_PASSWORD' : 'the password printed when the account was created';
  const logs = facts.logLevel === 'warn' && env.LOG_LEVEL === undefined ? 'warnings and errors, as JSON (LOG_LEVEL=info shows every line)' : `JSON, level ${facts.logLevel}`;
  return [
    `Planning service is running (${config.target === 'all' ? 'all-in-one' : 'gateway'}).`,
    `  API          ${url}`,
    `  Reference    ${url}/docs`,
    `  MCP          ${url}/api/mcp  (an API token as Authorization: Bearer)`,
    ...(facts.adminEmail ? [`  Sign in      ${facts.adminEmail} with ${password}: POST ${url}/api/auth/login`] : []),
    ...(facts.demo && config.target === 'all' ? ['  Demo         a demo workspace is seeded (SERVICE_DEMO=0 turns it off)'] : []),
    `  Data         ${data}`,
    `  Logs         ${logs}`,
    '  Stop         Ctrl-C',
  ];
}

/** The banner's facts from the resolved configuration and the modules' settings. */
export function bannerFactsOf(config: ProcessConfig, settings: ReadonlyMap<string, unknown>, logLevel: string): BannerFacts {
  const gateway = settings.get('gateway') as { SERVICE_ADMIN_EMAIL?: string } | undefined;
  const issues = settings.get('issues') as { SERVICE_DEMO?: boolean } | undefined;
  return {
    config,
    env: process.env,
    ...(gateway?.SERVICE_ADMIN_EMAIL ? { adminEmail: gateway.SERVICE_ADMIN_EMAIL } : {}),
    demo: issues?.SERVICE_DEMO ?? false,
    logLevel,
  };
}

/** Prints the banner when stdout is a terminal. */
export function printBanner(facts: BannerFacts, stdout: ConsoleLike = process.stdout): void {
  if (!stdout.isTTY) return;
  const lines = bannerLines(facts);
  if (lines.length > 0) stdout.write(`\n${lines.join('\n')}\n\n`);
}

/** Variables that name a port the process listens on, by their value in the configuration. */
const PORT_VARIABLES: ReadonlyArray<[keyof ProcessConfig, string]> = [
  ['PORT', 'HTTP (REST, MCP, /docs, /live, /ready)'],
  ['GRPC_PORT', 'gRPC'],
];

/**
 * A start failure in words, when it is one a person can fix by changing a variable: a port in use
 * names the variable that sets it. Undefined for anything else (the log line has it).
 */
export function explainStartFailure(err: unknown, config: Partial<Record<string, unknown>>): string | undefined {
  const text = err instanceof Error ? `${err.message} ${(err as { code?: string }).code ?? ''}` : String(err);
  if (!/EADDRINUSE/.test(text)) return undefined;
  const portOf = (err as { port?: unknown }).port;
  const port = typeof portOf === 'number' ? portOf : Number(/EADDRINUSE[^\]]*?:(\d+)\b/.exec(text)?.[1] ?? NaN);
  for (const [variable, what] of PORT_VARIABLES) {
    if (config[variable] === port) {
      return `Cannot start: the ${what} port ${port} is already in use by another process. Stop it, or set ${variable} to a free port (for example ${variable}=${port + 1}).`;
    }
  }
  return `Cannot start: port ${Number.isNaN(port) ? '(unknown)' : port} is already in use by another process. Stop it, or choose another port.`;
}

/**
 * How long a repeat of the first stop signal counts as the same one. Ctrl-C in a terminal
 * signals the whole foreground process group, and a package manager that started the service
 * (`pnpm start`, `npm start`) forwards the signal to it once more, a few milliseconds later: that
 * repeat is the same Ctrl-C, not an operator insisting. A second Ctrl-C pressed on purpose comes
 * later than this.
 */
export const REPEATED_SIGNAL_MS = 1_000;

/**
 * What to do with a stop signal: `stop` the first, `ignore` a repeat of it within
 * REPEATED_SIGNAL_MS, `exit-now` for any other (a second Ctrl-C, or SIGTERM after SIGINT).
 */
export function stopSignals(now: () => number = Date.now): (signal: string) => 'stop' | 'ignore' | 'exit-now' {
  let first: { signal: string; at: number } | undefined;
  return (signal) => {
    if (first === undefined) {
      first = { signal, at: now() };
      return 'stop';
    }
    return signal === first.signal && now() - first.at < REPEATED_SIGNAL_MS ? 'ignore' : 'exit-now';
  };
}
