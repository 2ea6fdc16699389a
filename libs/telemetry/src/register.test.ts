import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const registerPath = join(packageDir, 'src/register.ts');

interface Collector {
  server: Server;
  endpoint: string;
  bodies: string[];
}

async function startCollector(): Promise<Collector> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

/** Runs a module-script child that imports the register module first, as an entry point does. */
function runChild(
  body: string,
  env: NodeJS.ProcessEnv,
  onStdout?: (text: string, child: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const script = `import { telemetry } from ${JSON.stringify(registerPath)};\nimport { trace } from '@opentelemetry/api';\n${body}`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: packageDir,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    onStdout?.(stdout, child);
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr })));
}

describe('@planning/telemetry/register', () => {
  let collector: Collector | undefined;
  afterEach(async () => {
    if (collector) await new Promise((resolve) => collector?.server.close(resolve));
    collector = undefined;
  });

  it('register: names the service from OTEL_SERVICE_NAME and flushes spans when the process drains', async () => {
    collector = await startCollector();
    const result = await runChild(
      `console.log(JSON.stringify({ enabled: telemetry.enabled }));\ntrace.getTracer('t').startSpan('drain-span').end();`,
      { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_SERVICE_NAME: 'register-child' },
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout.trim())).toEqual({ enabled: true });
    const exported = collector.bodies.join('\n');
    expect(exported).toContain('drain-span');
    expect(exported).toContain('register-child');
  });

  it('register: on SIGTERM with no other handler it flushes and then exits by the signal', async () => {
    collector = await startCollector();
    const result = await runChild(
      `trace.getTracer('t').startSpan('signal-span').end();\nsetInterval(() => {}, 1000);\nconsole.log('ready');`,
      { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint },
      (text, child) => {
        if (text.includes('ready')) child.kill('SIGTERM');
      },
    );
    expect(result.signal).toBe('SIGTERM');
    const exported = collector.bodies.join('\n');
    expect(exported).toContain('signal-span');
    expect(exported).toContain('planning-service');
  });

  it('register: leaves SIGTERM to the application when it has its own handler', async () => {
    const result = await runChild(
      `const keepAlive = setInterval(() => {}, 1000);\nprocess.once('SIGTERM', async () => { clearInterval(keepAlive); await telemetry.shutdown(); console.log('app drained'); });\nconsole.log('ready');`,
      {},
      (text, child) => {
        if (text === 'ready\n') child.kill('SIGTERM');
      },
    );
    expect(result.signal).toBeNull();
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('app drained');
  });
});
