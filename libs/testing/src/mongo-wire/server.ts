/**
 * mongo-wire: the embedded document store behind MongoDB's wire protocol. A test fixture (like
 * cognito-local for Cognito), NOT MongoDB: it lets the official driver and our MongoDB adapter
 * run end to end, and lets several processes share one embedded store in tests. It announces
 * itself as a one-member replica set primary of MongoDB 7.0 so the driver allows sessions and
 * transactions.
 */
import { join } from 'node:path';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import type { Document } from 'bson';
import { createEmbeddedStore } from '@planning/store';
import { Catalog } from './catalog.js';
import { CommandRunner } from './commands.js';
import { Cursors } from './cursors.js';
import { CommandError } from './errors.js';
import { Sessions } from './sessions.js';
import { decodeMessage, encodeOpMsg, encodeOpReply, MessageReader, type WireRequest } from './wire-protocol.js';

export interface MongoWireServerOptions {
  /** Keep the data in this directory (the embedded store's SQLite file). Default: memory only. */
  dataDir?: string;
  /** Port to listen on. Default: a random free port. */
  port?: number;
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Host clients use to reach the server, announced as the replica set member. Default: `host` (`127.0.0.1` for a wildcard). */
  advertisedHost?: string;
  /** Replica set name announced in `hello` and put in the URI. Default `rs0`. */
  replicaSet?: string;
  /** Where connection problems are reported. Default: one line on stderr. */
  log?: (line: string) => void;
}

export interface MongoWireServer {
  /** `mongodb://<host>:<port>/?replicaSet=<name>`: give it to `MongoClient` or `createMongoStore`. */
  uri: string;
  port: number;
  /** Closes every connection and the store. Safe to call twice. */
  stop(): Promise<void>;
}

const SWEEP_MS = 1_000;

function defaultLog(line: string): void {
  process.stderr.write(`[mongo-wire] ${line}\n`);
}

/** Starts a mongo-wire server (see the module comment: a test fixture, not MongoDB). */
export async function startMongoWireServer(options: MongoWireServerOptions = {}): Promise<MongoWireServer> {
  const host = options.host ?? '127.0.0.1';
  const log = options.log ?? defaultLog;
  const store = createEmbeddedStore(options.dataDir !== undefined ? { path: join(options.dataDir, 'mongo-wire.sqlite') } : {});
  let catalog: Catalog;
  try {
    catalog = await Catalog.open(store);
  } catch (err) {
    await store.close();
    throw err;
  }
  const sessions = new Sessions(store);
  const cursors = new Cursors();
  // `me` is known once the port is: the runner reads it on every hello.
  const identity: { me: string; setName: string } = { me: '', setName: options.replicaSet ?? 'rs0' };
  const runner = new CommandRunner(store, catalog, sessions, cursors, identity);

  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    const id = ++connections;
    const peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    sockets.add(socket);
    socket.setNoDelay(true);
    const reader = new MessageReader();
    let closed = false;
    // Messages of one connection are answered in order; connections interleave freely.
    let chain: Promise<void> = Promise.resolve();

    const close = (why: string): void => {
      if (closed) return;
      closed = true;
      log(`connection ${id} from ${peer}: ${why}; closing it`);
      socket.destroy();
    };

    const send = (frame: () => Buffer): void => {
      if (closed) return;
      try {
        socket.write(frame());
      } catch (err) {
        close(`could not encode a reply (${(err as Error).message})`);
      }
    };

    const reply = (request: WireRequest, doc: Document): void => {
      if (request.kind === 'query') {
        send(() => encodeOpReply(request.requestId, doc));
      } else if (!request.moreToCome) {
        // A reply too large for BSON becomes an error reply rather than a dead connection.
        send(() => {
          try {
            return encodeOpMsg(request.requestId, doc);
          } catch (err) {
            return encodeOpMsg(request.requestId, new CommandError('InternalError', `reply could not be encoded: ${(err as Error).message}`).toReply());
          }
        });
      }
    };

    const handle = async (frame: Buffer): Promise<void> => {
      if (closed) return;
      let request: WireRequest;
      try {
        request = decodeMessage(frame);
      } catch (err) {
        close(`malformed message (${(err as Error).message})`);
        return;
      }
      if (request.kind === 'query') {
        const db = request.collection.endsWith('.$cmd') ? request.collection.slice(0, -'.$cmd'.length) : undefined;
        const doc =
          db === undefined
            ? new CommandError('UnsupportedOpQueryCommand', `OP_QUERY is only accepted for commands, not on '${request.collection}'`).toReply()
            : await runner.run(request.query, { connectionId: id, legacyDb: db });
        reply(request, doc);
      } else {
        reply(request, await runner.run(request.body, { connectionId: id }));
      }
    };

    socket.on('data', (chunk: Buffer) => {
      if (closed) return;
      let frames: Buffer[];
      try {
        frames = reader.push(chunk);
      } catch (err) {
        close(`malformed message (${(err as Error).message})`);
        return;
      }
      for (const frame of frames) {
        chain = chain.then(() => handle(frame)).catch((err: unknown) => close(`internal error (${(err as Error).stack ?? String(err)})`));
      }
    });
    socket.on('error', () => {
      // Resets by the peer end in 'close' below; nothing to answer.
    });
    socket.on('close', () => {
      closed = true;
      sockets.delete(socket);
    });
  });

  const sweep = setInterval(() => {
    sessions.sweep();
    cursors.sweep();
  }, SWEEP_MS);
  sweep.unref();

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    clearInterval(sweep);
    await store.close();
    throw err;
  }
  server.on('error', (err) => log(`server error: ${err.message}`));
  const port = (server.address() as AddressInfo).port;
  const wildcard = host === '0.0.0.0' || host === '::' || host === '';
  const advertised = options.advertisedHost ?? (wildcard ? '127.0.0.1' : host);
  identity.me = `${advertised.includes(':') ? `[${advertised}]` : advertised}:${port}`;

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      clearInterval(sweep);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      await closed;
      sessions.abortAll();
      cursors.clear();
      await store.close();
    })();
    return stopping;
  };

  return { uri: `mongodb://${identity.me}/?replicaSet=${encodeURIComponent(identity.setName)}`, port, stop };
}
