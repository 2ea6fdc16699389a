/**
 * All-in-one on two cores: the gateway (HTTP, authentication, JSON) runs in the main thread and
 * the services (issues, agents-claims, imports-exports, audit, with their stores, the event bus,
 * the outbox relays, the consumers and the gRPC server) in one worker thread. The modules are the
 * same; what changes is how the gateway reaches them: its `bus` and `rpc-clients` modules here
 * are ports into the worker (see thread-port.ts). Calls between services inside the worker stay
 * direct.
 */
import { setFlagsFromString } from 'node:v8';
import { MessageChannel, Worker, type MessagePort, type ResourceLimits } from 'node:worker_threads';
import type { DescService } from '@bufbuild/protobuf';
import { createPrincipalSigner, createRpcClient, viewRegistry, type ResponseView, type RpcClient } from '@planning/rpc';
import type { BusExports, RpcClientsExports, RpcServerExports } from './infra.js';
import type { ProcessConfig, ServiceName } from './process-config.js';
import type { ModuleDefinition } from './registry.js';
import { createThreadPortClient, serveThreadPort, type ThreadPortClient } from './thread-port.js';

/** What the main thread hands the services' worker. */
export interface ServicesThreadData {
  config: ProcessConfig;
  /**
   * The settings of the modules the worker runs, parsed and checked here: the worker does not
   * read its environment again (nor load the schemas, zod's, that read it).
   */
  settings: Record<string, unknown>;
  port: MessagePort;
  /** The main thread's log level (on a terminal it can differ from LOG_LEVEL: see first-run). */
  logLevel: string;
}

type Lifecycle = { t: 'started'; grpcPort: number } | { t: 'failed'; message: string } | { t: 'stopped' };

export interface ServicesThreadExports {
  port: ThreadPortClient;
  /** The worker's gRPC server (for RPC_TRANSPORT=grpc); known once this module has started. */
  grpcAddress(): string;
}

/**
 * The main thread's handle on the services' worker: starts it (and waits until every service in
 * it runs), reports its readiness, and stops it last.
 */
export function createServicesThreadModule(
  entry: URL,
  options: { settings: ReadonlyMap<string, unknown>; execArgv?: string[]; resourceLimits?: ResourceLimits },
): ModuleDefinition<undefined, ServicesThreadExports> {
  return {
    name: 'services-thread',
    deps: [],
    async init(ctx) {
      const channel = new MessageChannel();
      const logLevel = (ctx.logger as { level?: unknown }).level;
      const data: ServicesThreadData = {
        config: ctx.config,
        settings: Object.fromEntries(options.settings),
        port: channel.port2,
        logLevel: typeof logLevel === 'string' ? logLevel : ctx.config.LOG_LEVEL,
      };
      const young = options.resourceLimits?.maxYoungGenerationSizeMb;
      // V8 lets `--max-semi-space-size`, when set (the start commands set it for the main thread:
      // scripts/node-flags.mjs), override a worker's young generation limit. The flag is read when
      // an isolate is made, so raised here it reaches the worker's isolate and leaves this one's as
      // it is. (A young generation is three semi-spaces.)
      if (young !== undefined) setFlagsFromString(`--max-semi-space-size=${Math.max(1, Math.floor(young / 3))}`);
      const worker = new Worker(entry, {
        workerData: data,
        transferList: [channel.port2],
        ...(options.execArgv ? { execArgv: options.execArgv } : {}),
        ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
      });
      const port = createThreadPortClient(channel.port1);
      let stopping = false;
      const lifecycle = (t: Lifecycle['t']): Promise<Lifecycle> =>
        new Promise((resolve, reject) => {
          const onMessage = (message: Lifecycle) => {
            if (message.t !== t && message.t !== 'failed') return;
            worker.off('message', onMessage);
            worker.off('exit', onExit);
            resolve(message);
          };
          const onExit = (code: number) => {
            worker.off('message', onMessage);
            reject(new Error(`the services thread exited (${code}) before it was ${t}`));
          };
          worker.on('message', onMessage);
          worker.once('exit', onExit);
        });
      worker.on('error', (err) => ctx.logger.error({ err }, 'services thread failed'));
      worker.on('exit', (code) => {
        port.close('the services thread has stopped');
        if (stopping) return;
        // Without its services the process cannot answer anything: end it, as a crash of a
        // single-threaded process would.
        ctx.logger.error({ code }, 'services thread exited; stopping the process');
        process.exit(1);
      });
      // The worker boots on the other core while this thread initialises the gateway; `start`
      // (before the gateway's) waits until every service in it runs.
      const started = lifecycle('started');
      started.catch(() => undefined);
      let grpcPort = 0;
      return {
        exports: { port, grpcAddress: () => `127.0.0.1:${grpcPort}` },
        async start() {
          const outcome = await started;
          if (outcome.t === 'failed') throw new Error(`services thread: ${outcome.message}`);
          if (outcome.t === 'started') grpcPort = outcome.grpcPort;
          ctx.logger.info({ threadId: worker.threadId }, 'services thread running');
        },
        async ready() {
          const report = await port.ready();
          return { ok: report.ok, details: { notRunning: report.notRunning, ...report.details } };
        },
        async stop() {
          stopping = true;
          const stopped = lifecycle('stopped').catch(() => undefined);
          worker.postMessage({ t: 'shutdown' });
          // Everything in it has stopped by then (or it is stuck): end the thread.
          const timer = setTimeout(() => void worker.terminate(), 30_000);
          await stopped;
          clearTimeout(timer);
          await worker.terminate();
        },
      };
    },
  };
}

