import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * End-to-end suites run the production artifact: build dist/main.mjs once per test run.
 * `PLANNING_SKIP_BUILD=1` reuses an existing build (for quick local reruns).
 */
export default function setup(): void {
  if (process.env.PLANNING_SKIP_BUILD === '1') return;
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'inherit' });
}
