/**
 * Group commit. SQLite runs with `synchronous=NORMAL` in WAL mode: a commit writes its pages to
 * the write-ahead log without waiting for the disk (the database stays consistent whatever
 * happens; only the newest commits could be lost to a power cut). Before an operation is
 * acknowledged, this flushes the log to the disk with `fdatasync` on the libuv thread pool,
 * off the event loop; commits made while a flush runs share the next one. That is what
 * `synchronous=FULL` promises (every acknowledged commit survives a power cut), at one flush per
 * group instead of one per commit, and without blocking the event loop.
 *
 * Reads wait for the flush of every commit before them that changed the collection they read,
 * so no caller ever sees data that could still be lost; a read does not wait for commits to other
 * collections (an audit record or an outbox event being flushed does not hold up a read of tasks).
 */
import fs from 'node:fs';
import path from 'node:path';

export class Durability {
  private committed = 0;
  private synced = 0;
  private flushing = false;
  private waiters: { seq: number; resolve: () => void; reject: (err: Error) => void }[] = [];
  private fd: number | undefined;
  private failure: Error | undefined;

  /**
   * `walFile`: the database's write-ahead log; undefined for an in-memory database (nothing to
   * flush). `onFlush`: told each completed flush, its duration in seconds and how many commits it
   * made durable (for the process's metrics).
   */
  constructor(
    private readonly walFile: string | undefined,
    private readonly onFlush?: (seconds: number, commits: number) => void,
  ) {}

  /** The last commit that changed each collection (by the store's collection number). */
  private readonly lastChange = new Map<number, number>();

  /** Records a commit that changed `collections`; returns its sequence number. */
  commit(collections: Iterable<number> = []): number {
    const seq = ++this.committed;
    if (this.walFile !== undefined) for (const no of collections) this.lastChange.set(no, seq);
    return seq;
  }

  /** Resolves once every commit that changed collection `no` is on disk. */
  waitFor(no: number): Promise<void> {
    return this.wait(this.lastChange.get(no) ?? 0);
  }

  get failed(): Error | undefined {
    return this.failure;
  }

  /** Resolves once every commit up to `seq` (default: all so far) is on disk. */
  wait(seq = this.committed): Promise<void> {
    if (this.walFile === undefined || seq <= this.synced) return Promise.resolve();
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiters.push({ seq, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.flushing) return;
    this.flushing = true;
    // Let the rest of this turn of the event loop commit too: they share the flush.
    setImmediate(() => this.flush());
  }

  private flush(): void {
    const target = this.committed;
    let fd: number;
    try {
      fd = this.openLog();
    } catch (err) {
      this.fail(err as Error);
      return;
    }
    const started = performance.now();
    fs.fdatasync(fd, (err) => {
      this.flushing = false;
      if (err) {
        this.fail(err);
        return;
      }
      const commits = target - this.synced;
      this.synced = Math.max(this.synced, target);
      if (this.onFlush && commits > 0) this.onFlush((performance.now() - started) / 1000, commits);
      const waiting = this.waiters;
      this.waiters = [];
      for (const w of waiting) {
        if (w.seq <= this.synced) w.resolve();
        else this.waiters.push(w);
      }
      if (this.waiters.length > 0) this.kick();
    });
  }

  private openLog(): number {
    if (this.fd !== undefined) return this.fd;
    const file = this.walFile as string;
    this.fd = fs.openSync(file, 'r+');
    // The log's directory entry must be durable too (once: SQLite truncates the log, never
    // deletes it, while the database is open).
    syncDirectory(path.dirname(file));
    return this.fd;
  }

  private fail(err: Error): void {
    this.flushing = false;
    this.failure = new Error(`the store could not flush its write-ahead log to disk: ${err.message}`, { cause: err });
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) w.reject(this.failure);
  }

  /** Waits for pending flushes and releases the log's file handle. */
  async close(): Promise<void> {
    await this.wait().catch(() => undefined);
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
  }
}

export function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // Not every file system can sync a directory; the files themselves are synced regardless.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
