// Loaded with `node --import` into a copy of the bundle started only to read its memory (the idle
// RSS of the benchmark comes from a process without it). Every thread (the main thread and the
// services' worker, which inherits the flag) watches HEAP_PROBE_TRIGGER: each time the file holds
// a new label, the thread writes its V8 heap spaces to `<HEAP_PROBE_OUT>.<label>.<thread id>.json`.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { setInterval } from 'node:timers';
import { getHeapSpaceStatistics, getHeapStatistics, writeHeapSnapshot } from 'node:v8';
import { isMainThread, threadId } from 'node:worker_threads';

const trigger = process.env.HEAP_PROBE_TRIGGER;
const out = process.env.HEAP_PROBE_OUT;
if (trigger && out) {
  let last = '';
  const timer = setInterval(() => {
    if (!existsSync(trigger)) return;
    const label = readFileSync(trigger, 'utf8').trim();
    if (!label || label === last) return;
    last = label;
    // A label ending in '-gc' collects garbage first (the probe's copy runs with --expose-gc), so
    // the reading shows what is retained rather than what has not been collected yet.
    if (/-gc\b/.test(label) && typeof globalThis.gc === 'function') globalThis.gc();
    if (label.endsWith('-snap') && process.env.HEAP_PROBE_SNAPSHOTS) writeHeapSnapshot(`${process.env.HEAP_PROBE_SNAPSHOTS}/${label}.${threadId}.heapsnapshot`);
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name.replace(/_space$/, ''), { committed: s.space_size, used: s.space_used_size }]));
    const heap = getHeapStatistics();
    writeFileSync(
      `${out}.${label}.${threadId}.json`,
      JSON.stringify({ thread: isMainThread ? 'main' : 'services', rss: process.memoryUsage.rss(), committed: heap.total_heap_size, used: heap.used_heap_size, external: heap.external_memory, mallocedMemory: heap.malloced_memory, spaces }),
    );
  }, 100);
  timer.unref();
}
