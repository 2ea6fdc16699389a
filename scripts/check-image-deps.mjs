#!/usr/bin/env node
// Fails when the packages the bundle keeps external (dist/package.json, written by `pnpm build`)
// are not exactly the ones image/package.json names. The image installs image/package.json from
// pnpm-lock.yaml (`pnpm deploy`), so a package missing there, or pinned at another version than
// the one the bundle was built and tested with, would break or silently change the image.
//
//   node scripts/check-image-deps.mjs [dist/package.json] [image/package.json]
import { readFileSync } from 'node:fs';

const [distPath = 'dist/package.json', imagePath = 'image/package.json'] = process.argv.slice(2);
const read = (path) => JSON.parse(readFileSync(path, 'utf8')).dependencies ?? {};
const needed = read(distPath);
const pinned = read(imagePath);

const problems = [];
for (const [name, version] of Object.entries(needed)) {
  if (!(name in pinned)) problems.push(`missing:  "${name}": "${version}" (the bundle loads it at run time)`);
  else if (pinned[name] !== version) problems.push(`version:  "${name}" is "${pinned[name]}", the bundle was built with "${version}"`);
}
for (const name of Object.keys(pinned)) {
  if (!(name in needed)) problems.push(`unused:   "${name}" (the bundle no longer keeps it external)`);
}

if (problems.length > 0) {
  console.error(`check-image-deps: ${imagePath} does not match ${distPath}. Edit its dependencies, run \`pnpm install\`, commit both:`);
  for (const line of problems) console.error(`  ${line}`);
  process.exit(1);
}
console.log(`check-image-deps: ${Object.keys(needed).length} runtime packages match`);
