/**
 * What every benchmark shares: the module shape `bench/run.ts` loads, latency measurement and
 * percentile summaries, and a description of the machine the numbers come from.
 */
import { cpus, loadavg, totalmem } from 'node:os';

/** A benchmark module (`bench/<name>.bench.ts`) default-exports one of these. */
export interface Bench {
  /** Short name: `pnpm bench <name>` runs only this one; its section in docs/benchmarks.md is keyed by it. */
  name: string;
  /**
   * Runs the benchmark and returns its Markdown section (without the section heading markers), or
   * null when the run was a partial one (a quick comparison) that must not replace the section.
   * A long benchmark may call `progress` with the section as far as it got: it is written into
   * docs/benchmarks.md at once, so a failure late in the run keeps what was measured.
   */
  run(log: (line: string) => void, progress: (partial: string) => Promise<void>): Promise<string | null>;
}

export interface Latency {
  samples: number;
  p50: number;
  p99: number;
  mean: number;
}

/**
 * Calls `fn` `warmup` times, then measures it until `iterations` samples or `budgetMs` have
 * passed (at least `minSamples`). Milliseconds, from `performance.now()`.
 */
export async function measure(
  fn: () => Promise<unknown>,
  options: { iterations?: number; warmup?: number; budgetMs?: number; minSamples?: number } = {},
): Promise<Latency> {
  const iterations = options.iterations ?? 200;
  const budgetMs = options.budgetMs ?? 5_000;
  const minSamples = options.minSamples ?? 10;
  for (let i = 0; i < (options.warmup ?? 5); i++) await fn();
  const samples: number[] = [];
  const started = performance.now();
  while (samples.length < iterations && (samples.length < minSamples || performance.now() - started < budgetMs)) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  return summarize(samples);
}

export function summarize(samples: number[]): Latency {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
  return { samples: sorted.length, p50: at(0.5), p99: at(0.99), mean: sorted.reduce((s, x) => s + x, 0) / Math.max(1, sorted.length) };
}

export function ms(value: number): string {
  if (value >= 100) return `${value.toFixed(0)} ms`;
  if (value >= 10) return `${value.toFixed(1)} ms`;
  return `${value.toFixed(2)} ms`;
}

/** Node, CPUs, memory, date, and the load average when called (other work on the machine skews latencies). */
export function machine(): string {
  const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
  const load = loadavg()[0]?.toFixed(2) ?? '?';
  return `Node ${process.version}, ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, load average ${load}, ${new Date().toISOString().slice(0, 10)}`;
}
