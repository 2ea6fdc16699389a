/**
 * Infrastructure modules every target shares: the event bus, the process's gRPC server, the
 * gRPC clients to peer services, and per-service document stores. Which adapter each uses is
 * decided here, from configuration, and nowhere else.
 */
import { join } from 'node:path';
import type { DescService } from '@bufbuild/protobuf';
import { createBus, type EventBus } from '@planning/bus';
import {
  createDirectClient,
  createLocalServices,
  createPrincipalSigner,
  createPrincipalVerifier,
  createRpcClient,
  createRpcServer,
  type LocalServices,
  type RpcClient,
  type RpcServer,
  type ServiceImplementation,
} from '@planning/rpc';
import { createStore, importLegacyStore, type DocumentStore } from '@planning/store';
import { recordStoreFlush, type Logger } from '@planning/telemetry';
import { IN_MEMORY, type ProcessConfig, type ServiceName } from './process-config.js';
import type { ModuleContext, ModuleDefinition } from './registry.js';

export interface BusExports {
  bus: EventBus;
}

export const busModule: ModuleDefinition<undefined, BusExports> = {
  name: 'bus',
  deps: [],
  async init(ctx) {
    const bus = ctx.config.NATS_URL
      ? await createBus({
          kind: 'nats',
          servers: ctx.config.NATS_URL,
          // What the bus recovers from itself goes to the structured log, not the console.
          onError: (err, where) => ctx.logger.warn({ err }, `event bus: ${where}`),
          logger: ctx.logger,
        })
      : await createBus({ kind: 'in-process', logger: ctx.logger });
    ctx.logger.info({ kind: bus.kind }, 'event bus ready');
    return {
      exports: { bus },
      async stop() {
        await bus.close();
      },
      async ready() {
        try {
          await bus.ping();
          return { ok: true, details: { kind: bus.kind } };
        } catch (err) {
          return { ok: false, details: { kind: bus.kind, error: err instanceof Error ? err.message : String(err) } };
        }
      },
    };
  },
};

export interface RpcServerExports {
  /** Serves the service over gRPC and to direct calls from modules in this process. */
  addService<S extends DescService>(service: S, implementation: ServiceImplementation<S>): void;
  /** host:port this process's gRPC server listens on (after start). */
  localAddress(): string;
  /** The same services, for direct (in-process) calls. */
  local: LocalServices;
}

export const rpcServerModule: ModuleDefinition<undefined, RpcServerExports> = {
  name: 'rpc-server',
  deps: [],
  async init(ctx) {
    const server: RpcServer = createRpcServer({
      host: ctx.config.GRPC_HOST,
      port: ctx.config.GRPC_PORT,
      logger: ctx.logger as unknown as Logger,
      principalVerifier: createPrincipalVerifier(ctx.config.internalSecret),
    });
    const local = createLocalServices({ logger: ctx.logger as unknown as Logger });
    let port = 0;
    return {
      exports: {
        addService: (service, implementation) => {
          server.addService(service, implementation);
          local.addService(service, implementation);
        },
        localAddress: () => `127.0.0.1:${port}`,
        local,
      },
      async start() {
        ({ port } = await server.start());
        ctx.logger.info({ host: ctx.config.GRPC_HOST, port }, 'grpc listening');
      },
      async drain() {
        await Promise.all([server.stop(), local.stop()]);
      },
    };
  },
};

export interface RpcClientsExports {
  /** A typed client for `service`, which the peer service `owner` serves. Clients are cached. */
  client<S extends DescService>(owner: ServiceName, service: S): RpcClient<S>;
}

