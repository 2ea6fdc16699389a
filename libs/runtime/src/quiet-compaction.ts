/**
 * One memory-reducing collection per thread once the process has gone quiet after start.
 *
 * While the modules load, V8 sees most young objects survive and grows the thread's new space to
 * its limit (two semi-spaces); the pages stay resident until V8's memory reducer gives them back,
 * which in this process took about two idle minutes. V8 shrinks the new space (to 1 MB) after a
 * full collection when the thread's allocation rate over its last five seconds is low; nothing
 * else from JavaScript shrinks it. So once the thread's event loop has been nearly idle for
 * `quietMs` (longer than V8's five seconds), this runs one full collection through V8's own `gc`
 * (from a fresh context: no global `gc` in the thread's own), and again later (up to `attempts`
 * times) if the new space did not shrink because allocation went on where the event loop could
 * not see it. A thread busy from its start never collects: under load the nursery is in use and
 * must stay. Each step is on an unreferenced timer: it never keeps a process alive, and a
 * collection that fails stops the watcher rather than escape its timer.
 */
import { performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface QuietCompactionOptions {
  /** How long the event loop must have stayed quiet. Default 6 s: V8 measures the allocation rate over the last 5 s. */
  quietMs?: number;
  /** How often the event loop's utilization is read. Default 1 s. */
  intervalMs?: number;
  /** Utilization (0..1) under which an interval counts as quiet. Default 0.05. */
  quietUtilization?: number;
  /** Collections at most, while the new space stays large. Default 3. */
  attempts?: number;
  /** Stops looking after this long. Default 10 minutes. */
  giveUpMs?: number;
  /** Seams for tests: the collection, the event loop's utilization since the last reading, the new space's committed bytes. */
  collect?: () => void;
  utilization?: () => number;
  newSpaceBytes?: () => number;
  /** Told about each collection. */
  onCollected?: (report: { newSpaceBefore: number; newSpaceAfter: number; shrank: boolean }) => void;
}

/** The new space once shrunk is 1 MB (V8's initial size); a little above it counts as shrunk. */
const SHRUNK_BYTES = 2 * 1024 * 1024;

/** The committed size of this thread's new space (V8's young generation). */
export function newSpaceCommittedBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}

/**
 * V8's full, synchronous collection for this thread: `--expose-gc` raised, a fresh context picks up
 * its `gc` function; the thread's own global scope gets none. The flag stays raised (process-wide:
 * lowering it could take it away from the other thread between its raising and its context).
 */
export function fullCollection(): () => void {
  let gc = (globalThis as { gc?: (options?: object) => void }).gc;
  if (typeof gc !== 'function') {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as (options?: object) => void;
  }
  const collect = gc;
  return () => collect({ type: 'major', execution: 'sync' });
}

function eventLoopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const delta = performance.eventLoopUtilization(now, last);
    last = now;
    return delta.utilization;
  };
}

/** Starts watching this thread; the returned function stops it (a stop before the collection cancels it). */
export function compactWhenQuiet(options: QuietCompactionOptions = {}): () => void {
  const quietMs = options.quietMs ?? 6_000;
  const intervalMs = options.intervalMs ?? 1_000;
  const threshold = options.quietUtilization ?? 0.05;
  let attemptsLeft = options.attempts ?? 3;
  const deadline = Date.now() + (options.giveUpMs ?? 10 * 60_000);
  const utilization = options.utilization ?? eventLoopUtilization();
  const newSpace = options.newSpaceBytes ?? newSpaceCommittedBytes;
  let collect = options.collect;
  let quietFor = 0;
  const timer = setInterval(() => {
    if (Date.now() > deadline) return stop();
    quietFor = utilization() < threshold ? quietFor + intervalMs : 0;
    if (quietFor < quietMs) return;
    quietFor = 0;
    const before = newSpace();
    if (before <= SHRUNK_BYTES) return stop();
    try {
      collect ??= fullCollection();
      collect();
    } catch {
      // Housekeeping only: a runtime without V8's gc function never compacts this way.
      return stop();
    }
    const after = newSpace();
    const shrank = after <= SHRUNK_BYTES;
    options.onCollected?.({ newSpaceBefore: before, newSpaceAfter: after, shrank });
    if (shrank || --attemptsLeft <= 0) stop();
  }, intervalMs);
  timer.unref();
  function stop(): void {
    clearInterval(timer);
  }
  return stop;
}
