/**
 * `pnpm bench [name ...]`: runs every `bench/*.bench.ts` (or the named ones) one after another and
 * writes each one's section into docs/benchmarks.md. Sections of benchmarks that did not run are
 * kept, so one benchmark can be re-run alone. Benchmarks are not tests: they measure, they do not
 * pass or fail.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Bench } from './support.js';

const here = dirname(fileURLToPath(import.meta.url));
const docPath = join(here, '..', 'docs', 'benchmarks.md');

const HEADER = `# Benchmarks

Produced by \`pnpm bench\` (\`bench/run.ts\` runs every \`bench/*.bench.ts\`; \`pnpm bench <name>\` runs one and
keeps the other sections). Numbers depend on the machine each section names; compare rows within a section
(they are measured in the same run), not across machines.
`;

const start = (name: string) => `<!-- bench:${name}:start -->`;
const end = (name: string) => `<!-- bench:${name}:end -->`;

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const files = (await readdir(here)).filter((f) => f.endsWith('.bench.ts')).sort();
  const benches: Bench[] = [];
  for (const file of files) {
    const mod = (await import(pathToFileURL(join(here, file)).href)) as { default: Bench };
    if (wanted.length === 0 || wanted.includes(mod.default.name)) benches.push(mod.default);
  }
  const unknown = wanted.filter((w) => !benches.some((b) => b.name === w));
  if (unknown.length > 0) throw new Error(`no benchmark named ${unknown.join(', ')} (have: ${files.join(', ')})`);

  for (const bench of benches) {
    const log = (line: string) => process.stdout.write(`[${bench.name}] ${line}\n`);
    log('running');
    const progress = async (partial: string) => {
      await writeSection(bench.name, partial);
      log(`partial results written to ${docPath}`);
    };
    const body = await bench.run(log, progress);
    if (body === null) {
      log('partial run: docs/benchmarks.md left as it was');
      continue;
    }
    await writeSection(bench.name, body);
    log(`written to ${docPath}`);
  }
}

/** Replaces (or appends) one benchmark's section; the file is read afresh each time. */
async function writeSection(name: string, body: string): Promise<void> {
  const doc = await readFile(docPath, 'utf8').catch(() => HEADER);
  const section = `${start(name)}\n${body.trim()}\n${end(name)}`;
  const from = doc.indexOf(start(name));
  const to = doc.indexOf(end(name));
  const next = from >= 0 && to > from ? `${doc.slice(0, from)}${section}${doc.slice(to + end(name).length)}` : `${doc.trimEnd()}\n\n${section}\n`;
  await writeFile(docPath, next);
}

await main();
