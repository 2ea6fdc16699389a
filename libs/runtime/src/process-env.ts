/**
 * The process's environment variables, parsed (zod schemas, through @planning/config) into a
 * `ProcessConfig`. Only the thread that reads the environment loads this file: it is the
 * `@planning/runtime/config` entry, apart from `@planning/runtime`, so the services' worker
 * thread, which receives its configuration already resolved, never evaluates zod.
 */
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { env, loadEnv, secret, type ConfigProblem, type EnvValues, describeEnv } from '@planning/config';
import { defaultDataDir, IN_MEMORY, PEER_VARIABLES, SERVICE_PEERS, servicesOf, TARGETS, type ProcessConfig, type ServiceName } from './process-config.js';

export const processEnvShape = {
  SERVICE_TARGET: env.oneOf(TARGETS).default('all'),
  HOST: env.string().default('0.0.0.0'),
  PORT: env.port().default(8080),
  GRPC_HOST: env.string().default('0.0.0.0'),
  GRPC_PORT: env.port().default(50051),
  /** `GET /metrics` (Prometheus text format), on a port of its own that no public Service exposes. */
  METRICS_HOST: env.string().default('0.0.0.0'),
  METRICS_PORT: env.port().default(9464),
  NATS_URL: env.urlList(['nats', 'tls']).optional(),
  REDIS_URL: secret(env.url(['redis', 'rediss']).optional()),
  MONGODB_URI: secret(env.url(['mongodb', 'mongodb+srv']).optional()),
  MONGODB_DB_PREFIX: env.string().default('planning'),
  /**
   * Where the embedded store keeps its files (a folder per service), or `:memory:` (nothing kept:
   * tests). All-in-one defaults to a folder under the user's data directory.
   */
  DATA_DIR: env.string().optional(),
  SERVICE_INTERNAL_SECRET: secret(env.string().min(32, 'must be at least 32 characters').optional()),
  ISSUES_GRPC_URL: env.hostPort().optional(),
  AGENTS_CLAIMS_GRPC_URL: env.hostPort().optional(),
  IMPORTS_EXPORTS_GRPC_URL: env.hostPort().optional(),
  AUDIT_GRPC_URL: env.hostPort().optional(),
  RPC_DEADLINE_MS: env.int(100, 600_000).default(10_000),
  /**
   * How a module calls a service that runs in the same process: `direct` (the handler is called
   * in process, messages copied) or `grpc` (through the process's own gRPC server, over loopback).
   * Services in other processes are always called over gRPC.
   */
  RPC_TRANSPORT: env.oneOf(['direct', 'grpc']).default('direct'),
  /**
   * All-in-one only: run the services in a worker thread beside the gateway's (`on`), in the
   * gateway's thread (`off`), or `auto`: a worker thread when the machine has two cores or more.
   */
  SERVICES_THREAD: env.oneOf(['auto', 'on', 'off']).default('auto'),
  SHUTDOWN_DELAY_MS: env.int(0, 120_000).optional(),
  /**
   * Which proxies in front of the HTTP server to trust for the client address and protocol
   * (`X-Forwarded-For`, `X-Forwarded-Proto`): `false` (default), `true` (any), or a
   * comma-separated list of addresses/CIDRs such as `loopback,10.0.0.0/8`.
   */
  TRUST_PROXY: env.string().optional(),
  LOG_LEVEL: env.oneOf(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  SERVICE_FAILPOINTS: env.string().optional(),
};

export type ProcessEnv = EnvValues<typeof processEnvShape>;

function parseTrustProxy(value: string | undefined): boolean | string {
  if (value === undefined) return false;
  const lower = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(lower)) return true;
  if (['0', 'false', 'no', 'off'].includes(lower)) return false;
  return value.trim();
}

export type ProcessConfigResult = { ok: true; value: ProcessConfig } | { ok: false; problems: ConfigProblem[] };

export function loadProcessConfig(source: NodeJS.ProcessEnv, targetOverride?: string): ProcessConfigResult {
  const problems: ConfigProblem[] = [];
  const input = targetOverride === undefined ? source : { ...source, SERVICE_TARGET: targetOverride };
  const parsed = loadEnv(processEnvShape, input);
  if (!parsed.ok) {
    // Report a bad --target as such rather than as the variable it overrides.
    return {
      ok: false,
      problems: parsed.problems.map((p) =>
        p.variable === 'SERVICE_TARGET' && targetOverride !== undefined ? { ...p, variable: '--target' } : p,
      ),
    };
  }
  const values = parsed.value;
  const target = values.SERVICE_TARGET;
  const services = servicesOf(target);

  if (target !== 'all') {
    if (!values.NATS_URL) {
      problems.push({
        variable: 'NATS_URL',
        message: `is required for --target=${target}: the in-process event bus cannot span processes`,
      });
    }
    if (!values.SERVICE_INTERNAL_SECRET) {
      problems.push({
        variable: 'SERVICE_INTERNAL_SECRET',
        message: `is required for --target=${target}: processes sign the principal they pass over gRPC with it`,
      });
    }
    if (!values.MONGODB_URI && values.DATA_DIR === undefined) {
      problems.push({
        variable: 'MONGODB_URI',
        message:
          `is required for --target=${target}: a service process keeps its data in MongoDB. To run it on the embedded ` +
          `store instead, say so: DATA_DIR=<a folder of its own> (SQLite files) or DATA_DIR=${IN_MEMORY} (nothing kept)`,
      });
    }
  }

  const peers: Partial<Record<ServiceName, string>> = {};
  for (const service of services) {
    for (const peer of SERVICE_PEERS[service]) {
      if (services.includes(peer)) continue;
      const variable = PEER_VARIABLES[peer];
      const address = (values as Record<string, unknown>)[variable];
      if (typeof address === 'string') peers[peer] = address;
      else problems.push({ variable, message: `is required for --target=${target} (it calls ${peer} over gRPC)` });
    }
  }

  if (values.METRICS_PORT === values.PORT || values.METRICS_PORT === values.GRPC_PORT) {
    problems.push({
      variable: 'METRICS_PORT',
      message: `must differ from PORT and GRPC_PORT (${values.METRICS_PORT} is taken): metrics stay off the ports that carry traffic`,
    });
  }

  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    value: {
      ...values,
      target,
      peers,
      shutdownDelayMs: values.SHUTDOWN_DELAY_MS ?? (target === 'all' ? 0 : 5_000),
      internalSecret: values.SERVICE_INTERNAL_SECRET ?? randomBytes(32).toString('hex'),
      trustProxy: parseTrustProxy(values.TRUST_PROXY),
      dataDir: values.MONGODB_URI
        ? undefined
        : values.DATA_DIR === IN_MEMORY
          ? IN_MEMORY
          : resolve(values.DATA_DIR ?? defaultDataDir(source)),
    },
  };
}

/** The resolved process configuration with secrets hidden. */
export function describeProcessConfig(config: ProcessConfig): Record<string, unknown> {
  return { ...describeEnv(processEnvShape, config), shutdownDelayMs: config.shutdownDelayMs, peers: config.peers, dataDir: config.dataDir };
}
