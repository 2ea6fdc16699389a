/**
 * Each module's settings, parsed from the environment with the zod schemas the module declares.
 * Part of the `@planning/runtime/config` entry: only the thread that reads the environment loads
 * it (the services' worker thread receives its modules' settings already parsed).
 */
import { loadEnv, type ConfigProblem } from '@planning/config';
import type { ProcessConfig } from './process-config.js';
import type { AnyModuleDefinition } from './registry.js';

/**
 * Parses the settings of every module in `names` from `source`. Returns all problems of all
 * modules together, so an operator fixes the configuration in one pass.
 */
export function loadModuleSettings(
  definitions: readonly AnyModuleDefinition[],
  names: readonly string[],
  config: ProcessConfig,
  source: NodeJS.ProcessEnv,
): { ok: true; settings: Map<string, unknown> } | { ok: false; problems: ConfigProblem[] } {
  const settings = new Map<string, unknown>();
  const problems: ConfigProblem[] = [];
  for (const name of names) {
    const def = definitions.find((d) => d.name === name);
    if (!def?.settings) continue;
    const result = loadEnv(def.settings, source);
    if (!result.ok) {
      problems.push(...result.problems);
      continue;
    }
    const extra = def.validate?.(result.value, config) ?? [];
    problems.push(...extra);
    settings.set(name, result.value);
  }
  // Two modules may share a variable: report each problem once.
  const seen = new Set<string>();
  const unique = problems.filter((p) => {
    const key = `${p.variable}\u0000${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return unique.length > 0 ? { ok: false, problems: unique } : { ok: true, settings };
}
