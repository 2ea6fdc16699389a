/**
 * The one entry point: `--target=all` (default) runs every module in this process;
 * `--target=<service>` runs one service. OpenTelemetry starts before any application code.
 */
import { parseArgs } from 'node:util';

function parseCommandLine() {
  try {
    return parseArgs({
      args: process.argv.slice(2),
      options: {
        target: { type: 'string' },
        'print-config': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\nRun with --help for usage.\n`);
    process.exit(2);
  }
}

const { values } = parseCommandLine();

if (values.help) {
  process.stdout.write(
    [
      'Usage: planning-service [--target=all|gateway|issues|agents-claims|imports-exports|audit] [--print-config]',
      '',
      '  --target        which modules this process runs (default: all, or SERVICE_TARGET)',
      '  --print-config  print the resolved configuration (secrets hidden) and exit',
      '',
      'Configuration comes from environment variables only; see the README.',
      '',
    ].join('\n'),
  );
  process.exit(0);
}

// Name the process's traces after its target before telemetry starts.
const target = values.target ?? process.env.SERVICE_TARGET ?? 'all';
process.env.OTEL_SERVICE_NAME ??= target === 'all' ? 'planning-service' : `planning-${target}`;

const { telemetry } = await import('@planning/telemetry/register');
const { run } = await import('./run.js');
// The services' worker thread is a sibling entry point: dist/services-worker.mjs beside the bundle,
// or src/services-worker.ts (with the TypeScript loader) when this file runs from source.
const fromSource = import.meta.url.endsWith('.ts');
const worker = fromSource
  ? { entry: new URL('./services-worker.ts', import.meta.url), execArgv: ['--import', 'tsx'] }
  : { entry: new URL('./services-worker.mjs', import.meta.url) };
await run({ target: values.target, printConfig: values['print-config'] ?? false, telemetry, worker });
