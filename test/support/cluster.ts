import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getFreePort, startNatsServer, startRedisServer, type NatsServerHandle, type RedisServerHandle } from '@planning/testing';
import { ServiceProcess } from './service-process.js';

export type Mode = 'all-in-one' | 'distributed';

export const SERVICES = ['issues', 'agents-claims', 'imports-exports', 'audit', 'gateway'] as const;
export type Service = (typeof SERVICES)[number];

export const ADMIN_EMAIL = 'admin@example.com';

export interface Cluster {
  mode: Mode;
  /** The gateway's base URL. */
  baseUrl: string;
  adminPassword: string;
  /** Processes by name: `all` in all-in-one mode, one per service in distributed mode. */
  processes: Map<string, ServiceProcess>;
  process(name: string): ServiceProcess;
  nats?: NatsServerHandle;
  redisUrl?: string;
  /** The private redis-server of a distributed cluster (stop/start it to test outages). */
  redis?: RedisServerHandle;
  /** Where the processes' embedded stores persist (DATA_DIR). */
  dataDir: string;
  /**
   * Starts one more gateway process sharing the cluster's stores, bus and Redis (distributed
   * mode only): a second replica behind the same load balancer.
   */
  addGateway(extraEnv?: Record<string, string>): Promise<ServiceProcess>;
  /** Stops everything; `keepData` leaves `dataDir` for inspection (the caller removes it). */
  stop(options?: { keepData?: boolean }): Promise<void>;
}

export interface ClusterOptions {
  /** Extra environment for every process. */
  env?: Record<string, string>;
  /** Extra environment per process name (`all`, `gateway`, `audit`, ...). */
  envFor?: Partial<Record<string, Record<string, string>>>;
}

function baseEnv(dataDir: string, adminPassword: string): Record<string, string> {
  return {
    SERVICE_ADMIN_EMAIL: ADMIN_EMAIL,
    SERVICE_ADMIN_PASSWORD: adminPassword,
    SERVICE_DEMO: '0',
    LOG_LEVEL: 'warn',
    SHUTDOWN_DELAY_MS: '0',
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
  };
}

export async function startAllInOne(options: ClusterOptions = {}): Promise<Cluster> {
  const dataDir = await mkdtemp(join(tmpdir(), 'planning-e2e-'));
  const adminPassword = `pw-${randomBytes(12).toString('hex')}`;
  const port = await getFreePort();
  const proc = new ServiceProcess(
    'all',
    {
      ...baseEnv(dataDir, adminPassword),
      PORT: String(port),
      GRPC_PORT: String(await getFreePort()),
      ...options.env,
      ...options.envFor?.all,
    },
    port,
    ['--target=all'],
  );
  await proc.start();
  const processes = new Map([['all', proc]]);
  return {
    mode: 'all-in-one',
    baseUrl: proc.baseUrl,
    adminPassword,
    processes,
    dataDir,
    process: (name) => processes.get(name) ?? proc,
    addGateway() {
      return Promise.reject(new Error('addGateway: all-in-one mode runs one process'));
    },
    async stop(stopOptions = {}) {
      await proc.stop();
      if (!stopOptions.keepData) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Five processes of the same entry point, one per service, each with its own store, talking
 * over gRPC and NATS JetStream, with Redis for the gateway.
 */
export async function startDistributed(options: ClusterOptions = {}): Promise<Cluster> {
  const dataDir = await mkdtemp(join(tmpdir(), 'planning-e2e-'));
  const adminPassword = `pw-${randomBytes(12).toString('hex')}`;
  const nats = await startNatsServer();
  const redis = await startRedisServer();
  const secret = randomBytes(32).toString('hex');
  const ports = new Map<Service, { http: number; grpc: number }>();
  for (const service of SERVICES) ports.set(service, { http: await getFreePort(), grpc: await getFreePort() });
  const grpcUrl = (s: Service) => `127.0.0.1:${ports.get(s)!.grpc}`;
  const shared = {
    ...baseEnv(dataDir, adminPassword),
    NATS_URL: nats.url,
    REDIS_URL: redis.url,
    SERVICE_INTERNAL_SECRET: secret,
    ISSUES_GRPC_URL: grpcUrl('issues'),
    AGENTS_CLAIMS_GRPC_URL: grpcUrl('agents-claims'),
    IMPORTS_EXPORTS_GRPC_URL: grpcUrl('imports-exports'),
    AUDIT_GRPC_URL: grpcUrl('audit'),
    ...options.env,
  };
  const processes = new Map<string, ServiceProcess>();
  for (const service of SERVICES) {
    const p = ports.get(service)!;
    processes.set(
      service,
      new ServiceProcess(
        service,
        { ...shared, PORT: String(p.http), GRPC_PORT: String(p.grpc), ...options.envFor?.[service] },
        p.http,
        [`--target=${service}`],
      ),
    );
  }
  try {
    // Independent processes: start them together, as a scheduler would.
    await Promise.all([...processes.values()].map((proc) => proc.start()));
  } catch (err) {
    await Promise.all([...processes.values()].map((proc) => proc.stop('SIGKILL')));
    await nats.stop();
    await redis.stop();
    throw err;
  }
  const gateway = processes.get('gateway')!;
  let extraGateways = 0;
  return {
    mode: 'distributed',
    baseUrl: gateway.baseUrl,
    adminPassword,
    processes,
    dataDir,
    process(name) {
      const proc = processes.get(name);
      if (!proc) throw new Error(`no process ${name}`);
      return proc;
    },
    nats,
    redisUrl: redis.url,
    redis,
    async addGateway(extraEnv = {}) {
      extraGateways += 1;
      const http = await getFreePort();
      const proc = new ServiceProcess(
        `gateway-${extraGateways + 1}`,
        { ...shared, PORT: String(http), GRPC_PORT: String(await getFreePort()), ...options.envFor?.gateway, ...extraEnv },
        http,
        ['--target=gateway'],
      );
      processes.set(proc.name, proc);
      await proc.start();
      return proc;
    },
    async stop(stopOptions = {}) {
      await Promise.all([...processes.values()].map((proc) => proc.stop()));
      await nats.stop();
      await redis.stop();
      if (!stopOptions.keepData) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export function startCluster(mode: Mode, options: ClusterOptions = {}): Promise<Cluster> {
  return mode === 'all-in-one' ? startAllInOne(options) : startDistributed(options);
}
