#!/usr/bin/env node
// Normalises generated protobuf code so that a regeneration on any machine produces the same bytes
// (LF line endings, exactly one trailing newline). check-generated.mjs applies the same step to its
// temporary output before comparing, so the two must stay in step: both import normaliseTree.
//
// Usage: node scripts/format-generated.mjs [dir]   (default: libs/proto/src/gen)
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const generatedDir = join(repoRoot, 'libs/proto/src/gen');

/** Every file under dir, as paths relative to dir with forward slashes, sorted. */
export function listFiles(dir, prefix = '') {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...listFiles(join(dir, entry.name), rel));
    else if (entry.isFile()) out.push(rel);
  }
  return out.sort();
}

export function normalise(text) {
  return `${text.replace(/\r\n?/g, '\n').replace(/\s+$/, '')}\n`;
}

export function normaliseTree(dir) {
  for (const rel of listFiles(dir)) {
    const path = join(dir, rel);
    const before = readFileSync(path, 'utf8');
    const after = normalise(before);
    if (after !== before) writeFileSync(path, after);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  normaliseTree(resolve(process.argv[2] ?? generatedDir));
}
