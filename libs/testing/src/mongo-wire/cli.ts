/**
 * Runs a mongo-wire server as its own process, so several service processes can share one
 * embedded store the way replicas share a MongoDB (a test fixture, not MongoDB):
 *
 *   node --import tsx libs/testing/src/mongo-wire/cli.ts [--port 0] [--host 127.0.0.1]
 *     [--advertised-host HOST] [--data-dir DIR] [--replica-set rs0] [-- COMMAND ARGS...]
 *
 * The first line on stdout is the connection URI; connection problems go to stderr. SIGINT and
 * SIGTERM stop it cleanly (with --data-dir, the data is on disk by then). With a command after
 * `--`, it runs that command with MONGODB_URI set to the server, then stops and exits with the
 * command's status (e.g. `-- pnpm vitest run libs/store/src/mongo/mongo-store.test.ts`).
 */
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { startMongoWireServer, type MongoWireServerOptions } from './server.js';

function usage(message: string): never {
  process.stderr.write(
    `${message}\nusage: cli.ts [--port N] [--host ADDR] [--advertised-host HOST] [--data-dir DIR] [--replica-set NAME] [-- COMMAND ARGS...]\n`,
  );
  process.exit(2);
}

async function main(): Promise<void> {
  let values: Record<string, string | undefined>;
  let command: string[];
  try {
    ({ values, positionals: command } = parseArgs({
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        'advertised-host': { type: 'string' },
        'data-dir': { type: 'string' },
        'replica-set': { type: 'string' },
      },
      strict: true,
      allowPositionals: true,
    }));
  } catch (err) {
    usage((err as Error).message);
  }
  const options: MongoWireServerOptions = {};
  if (values.port !== undefined) {
    const port = Number(values.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`--port must be 0..65535, got '${values.port}'`);
    options.port = port;
  }
  if (values.host !== undefined) options.host = values.host;
  if (values['advertised-host'] !== undefined) options.advertisedHost = values['advertised-host'];
  if (values['data-dir'] !== undefined) options.dataDir = values['data-dir'];
  if (values['replica-set'] !== undefined) options.replicaSet = values['replica-set'];

  const [program, ...args] = command;
  if (program !== undefined && !process.argv.includes('--')) usage(`unexpected argument '${program}' (put a command after --)`);

  const server = await startMongoWireServer(options);
  process.stdout.write(`${server.uri}\n`);
  if (program !== undefined) {
    const child = spawn(program, args, { stdio: 'inherit', env: { ...process.env, MONGODB_URI: server.uri } });
    const status = await new Promise<number>((resolve) => {
      child.once('error', (err) => {
        process.stderr.write(`[mongo-wire] could not run ${program}: ${err.message}\n`);
        resolve(127);
      });
      child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
    });
    await server.stop();
    process.exit(status);
  }
  process.stderr.write(`[mongo-wire] listening on port ${server.port}: the embedded store behind the MongoDB wire protocol (a test fixture, not MongoDB)\n`);

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    server.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`[mongo-wire] stop after ${signal} failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((err: unknown) => {
  process.stderr.write(`[mongo-wire] failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
