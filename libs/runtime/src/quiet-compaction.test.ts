import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { compactWhenQuiet } from './quiet-compaction.js';

const MB = 1024 * 1024;

/** A watcher over scripted readings: utilization per interval, the new space before and after each collection. */
function scripted(utilizations: number[], newSpace: number[], options: { attempts?: number; giveUpMs?: number } = {}) {
  const collections: number[] = [];
  let tick = 0;
  let reading = 0;
  const stop = compactWhenQuiet({
    intervalMs: 1_000,
    quietMs: 6_000,
    ...options,
    utilization: () => utilizations[Math.min(tick++, utilizations.length - 1)] as number,
    newSpaceBytes: () => newSpace[Math.min(reading++, newSpace.length - 1)] as number,
    collect: () => collections.push(tick),
  });
  return { collections, stop, ticks: () => tick };
}

describe('compaction once start-up has gone quiet', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('collects after six quiet seconds, not before, and stops once the new space has shrunk', () => {
    const w = scripted([0.01], [16 * MB, 1 * MB]);
    vi.advanceTimersByTime(5_000);
    expect(w.collections).toEqual([]);
    vi.advanceTimersByTime(1_000);
    expect(w.collections).toEqual([6]);
    vi.advanceTimersByTime(60_000);
    expect(w.collections).toEqual([6]);
    // Stopped: the utilization is no longer read.
    expect(w.ticks()).toBe(6);
  });

  it('a busy second starts the count again: a thread under load keeps its nursery', () => {
    const busy = [0.01, 0.01, 0.01, 0.01, 0.01, 0.6, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01];
    const w = scripted(busy, [16 * MB, 1 * MB]);
    vi.advanceTimersByTime(11_000);
    expect(w.collections).toEqual([]);
    vi.advanceTimersByTime(1_000);
    expect(w.collections).toEqual([12]);
    w.stop();
  });

  it('never collects while the load lasts', () => {
    const w = scripted([0.9], [16 * MB]);
    vi.advanceTimersByTime(120_000);
    expect(w.collections).toEqual([]);
    w.stop();
  });

  it('does nothing when the new space is already small', () => {
    const w = scripted([0], [1 * MB]);
    vi.advanceTimersByTime(60_000);
    expect(w.collections).toEqual([]);
    expect(w.ticks()).toBe(6);
  });

  it('tries again after another quiet stretch when the new space did not shrink, at most `attempts` times', () => {
    const w = scripted([0], [16 * MB], { attempts: 3 });
    vi.advanceTimersByTime(60_000);
    expect(w.collections).toEqual([6, 12, 18]);
  });

  it('a collection that throws stops the watcher; nothing escapes its timer', () => {
    let calls = 0;
    const stop = compactWhenQuiet({
      utilization: () => 0,
      newSpaceBytes: () => 16 * MB,
      collect: () => {
        calls++;
        throw new Error('no gc here');
      },
    });
    expect(() => vi.advanceTimersByTime(60_000)).not.toThrow();
    expect(calls).toBe(1);
    stop();
  });

  it('gives up after `giveUpMs` without collecting', () => {
    const busyThenQuiet = [...Array<number>(30).fill(0.9), 0];
    const w = scripted(busyThenQuiet, [16 * MB, 1 * MB], { giveUpMs: 20_000 });
    vi.advanceTimersByTime(120_000);
    expect(w.collections).toEqual([]);
    expect(w.ticks()).toBeLessThanOrEqual(20);
  });
});

describe('compaction in a real thread', () => {
  it("gives the start-up's new space back: V8 shrinks it to 1 MB once allocation has been low", async () => {
    // A process whose start-up grows the nursery (young objects that survive, as modules loading
    // make), then idles: the real collection shrinks it, and the watcher reports and stops.
    const module = fileURLToPath(new URL('./quiet-compaction.ts', import.meta.url));
    const script = `
      import { compactWhenQuiet, newSpaceCommittedBytes } from ${JSON.stringify(module)};
      const kept = [];
      for (let i = 0; i < 2e6; i++) kept.push({ i, s: 'x' + i });
      const grown = newSpaceCommittedBytes();
      kept.length = 0;
      // The watcher's timer never keeps a process alive (tested here too): this one does, meanwhile.
      const alive = setInterval(() => {}, 1000);
      await new Promise((resolve) => compactWhenQuiet({ quietMs: 6000, intervalMs: 500, onCollected: (r) => { console.log(JSON.stringify({ grown, ...r })); if (r.shrank) resolve(); } }));
      clearInterval(alive);
    `;
    const child = spawn(process.execPath, ['--max-semi-space-size=8', '--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(err).toBe('');
    expect(code).toBe(0);
    const reports = out.trim().split('\n').map((line) => JSON.parse(line) as { grown: number; newSpaceBefore: number; newSpaceAfter: number; shrank: boolean });
    const last = reports.at(-1)!;
    expect(last.grown).toBeGreaterThanOrEqual(8 * MB);
    expect(last.shrank).toBe(true);
    expect(last.newSpaceAfter).toBeLessThanOrEqual(2 * MB);
  }, 60_000);
});
