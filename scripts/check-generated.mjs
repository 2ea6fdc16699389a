#!/usr/bin/env node
// Fails when the committed generated code in libs/proto/src/gen is not what `pnpm generate` would
// produce from proto/ now: regenerates into a temporary directory with the same buf.gen.yaml and
// compares file by file. CI runs it, so a proto change without regenerated code cannot land.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { generatedDir, listFiles, normaliseTree, repoRoot } from './format-generated.mjs';

const binDir = join(repoRoot, 'node_modules/.bin');
const tempRoot = mkdtempSync(join(tmpdir(), 'planning-proto-gen-'));

function main() {
  // `--output` re-roots every plugin's `out`, so the fresh code lands in <temp>/libs/proto/src/gen.
  const result = spawnSync(join(binDir, 'buf'), ['generate', '--output', tempRoot], {
    cwd: repoRoot,
    // buf finds the `local:` protoc-gen-es plugin on PATH.
    env: { ...process.env, PATH: `${binDir}${delimiter}${process.env.PATH ?? ''}` },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    console.error(`check-generated: buf generate failed (exit ${result.status})`);
    return 2;
  }

  const freshDir = join(tempRoot, 'libs/proto/src/gen');
  const fresh = existsSync(freshDir) ? (normaliseTree(freshDir), listFiles(freshDir)) : [];
  const committed = existsSync(generatedDir) ? listFiles(generatedDir) : [];

  const problems = [];
  for (const rel of fresh) {
    if (!committed.includes(rel)) problems.push(`missing:  ${rel}`);
    else if (readFileSync(join(freshDir, rel), 'utf8') !== readFileSync(join(generatedDir, rel), 'utf8')) {
      problems.push(`outdated: ${rel}`);
    }
  }
  for (const rel of committed) {
    if (!fresh.includes(rel)) problems.push(`stale:    ${rel}`);
  }

  if (problems.length > 0) {
    console.error('check-generated: libs/proto/src/gen differs from proto/. Run `pnpm generate` and commit:');
    for (const line of problems) console.error(`  ${line}`);
    return 1;
  }
  console.log(`check-generated: ${fresh.length} generated files up to date`);
  return 0;
}

let code;
try {
  code = main();
} finally {
  rmSync(tempRoot, { recursive: true, force: true });
}
process.exit(code);
