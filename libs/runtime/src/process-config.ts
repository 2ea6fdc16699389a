/**
 * Process-wide configuration: what every process needs whatever its target (ports, backends,
 * peers). Read from environment variables only, once, in `loadProcessConfig` (process-env.ts,
 * the `@planning/runtime/config` entry: the variables' schemas are zod's, which only the thread
 * that reads the environment loads). This file holds the resolved shape and what is derived
 * from it, for every thread.
 */
import { availableParallelism, homedir } from 'node:os';
import { join } from 'node:path';
import type { ProcessEnv } from './process-env.js';

export type { ProcessEnv };

export const SERVICE_MODULES = ['gateway', 'issues', 'agents-claims', 'imports-exports', 'audit'] as const;
export type ServiceName = (typeof SERVICE_MODULES)[number];

export const TARGETS = ['all', ...SERVICE_MODULES] as const;
export type Target = (typeof TARGETS)[number];

/** The gRPC peer variable for each service that can be reached remotely. */
export const PEER_VARIABLES: Readonly<Record<ServiceName, string>> = {
  gateway: 'GATEWAY_GRPC_URL',
  issues: 'ISSUES_GRPC_URL',
  'agents-claims': 'AGENTS_CLAIMS_GRPC_URL',
  'imports-exports': 'IMPORTS_EXPORTS_GRPC_URL',
  audit: 'AUDIT_GRPC_URL',
};

export interface ProcessConfig extends ProcessEnv {
  target: Target;
  /** Milliseconds between turning readiness off and draining, on SIGTERM. */
  shutdownDelayMs: number;
  /** Which services each process kind dials over gRPC, for distributed targets. */
  peers: Partial<Record<ServiceName, string>>;
  /**
   * Key that signs the principal passed over gRPC: SERVICE_INTERNAL_SECRET, or (all-in-one only)
   * a random key made at start, which keeps the process's gRPC port closed to outside callers.
   */
  internalSecret: string;
  /** TRUST_PROXY resolved for the HTTP server. */
  trustProxy: boolean | string;
  /**
   * The embedded store's location when MONGODB_URI is not set: an absolute folder (a SQLite file
   * per service inside it) or `:memory:`. Undefined with MONGODB_URI.
   */
  dataDir: string | undefined;
}

/** `:memory:` as DATA_DIR: the embedded store keeps nothing on disk. */
export const IN_MEMORY = ':memory:';

/**
 * The default DATA_DIR of all-in-one: `planning-service` under the user's data directory
 * (`$XDG_DATA_HOME` or `~/.local/share` on Linux, `~/Library/Application Support` on macOS,
 * `%LOCALAPPDATA%` on Windows).
 */
export function defaultDataDir(source: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): string {
  const home = source.HOME || homedir();
  if (platform === 'win32') return join(source.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'planning-service');
  if (platform === 'darwin') return join(home, 'Library', 'Application Support', 'planning-service');
  return join(source.XDG_DATA_HOME || join(home, '.local', 'share'), 'planning-service');
}

/**
 * The services each service calls over gRPC. A target that does not run a needed service in
 * its own process must be told where to find it.
 */
export const SERVICE_PEERS: Readonly<Record<ServiceName, readonly ServiceName[]>> = {
  gateway: ['issues', 'agents-claims', 'imports-exports', 'audit'],
  // Issues asks agents-claims for the fence of agent writes (ClaimService.CheckTaskWrites).
  issues: ['agents-claims'],
  'agents-claims': ['issues'],
  'imports-exports': ['issues'],
  audit: ['issues'],
};

/** Does this all-in-one process run its services in a worker thread (see SERVICES_THREAD)? */
export function usesServicesThread(config: Pick<ProcessConfig, 'target' | 'SERVICES_THREAD'>): boolean {
  if (config.target !== 'all' || config.SERVICES_THREAD === 'off') return false;
  return config.SERVICES_THREAD === 'on' || availableParallelism() >= 2;
}

export function servicesOf(target: Target): ServiceName[] {
  return target === 'all' ? [...SERVICE_MODULES] : [target];
}
