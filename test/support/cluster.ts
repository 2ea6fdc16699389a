import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getFreePort, startNatsServer, startRedisServer, type NatsServerHandle, type RedisServerHandle } from '@planning/testing';
import { ROOT, ServiceProcess } from './service-process.js';

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
   * Base URLs of every gateway started with the cluster: the main one first, then (distributed,
   * `agentsClaimsReplicas` > 1) one per extra agents-claims replica, dialling that replica.
   */
  gatewayUrls: string[];
  /** Distributed with `agentsClaimsReplicas` > 1: the store the agents-claims replicas share. */
  claimsStoreUri?: string;
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
  /**
   * Distributed only: how many agents-claims processes to run (default 1). With more than one they
   * share one claims store, a mongo-wire server in its own process (as replicas share a MongoDB),
   * each extra replica `agents-claims-<n>` gets a gateway `gateway-claims-<n>` that dials it, and
   * `envFor['agents-claims']` applies to every replica.
   */
  agentsClaimsReplicas?: number;
  /**
   * Put the agents-claims store on a mongo-wire server in its own process (`claimsStoreUri`), so
   * a test can look into it with the MongoDB driver: in all-in-one mode the process's stores
   * (MONGODB_URI), in distributed mode the agents-claims processes' and the gateways' (implied by
   * `agentsClaimsReplicas` > 1: gateways share API keys that way).
   */
  mongoWire?: boolean;
}

