import { ServiceError, invalidInput } from '@planning/errors';
import { CONSUMER_DEFAULTS, subjectMatches, type ConsumerOptions, type EventEnvelope } from './port.js';

/** Consumer options with defaults applied; shared by every adapter so they validate alike. */
export interface ResolvedConsumerOptions {
  durable: string;
  filterSubjects: string[];
  ackWaitMs: number;
  nakDelayMs: number;
  maxDeliver: number;
  concurrency: number;
  stopGraceMs: number;
}

/** The bus carries subjects of the `planning.` tree unless an adapter is told otherwise. */
export const DEFAULT_SUBJECTS: readonly string[] = ['planning.>'];
/** JetStream's default duplicate window. */
export const DEFAULT_DUPLICATE_WINDOW_MS = 2 * 60_000;

// NATS consumer names may not contain `.`, `*`, `>` or whitespace; a stricter set keeps them
// portable across adapters and readable in monitoring.
const DURABLE_NAME = /^[A-Za-z0-9_-]{1,200}$/;
const TOKEN = /^[^\s.*>]+$/;

/** A concrete subject: dot-separated, non-empty tokens, no wildcards. */
export function isValidSubject(subject: string): boolean {
  return subject.length > 0 && subject.split('.').every((t) => TOKEN.test(t));
}

/** A filter: like a subject, but `*` may stand for a token and `>` may end it. */
export function isValidFilter(filter: string): boolean {
  if (filter.length === 0) return false;
  const tokens = filter.split('.');
  return tokens.every((t, i) => t === '*' || (t === '>' && i === tokens.length - 1) || TOKEN.test(t));
}

export function matchesAny(filters: readonly string[], subject: string): boolean {
  return filters.some((f) => subjectMatches(f, subject));
}

function nonNegative(value: number, field: string): number {
  if (!Number.isFinite(value) || value < 0) throw invalidInput(field, `${field} must be a non-negative number`);
  return value;
}

export function resolveConsumerOptions(options: ConsumerOptions): ResolvedConsumerOptions {
  if (!DURABLE_NAME.test(options.durable)) {
    throw invalidInput('durable', 'durable must be 1-200 characters of letters, digits, "-" and "_"');
  }
  if (options.filterSubjects.length === 0) {
    throw invalidInput('filterSubjects', 'a consumer needs at least one filter subject');
  }
  for (const filter of options.filterSubjects) {
    if (!isValidFilter(filter)) throw invalidInput('filterSubjects', `invalid filter subject '${filter}'`);
  }
  const ackWaitMs = nonNegative(options.ackWaitMs ?? CONSUMER_DEFAULTS.ackWaitMs, 'ackWaitMs');
  if (ackWaitMs < 1) throw invalidInput('ackWaitMs', 'ackWaitMs must be at least 1 ms');
  const maxDeliver = options.maxDeliver ?? CONSUMER_DEFAULTS.maxDeliver;
  if (!Number.isInteger(maxDeliver) || (maxDeliver !== -1 && maxDeliver < 1)) {
    throw invalidInput('maxDeliver', 'maxDeliver must be -1 or a positive integer');
  }
  const concurrency = options.concurrency ?? CONSUMER_DEFAULTS.concurrency;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw invalidInput('concurrency', 'concurrency must be a positive integer');
  }
  return {
    durable: options.durable,
    filterSubjects: [...new Set(options.filterSubjects)],
    ackWaitMs,
    nakDelayMs: nonNegative(options.nakDelayMs ?? CONSUMER_DEFAULTS.nakDelayMs, 'nakDelayMs'),
    maxDeliver,
    concurrency,
    stopGraceMs: nonNegative(options.stopGraceMs ?? CONSUMER_DEFAULTS.stopGraceMs, 'stopGraceMs'),
  };
}

/** Checks an event before it is published; `subjects` are the subjects the bus carries. */
export function validateEnvelope(event: EventEnvelope, subjects: readonly string[]): void {
  if (typeof event.id !== 'string' || event.id.length === 0) throw invalidInput('id', 'an event needs an id');
  if (typeof event.subject !== 'string' || !isValidSubject(event.subject)) {
    throw invalidInput('subject', `invalid event subject '${String(event.subject)}'`);
  }
  if (!matchesAny(subjects, event.subject)) {
    throw invalidInput('subject', `subject '${event.subject}' is outside the bus subjects (${subjects.join(', ')})`);
  }
}

/** Header names travel over NATS, which forbids `:` and whitespace in them. */
export function copyHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  const copy: Record<string, string> = {};
  if (!headers) return copy;
  for (const [key, value] of Object.entries(headers)) {
    if (key.length === 0 || /[\s:]/.test(key)) throw invalidInput('headers', `invalid header name '${key}'`);
    if (/^nats-/i.test(key)) throw invalidInput('headers', `header '${key}' is reserved for the bus`);
    copy[key] = String(value);
  }
  return copy;
}

export function closedError(kind: string): ServiceError {
  return new ServiceError('unavailable', `the ${kind} event bus is closed`);
}

/** A promise that resolves after `ms`, or early when `signal` fires; never keeps the process alive. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    timer.unref();
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
