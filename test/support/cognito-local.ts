import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getFreePort, waitFor } from '@planning/testing';

export interface CognitoLocalHandle {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  output: string[];
  stop(): Promise<void>;
}

/**
 * Starts the `cognito-local` emulator (an npm devDependency) on a random port, with its data in a
 * temp dir (it keeps it under `.cognito` in its working directory).
 */
export async function startCognitoLocal(): Promise<CognitoLocalHandle> {
  const require = createRequire(import.meta.url);
  const entry = join(require.resolve('cognito-local/package.json'), '..', 'lib', 'bin', 'start.js');
  const cwd = await mkdtemp(join(tmpdir(), 'cognito-local-'));
  const port = await getFreePort();
  const output: string[] = [];
  const child: ChildProcess = spawn(process.execPath, [entry], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: cwd, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const kill = (): void => void child.kill('SIGKILL');
  process.once('exit', kill);
  child.stdout?.on('data', (c: Buffer) => output.push(c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => output.push(c.toString('utf8')));
  const endpoint = `http://127.0.0.1:${port}`;
  await waitFor(async () => output.join('').includes('Cognito Local running'), 20_000, 'cognito-local to start');
  return {
    endpoint,
    output,
    async stop() {
      process.off('exit', kill);
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(cwd, { recursive: true, force: true });
    },
  };
}