/** A mongo-wire server (the embedded store behind MongoDB's wire protocol) as its own process. */
export async function startMongoWireProcess(): Promise<{ uri: string; stop(): Promise<void> }> {
  // In memory: the test never restarts it, and journaling every write would only slow it down.
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'libs/testing/src/mongo-wire/cli.ts'), '--port', '0'],
    { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const errors: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => errors.push(chunk.toString('utf8')));
  const uri = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => reject(new Error(`mongo-wire did not start:\n${errors.join('')}`)), 30_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const line = buffered.split('\n')[0];
      if (buffered.includes('\n') && line) {
        clearTimeout(timer);
        resolve(line.trim());
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mongo-wire exited (${code}) during start:\n${errors.join('')}`));
    });
  });
  return {
    uri,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

function baseEnv(dataDir: string, adminPassword: string): Record<string, string> {
  return {
    SERVICE_ADMIN_EMAIL: ADMIN_EMAIL,
    SERVICE_ADMIN_PASSWORD: adminPassword,
    SERVICE_DEMO: '0',
    LOG_LEVEL: 'warn',
    SHUTDOWN_DELAY_MS: '0',
    // Explicit, never the user data directory all-in-one defaults to: SQLite files in a fresh
    // folder, because suites restart processes and read what they stored. (DATA_DIR=:memory:
    // keeps nothing; a single-service target refuses to start without MONGODB_URI or DATA_DIR.)
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    // CI runs the end-to-end suites once more with RPC_TRANSPORT=grpc (in-process calls over loopback gRPC).
    ...(process.env.RPC_TRANSPORT ? { RPC_TRANSPORT: process.env.RPC_TRANSPORT } : {}),
  };
}

export async function startAllInOne(options: ClusterOptions = {}): Promise<Cluster> {
  const dataDir = await mkdtemp(join(tmpdir(), 'planning-e2e-'));
  const adminPassword = `pw-${randomBytes(12).toString('hex')}`;
  const port = await getFreePort();
  const store = options.mongoWire ? await startMongoWireProcess() : undefined;
  const proc = new ServiceProcess(
    'all',
    {
      ...baseEnv(dataDir, adminPassword),
      PORT: String(port),
      GRPC_PORT: String(await getFreePort()),
      ...(store ? { MONGODB_URI: store.uri } : {}),
      ...options.env,
      ...options.envFor?.all,
    },
    port,
    ['--target=all'],
  );
  try {
    await proc.start();
  } catch (err) {
    await proc.stop('SIGKILL');
    await store?.stop();
    throw err;
  }
  const processes = new Map([['all', proc]]);
  return {
    mode: 'all-in-one',
    baseUrl: proc.baseUrl,
    adminPassword,
    processes,
    dataDir,
    process: (name) => processes.get(name) ?? proc,
    gatewayUrls: [proc.baseUrl],
    ...(store ? { claimsStoreUri: store.uri } : {}),
    addGateway() {
      return Promise.reject(new Error('addGateway: all-in-one mode runs one process'));
    },
    async stop(stopOptions = {}) {
      await proc.stop();
      await store?.stop();
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
  const replicas = options.agentsClaimsReplicas ?? 1;
  const claimsStore = replicas > 1 || options.mongoWire ? await startMongoWireProcess() : undefined;
  const claimsEnv = { ...(claimsStore ? { MONGODB_URI: claimsStore.uri } : {}), ...options.envFor?.['agents-claims'] };
  // Gateways share their store too (API keys, users), so a gateway per replica knows every key.
  const gatewayEnv = { ...(claimsStore ? { MONGODB_URI: claimsStore.uri } : {}), ...options.envFor?.gateway };
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
        {
          ...shared,
          PORT: String(p.http),
          GRPC_PORT: String(p.grpc),
          ...(service === 'agents-claims' ? claimsEnv : service === 'gateway' ? gatewayEnv : options.envFor?.[service]),
        },
        p.http,
        [`--target=${service}`],
      ),
    );
  }
  const gatewayUrls: string[] = [];
  for (let n = 2; n <= replicas; n++) {
    const claimsPorts = { http: await getFreePort(), grpc: await getFreePort() };
    processes.set(
      `agents-claims-${n}`,
      new ServiceProcess(
        `agents-claims-${n}`,
        { ...shared, PORT: String(claimsPorts.http), GRPC_PORT: String(claimsPorts.grpc), ...claimsEnv },
        claimsPorts.http,
        ['--target=agents-claims'],
      ),
    );
    const http = await getFreePort();
    processes.set(
      `gateway-claims-${n}`,
      new ServiceProcess(
        `gateway-claims-${n}`,
        {
          ...shared,
          PORT: String(http),
          GRPC_PORT: String(await getFreePort()),
          ...gatewayEnv,
          AGENTS_CLAIMS_GRPC_URL: `127.0.0.1:${claimsPorts.grpc}`,
        },
        http,
        ['--target=gateway'],
      ),
    );
  }
  try {
    // Independent processes: start them together, as a scheduler would.
    await Promise.all([...processes.values()].map((proc) => proc.start()));
  } catch (err) {
    await Promise.all([...processes.values()].map((proc) => proc.stop('SIGKILL')));
    await claimsStore?.stop();
    await nats.stop();
    await redis.stop();
    throw err;
  }
  const gateway = processes.get('gateway')!;
  gatewayUrls.push(gateway.baseUrl);
  for (let n = 2; n <= replicas; n++) gatewayUrls.push(processes.get(`gateway-claims-${n}`)!.baseUrl);
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
    gatewayUrls,
    ...(claimsStore ? { claimsStoreUri: claimsStore.uri } : {}),
    async addGateway(extraEnv = {}) {
      extraGateways += 1;
      const http = await getFreePort();
      const proc = new ServiceProcess(
        `gateway-${extraGateways + 1}`,
        { ...shared, PORT: String(http), GRPC_PORT: String(await getFreePort()), ...gatewayEnv, ...extraEnv },
        http,
        ['--target=gateway'],
      );
      processes.set(proc.name, proc);
      await proc.start();
      return proc;
    },
    async stop(stopOptions = {}) {
      await Promise.all([...processes.values()].map((proc) => proc.stop()));
      await claimsStore?.stop();
      await nats.stop();
      await redis.stop();
      if (!stopOptions.keepData) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export function startCluster(mode: Mode, options: ClusterOptions = {}): Promise<Cluster> {
  return mode === 'all-in-one' ? startAllInOne(options) : startDistributed(options);
}
