import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error plain ESM script without type declarations
import { DEPLOY_ARGS } from '../../scripts/check-image-runtime.mjs';
// @ts-expect-error plain ESM script without type declarations
import { BUNDLE_ENV, BUNDLE_NODE_FLAGS } from '../../scripts/node-flags.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const checkScript = join(root, 'scripts/check-image-deps.mjs');
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');

describe('container image', () => {
  const temp = mkdtempSync(join(tmpdir(), 'image-deps-'));
  afterAll(() => rmSync(temp, { recursive: true, force: true }));

  it('image: the packages the bundle keeps external are the ones the image deploys from the lockfile', () => {
    // dist/ is built by the test run's global setup.
    const out = execFileSync(process.execPath, [checkScript, join(root, 'dist/package.json'), join(root, 'image/package.json')], {
      encoding: 'utf8',
    });
    expect(out).toMatch(/runtime packages match/);
  });

  it('image: a package missing from image/package.json, or at another version, stops the build', () => {
    const dist = join(temp, 'dist.json');
    const image = join(temp, 'image.json');
    writeFileSync(dist, JSON.stringify({ dependencies: { 'native-addon': '1.2.3', shared: '2.0.0' } }));
    writeFileSync(image, JSON.stringify({ dependencies: { shared: '2.0.1', leftover: '1.0.0' } }));
    const result = spawnSync(process.execPath, [checkScript, dist, image], { encoding: 'utf8' });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('missing:  "native-addon": "1.2.3"');
    expect(result.stderr).toContain('"shared" is "2.0.1", the bundle was built with "2.0.0"');
    expect(result.stderr).toContain('unused:   "leftover"');
  });

  it('image: every stage starts from Node 24 pinned by digest, and the runtime runs as a numeric non-root user', () => {
    const base = /^ARG NODE_IMAGE=(\S+)$/m.exec(dockerfile)?.[1];
    expect(base).toMatch(/^node:24[\w.-]*@sha256:[0-9a-f]{64}$/);
    const froms = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
    expect(froms.length).toBeGreaterThan(1);
    for (const from of froms) expect(from).toBe('${NODE_IMAGE}');
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(runtime).toMatch(/^USER 1000:1000$/m);
    // Installed from the lockfile, never resolved afresh at build time.
    expect(dockerfile).not.toMatch(/(?<![p\w])npm (install|i|ci) (?!-g)/);
    expect(dockerfile).toMatch(/deploy --prod --frozen-lockfile/);
  });

  it('image: the runtime check (scripts/check-image-runtime.mjs, CI) deploys as the build stage does', () => {
    const run = /^RUN node scripts\/check-image-deps\.mjs[^\n]*\n((?: [^\n]*\\\n)*[^\n]*)/m.exec(dockerfile)?.[0] ?? '';
    const command = run.replace(/\\\n\s*/g, ' ').replace(/\s+/g, ' ');
    expect(command).toContain(`pnpm ${(DEPLOY_ARGS as string[]).join(' ')} /deploy`);
  });

  it('image: the entry point runs the bundle with the start flags and without source maps (NODE_OPTIONS turns them on), and the maps ship', () => {
    const entrypoint = /^ENTRYPOINT (.+)$/m.exec(dockerfile)?.[1];
    expect(BUNDLE_NODE_FLAGS).toContain('--max-semi-space-size=4');
    expect(JSON.parse(entrypoint ?? 'null')).toEqual(['node', ...(BUNDLE_NODE_FLAGS as string[]), '/app/main.mjs']);
    expect(dockerfile).not.toMatch(/--enable-source-maps"/);
    // dist/ (maps included) is what the runtime stage copies.
    expect(dockerfile).toMatch(/^COPY --from=build \/src\/dist\/ \.\/$/m);
  });

  it('image: the dev image of the Tiltfile runs the bundle with the same V8 flags as the image', () => {
    const tiltfile = readFileSync(join(root, 'Tiltfile'), 'utf8');
    const entrypoint = /'ENTRYPOINT (\[[^\n]*\])',/.exec(tiltfile)?.[1];
    const args = JSON.parse(entrypoint ?? 'null') as string[];
    expect(args.slice(0, 1 + (BUNDLE_NODE_FLAGS as string[]).length)).toEqual(['node', ...(BUNDLE_NODE_FLAGS as string[])]);
    expect(args.at(-1)).toBe('/app/main.mjs');
    const env = /'ENV ([^'\n]*)',/.exec(tiltfile)?.[1] ?? '';
    for (const [name, value] of Object.entries(BUNDLE_ENV)) expect(env.split(' ')).toContain(`${name}=${value}`);
  });

  it('image: the runtime stage gives node the start environment (scripts/node-flags.mjs)', () => {
    expect(BUNDLE_ENV).toEqual({ MALLOC_ARENA_MAX: '2' });
    const runtime = dockerfile.slice(dockerfile.indexOf(' AS runtime'));
    const env = /^ENV ((?:[^\n]*\\\n)*[^\n]*)$/m.exec(runtime)?.[1]?.replace(/\\\n\s*/g, ' ') ?? '';
    for (const [name, value] of Object.entries(BUNDLE_ENV)) expect(env.split(/\s+/)).toContain(`${name}=${value}`);
  });

  it('image: `pnpm start` passes the same V8 flags and environment to node as the image', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } };
    const env = Object.entries(BUNDLE_ENV).map(([name, value]) => `${name}=${value}`);
    expect(pkg.scripts.start).toMatch(new RegExp(`exec env ${env.join(' ')} node ${(BUNDLE_NODE_FLAGS as string[]).join(' ')} dist/main\\.mjs$`));
  });
});