/** The gateway thread's event bus: publishes go to the services thread's bus. */
export const threadBusModule: ModuleDefinition<undefined, BusExports> = {
  name: 'bus',
  deps: ['services-thread'],
  async init(ctx) {
    const { port } = ctx.get<ServicesThreadExports>('services-thread');
    return { exports: { bus: port.bus } };
  },
};

/**
 * The gateway thread's clients: calls cross the port into the services thread, or, with
 * RPC_TRANSPORT=grpc, go over loopback to the services thread's gRPC server.
 */
export const threadClientsModule: ModuleDefinition<undefined, RpcClientsExports> = {
  name: 'rpc-clients',
  deps: ['services-thread'],
  async init(ctx) {
    const thread = ctx.get<ServicesThreadExports>('services-thread');
    const signer = createPrincipalSigner(ctx.config.internalSecret);
    const clients = new Map<string, RpcClient<DescService>>();
    return {
      exports: {
        client<S extends DescService>(_owner: ServiceName, service: S): RpcClient<S> {
          const existing = clients.get(service.typeName);
          if (existing) return existing as unknown as RpcClient<S>;
          const client =
            ctx.config.RPC_TRANSPORT === 'grpc'
              ? dialLater(service, () =>
                  createRpcClient(service, { address: thread.grpcAddress(), principalSigner: signer, defaultDeadlineMs: ctx.config.RPC_DEADLINE_MS }),
                )
              : thread.port.client(service, { defaultDeadlineMs: ctx.config.RPC_DEADLINE_MS });
          clients.set(service.typeName, client as unknown as RpcClient<DescService>);
          return client;
        },
      },
      async stop() {
        for (const client of clients.values()) client.close();
      },
    };
  },
};

/** A client that dials on its first call (the address is known only once the services thread listens). */
function dialLater<S extends DescService>(service: S, dial: () => RpcClient<S>): RpcClient<S> {
  let real: RpcClient<S> | undefined;
  const stub: Record<string, unknown> = { close: () => real?.close() };
  for (const method of service.methods) {
    stub[method.localName] = (request: unknown, options: unknown) =>
      ((real ??= dial()) as unknown as Record<string, (r: unknown, o: unknown) => Promise<unknown>>)[method.localName]!(request, options);
  }
  return stub as RpcClient<S>;
}

/** In the services thread: answers the gateway thread's calls, publishes and readiness checks. */
export function createThreadPortModule(
  port: MessagePort,
  onListening: (grpcAddress: string) => void = () => {},
  /** The response views the gateway's thread may ask for (rendered here, see thread-port.ts). */
  views: readonly ResponseView<never>[] = [],
): ModuleDefinition {
  return {
    name: 'thread-port',
    deps: ['bus', 'rpc-server'],
    async init(ctx) {
      const server = ctx.get<RpcServerExports>('rpc-server');
      const { bus } = ctx.get<BusExports>('bus');
      serveThreadPort(port, { services: server.local, bus: () => bus, ready: () => ctx.runtime.ready(), logger: ctx.logger, views: viewRegistry(views) });
      return {
        async start() {
          onListening(server.localAddress());
        },
        async stop() {
          port.close();
        },
      };
    },
  };
}
