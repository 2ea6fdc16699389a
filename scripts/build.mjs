#!/usr/bin/env node
// Builds the production artifact: one ESM bundle of the entry point (dist/main.mjs) plus a
// dist/package.json naming the few packages that must stay real node_modules: a native addon,
// and packages that read .proto files from their own folder at run time. The Dockerfile
// installs those beside the bundle; in this checkout they resolve from the root node_modules.
import { readFileSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const rootPkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

// Kept out of the bundle and installed at these versions.
// @fastify/swagger-ui serves its static files from its own folder.
export const RUNTIME_PACKAGES = ['@node-rs/argon2', 'grpc-health-check', '@grpc/reflection', '@grpc/grpc-js', '@fastify/swagger-ui'];
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
  return JSON.parse(readFileSync(pkgPath, 'utf8')).version;
};

mkdirSync(join(root, 'dist'), { recursive: true });
const result = await build({
  entryPoints: [join(root, 'src/main.ts')],
  outfile: join(root, 'dist/main.mjs'),
  bundle: true,
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
for (const file of result.outputFiles) {
  const partial = `${file.path}.${process.pid}.partial`;
  writeFileSync(partial, file.contents);
  renameSync(partial, file.path);
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
const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
console.log(`dist/main.mjs built (${(bytes / 1024 / 1024).toFixed(1)} MiB with source map)`);
