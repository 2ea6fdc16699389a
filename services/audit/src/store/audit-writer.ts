import type { EventEnvelope } from '@planning/bus';
import type { AuditEventRepository } from './audit-events.js';

interface Waiting {
  event: EventEnvelope;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Gathers the audit consumer's deliveries into batches: every event handed in during one turn of
 * the event loop (or, with `gatherMs`, within that many milliseconds of the batch's first event)
 * is written by one `recordMany` (one transaction and one commit for the batch, instead of one per
 * event: a single audit insert cost about 240 µs of CPU, most of it the commit writing the table's
 * and each index's page to the write-ahead log), and waits for one flush of the log to the disk.
 * A batch of `maxBatch` events is written at once. Each caller's promise settles with its batch:
 * it resolves once the batch is durably stored, and rejects when the batch could not be written
 * (the bus then redelivers each event of it; redeliveries are recognised by id).
 */
export class AuditWriter {
  private waiting: Waiting[] = [];
  private timer: ReturnType<typeof setTimeout> | ReturnType<typeof setImmediate> | undefined;

  constructor(
    private readonly events: AuditEventRepository,
    private readonly maxBatch = 256,
    private readonly gatherMs = 0,
  ) {}

  record(event: EventEnvelope): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ event, resolve, reject });
      if (this.waiting.length >= this.maxBatch) this.flush();
      else if (this.timer === undefined) this.timer = this.gatherMs > 0 ? setTimeout(() => this.flush(), this.gatherMs) : setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    if (this.timer !== undefined) {
      if (this.gatherMs > 0) clearTimeout(this.timer as ReturnType<typeof setTimeout>);
      else clearImmediate(this.timer as ReturnType<typeof setImmediate>);
      this.timer = undefined;
    }
    const batch = this.waiting;
    if (batch.length === 0) return;
    this.waiting = [];
    this.events.recordMany(batch.map((w) => w.event)).then(
      () => batch.forEach((w) => w.resolve()),
      (err: unknown) => batch.forEach((w) => w.reject(err)),
    );
  }
}
