#!/usr/bin/env node
// Builds the production artifact: an ESM bundle of the entry point (dist/main.mjs, with the code
// it loads on demand split into dist/chunks/) plus a dist/package.json naming the few packages
// that must stay real node_modules: a native addon, and packages that read .proto files from
// their own folder at run time. The Dockerfile installs those beside the bundle; in this
// checkout they resolve from the root node_modules.
//
// Splitting keeps what a process does not use out of its heap: the NATS, Redis, MongoDB and AWS
// clients are imported only when configured, and their chunks are then the only code read.
//
// `--if-stale` builds only when a source file is newer than dist/main.mjs (what `pnpm start` runs).
import { existsSync, readdirSync, readFileSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const rootPkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

// Kept out of the bundle and installed at these versions.
// @fastify/swagger-ui serves its static files from its own folder; better-sqlite3 is a native
// addon (the image's build stage compiles it).
export const RUNTIME_PACKAGES = ['better-sqlite3', 'better-sqlite3-node22', '@node-rs/argon2', 'grpc-health-check', '@grpc/reflection', '@grpc/grpc-js', '@fastify/swagger-ui'];
// Optional peers the MongoDB driver requires lazily inside try/catch; absent unless a user adds them.
const OPTIONAL_MISSING = [
  'kerberos',
  '@mongodb-js/zstd',
  '@aws-sdk/credential-providers',
  'gcp-metadata',
  'snappy',
  'socks',
  'aws4',
  'mongodb-client-encryption',
];

const require = createRequire(join(root, 'package.json'));
const versionOf = (name) => {
  const pkgPath = require.resolve(`${name}/package.json`, { paths: [root] });
  const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
  // An npm alias (`better-sqlite3-node22` is better-sqlite3 13) is written as one.
  return pkg.name === name ? pkg.version : `npm:${pkg.name}@${pkg.version}`;
};

/** The newest modification time under `dir` (skipping node_modules), in ms. */
function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

if (process.argv.includes('--if-stale') && existsSync(join(root, 'dist/main.mjs'))) {
  const built = statSync(join(root, 'dist/main.mjs')).mtimeMs;
  const sources = ['src', 'libs', 'services'].map((d) => newest(join(root, d)));
  const manifests = ['package.json', 'pnpm-lock.yaml'].map((f) => statSync(join(root, f)).mtimeMs);
  if (Math.max(...sources, ...manifests) <= built) process.exit(0);
}

const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });
const result = await build({
  entryPoints: { main: join(root, 'src/main.ts'), 'services-worker': join(root, 'src/services-worker.ts') },
  outdir: dist,
  outExtension: { '.js': '.mjs' },
  entryNames: '[name]',
  chunkNames: 'chunks/[name]-[hash]',
  splitting: true,
  bundle: true,
  // Without comments and indentation the code V8 keeps in memory as source is a third smaller,
  // and pure ASCII (a comment with one non-Latin-1 character made a whole chunk a two-byte
  // string). Names are kept: stack traces stay readable, and the source map maps them back.
  minifyWhitespace: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: true,
  legalComments: 'linked',
  external: [...RUNTIME_PACKAGES, ...OPTIONAL_MISSING],
  // Some bundled CommonJS code calls require() for Node built-ins; give ESM output one.
  banner: {
    js: "import { createRequire as __planningCreateRequire } from 'node:module'; const require = __planningCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
  metafile: true,
  // Written below, each file whole: a process starting from dist/ while another build runs (two
  // test runs in one checkout) must never load a half-written bundle.
  write: false,
});
// Chunks before the entry point: a process that loads the new main.mjs finds every chunk it names.
const mainPath = join(dist, 'main.mjs');
const ordered = [...result.outputFiles].sort((a, b) => Number(a.path.startsWith(mainPath)) - Number(b.path.startsWith(mainPath)));
// (services-worker.mjs is loaded by main's code, after main.mjs: written before it as well.)
mkdirSync(join(dist, 'chunks'), { recursive: true });
for (const file of ordered) {
  const partial = `${file.path}.${process.pid}.partial`;
  writeFileSync(partial, file.contents);
  renameSync(partial, file.path);
}
// Chunks of earlier builds, once no process started from them is likely to still be loading them.
const current = new Set(result.outputFiles.map((f) => f.path));
for (const name of readdirSync(join(dist, 'chunks'))) {
  const path = join(dist, 'chunks', name);
  if (!current.has(path) && Date.now() - statSync(path).mtimeMs > 10 * 60_000) rmSync(path, { force: true });
}

const dependencies = Object.fromEntries(RUNTIME_PACKAGES.map((name) => [name, versionOf(name)]));
writeFileSync(
  join(root, 'dist/package.json'),
  `${JSON.stringify(
    {
      name: 'planning-service-dist',
      version: rootPkg.version,
      private: true,
      type: 'module',
      main: 'main.mjs',
      engines: rootPkg.engines,
      dependencies,
    },
    null,
    2,
  )}\n`,
);
const outputs = Object.entries(result.metafile.outputs).filter(([path]) => path.endsWith('.mjs'));
const mainBytes = outputs.find(([path]) => path.endsWith('dist/main.mjs'))?.[1].bytes ?? 0;
const allBytes = outputs.reduce((sum, [, o]) => sum + o.bytes, 0);
console.log(
  `dist/main.mjs built (${(mainBytes / 1024 / 1024).toFixed(1)} MiB; ${outputs.length - 1} chunks loaded on demand, ${(allBytes / 1024 / 1024).toFixed(1)} MiB of code in all)`,
);
