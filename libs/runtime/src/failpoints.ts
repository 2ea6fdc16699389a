/**
 * Failpoints: named places in the code where a test can make the process crash, the way a
 * power cut or an OOM kill would, to prove that no step loses or doubles work. Off unless
 * `SERVICE_FAILPOINTS` names them (e.g. `outbox.before-publish=crash`); never set in production.
 *
 * Actions: `crash` kills the process with SIGKILL (no cleanup, no flush), `throw` throws.
 * `name=crash@3` fires on the third hit only.
 */

type Action = { kind: 'crash' | 'throw'; onHit: number };

const active = new Map<string, Action>();
const hits = new Map<string, number>();

/** Parses the failpoint specification; returns problems instead of throwing. */
export function configureFailpoints(spec: string | undefined): string[] {
  active.clear();
  hits.clear();
  if (!spec) return [];
  const problems: string[] = [];
  for (const part of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const match = /^([a-z0-9.-]+)=(crash|throw)(?:@(\d+))?$/.exec(part);
    if (!match) {
      problems.push(`'${part}' is not name=crash|throw[@n]`);
      continue;
    }
    active.set(match[1]!, { kind: match[2] as Action['kind'], onHit: match[3] ? Number(match[3]) : 1 });
  }
  return problems;
}

export class FailpointError extends Error {
  constructor(name: string) {
    super(`failpoint ${name}`);
    this.name = 'FailpointError';
  }
}

/** Marks a place where a crash can be injected. Costs one map lookup when nothing is configured. */
export function failpoint(name: string): void {
  if (active.size === 0) return;
  const action = active.get(name);
  if (!action) return;
  const count = (hits.get(name) ?? 0) + 1;
  hits.set(name, count);
  if (count !== action.onHit) return;
  if (action.kind === 'throw') throw new FailpointError(name);
  process.stderr.write(`failpoint ${name}: crashing the process\n`);
  process.kill(process.pid, 'SIGKILL');
}