export const rpcClientsModule: ModuleDefinition<undefined, RpcClientsExports> = {
  name: 'rpc-clients',
  deps: ['rpc-server'],
  async init(ctx) {
    const server = ctx.get<RpcServerExports>('rpc-server');
    const signer = createPrincipalSigner(ctx.config.internalSecret);
    const clients = new Map<string, RpcClient<DescService>>();
    const addressOf = (owner: ServiceName): string => {
      // RPC_TRANSPORT=grpc: a peer that runs here is dialled through our own gRPC server.
      if (ctx.has(owner)) return server.localAddress();
      const address = ctx.config.peers[owner];
      if (!address) throw new Error(`no gRPC address configured for ${owner}`);
      return address;
    };
    return {
      exports: {
        client<S extends DescService>(owner: ServiceName, service: S): RpcClient<S> {
          const key = `${owner}/${service.typeName}`;
          const existing = clients.get(key);
          if (existing) return existing as unknown as RpcClient<S>;
          if (ctx.has(owner) && ctx.config.RPC_TRANSPORT === 'direct') {
            const direct = createDirectClient(service, { services: server.local, defaultDeadlineMs: ctx.config.RPC_DEADLINE_MS });
            clients.set(key, direct as unknown as RpcClient<DescService>);
            return direct;
          }
          // Dial on first call: in all-in-one the local server's port is only known once it listens.
          let real: RpcClient<DescService> | undefined;
          const connect = (): RpcClient<DescService> => {
            real ??= createRpcClient(service, {
              address: addressOf(owner),
              principalSigner: signer,
              defaultDeadlineMs: ctx.config.RPC_DEADLINE_MS,
            }) as unknown as RpcClient<DescService>;
            return real;
          };
          const lazy: Record<string, unknown> = {
            close: () => real?.close(),
          };
          for (const method of service.methods) {
            lazy[method.localName] = (request: unknown, options: unknown) =>
              (connect() as unknown as Record<string, (r: unknown, o: unknown) => Promise<unknown>>)[method.localName]!(
                request,
                options,
              );
          }
          clients.set(key, lazy as unknown as RpcClient<DescService>);
          return lazy as unknown as RpcClient<S>;
        },
      },
      async stop() {
        for (const client of clients.values()) client.close();
        clients.clear();
      },
    };
  },
};

/**
 * Opens the document store a service owns: its own MongoDB database (`<prefix>-<service>`), or
 * the embedded SQLite store in `<DATA_DIR>/<service>/<service>.sqlite` (in memory for
 * `DATA_DIR=:memory:`).
 */
export async function openServiceStore(
  config: ProcessConfig,
  service: ServiceName,
  logger?: { info(details: Record<string, unknown>, message: string): void; warn(details: Record<string, unknown>, message: string): void },
): Promise<DocumentStore> {
  // Housekeeping that failed (an expiry sweep, text indexing, a commit callback) goes to the
  // service's JSON log, not to stderr.
  const warn = logger ? { warn: (details: Record<string, unknown>, message: string) => logger.warn({ service, ...details }, message) } : {};
  if (config.MONGODB_URI) {
    return createStore({ kind: 'mongodb', uri: config.MONGODB_URI, database: `${config.MONGODB_DB_PREFIX}-${service}`, ...warn });
  }
  const dataDir = config.dataDir ?? IN_MEMORY;
  if (dataDir === IN_MEMORY) return createStore({ kind: 'embedded', path: IN_MEMORY, ...warn });
  const log = logger ? (details: Record<string, unknown>, message: string) => logger.info({ service, ...details }, message) : undefined;
  return createStore({
    kind: 'embedded',
    path: serviceStorePath(dataDir, service),
    ...(log ? { log } : {}),
    ...warn,
    onFlush: (seconds, commits) => recordStoreFlush(service, seconds, commits),
  });
}

/** The SQLite file of a service's embedded store under DATA_DIR. */
export function serviceStorePath(dataDir: string, service: ServiceName): string {
  return join(dataDir, service, `${service}.sqlite`);
}

/**
 * Imports, once, each service folder of DATA_DIR still in the former embedded engine's format
 * (`<service>.snapshot` / `<service>.journal`) into its SQLite file, keeping the old files in a
 * backup folder beside it. Runs before the services open their stores.
 */
export async function importLegacyDataDir(
  config: ProcessConfig,
  services: readonly ServiceName[],
  log: (details: Record<string, unknown>, message: string) => void,
): Promise<void> {
  const dataDir = config.dataDir;
  if (config.MONGODB_URI || dataDir === undefined || dataDir === IN_MEMORY) return;
  for (const service of services) {
    const result = await importLegacyStore({ dir: join(dataDir, service), name: service, target: serviceStorePath(dataDir, service) });
    if (result.imported) {
      log({ service, collections: result.collections, documents: result.documents, backup: result.backup }, 'imported the old embedded store files into SQLite');
    } else if (result.backup) {
      log({ service, backup: result.backup }, 'moved already imported old embedded store files aside');
    }
  }
}

/** Readiness of a store, for a service module's `ready()`. */
export async function storeReadiness(store: DocumentStore): Promise<{ ok: boolean; details: Record<string, unknown> }> {
  try {
    await store.ping();
    return { ok: true, details: { store: store.kind } };
  } catch (err) {
    return { ok: false, details: { store: store.kind, error: err instanceof Error ? err.message : String(err) } };
  }
}

/** Shorthand used by service modules. */
export type ServiceContext<TSettings = undefined> = ModuleContext<TSettings>;
