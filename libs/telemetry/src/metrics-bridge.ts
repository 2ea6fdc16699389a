/**
 * Metrics across worker threads. Every thread has its own OpenTelemetry globals, so a thread that
 * runs services records into its own MeterProvider. The main thread owns the exporters (the
 * Prometheus endpoint, OTLP) and, whenever one of them collects, asks every worker thread for its
 * metrics over a BroadcastChannel and merges them with its own: one scrape, one series per
 * instrument and attribute set, whichever thread recorded it. No wiring is needed beyond starting
 * telemetry in each thread.
 */
import { BroadcastChannel, isMainThread, threadId } from 'node:worker_threads';
import {
  DataPointType,
  MetricReader,
  type CollectionResult,
  type DataPoint,
  type Histogram,
  type MetricData,
  type MetricProducer,
  type ResourceMetrics,
  type ScopeMetrics,
} from '@opentelemetry/sdk-metrics';

const CHANNEL = 'planning-telemetry-metrics';

type BridgeMessage =
  | { type: 'hello'; thread: number }
  | { type: 'bye'; thread: number }
  | { type: 'collect'; id: number }
  | { type: 'metrics'; id: number; thread: number; scopeMetrics: ScopeMetrics[]; errors: string[] };

/** A reader nothing pushes from: the main thread's merged producer, or the bridge, collects it on demand. */
export class PullMetricReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

/** Main thread: the metrics of every worker thread that runs telemetry. */
export class WorkerMetricsProducer implements MetricProducer {
  private readonly channel = new BroadcastChannel(CHANNEL);
  private readonly workers = new Set<number>();
  private readonly waiting = new Map<number, { expected: Set<number>; got: ScopeMetrics[][]; errors: unknown[]; done: () => void }>();
  private nextId = 1;

  constructor(private readonly timeoutMs = 1_000) {
    this.channel.onmessage = (event) => this.receive((event as { data: BridgeMessage }).data);
    // The channel must not keep the process alive.
    (this.channel as unknown as { unref(): void }).unref();
    // Workers that started first announce themselves again when asked.
    this.channel.postMessage({ type: 'collect', id: 0 } satisfies BridgeMessage);
  }

  /** How many worker threads report metrics (for tests and diagnostics). */
  get workerCount(): number {
    return this.workers.size;
  }

  private receive(message: BridgeMessage): void {
    if (message.type === 'hello') this.workers.add(message.thread);
    else if (message.type === 'bye') {
      this.workers.delete(message.thread);
      for (const pending of this.waiting.values()) {
        pending.expected.delete(message.thread);
        if (pending.expected.size === 0) pending.done();
      }
    } else if (message.type === 'metrics') {
      // A thread answering is alive, even if it was dropped after a slow answer.
      this.workers.add(message.thread);
      const pending = this.waiting.get(message.id);
      if (!pending || !pending.expected.delete(message.thread)) return;
      pending.got.push(message.scopeMetrics);
      pending.errors.push(...message.errors);
      if (pending.expected.size === 0) pending.done();
    }
  }

  async collect(): Promise<CollectionResult> {
    const resourceMetrics = { resource: undefined, scopeMetrics: [] } as unknown as ResourceMetrics;
    if (this.workers.size === 0) return { resourceMetrics, errors: [] };
    const id = this.nextId++;
    const expected = new Set(this.workers);
    const got: ScopeMetrics[][] = [];
    const errors: unknown[] = [];
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        // A thread that does not answer in time has most likely gone without saying so.
        for (const thread of expected) {
          this.workers.delete(thread);
          errors.push(new Error(`worker thread ${thread} did not report its metrics within ${this.timeoutMs} ms`));
        }
        resolve();
      }, this.timeoutMs);
      this.waiting.set(id, {
        expected,
        got,
        errors,
        done: () => {
          clearTimeout(timer);
          resolve();
        },
      });
      this.channel.postMessage({ type: 'collect', id } satisfies BridgeMessage);
    });
    this.waiting.delete(id);
    resourceMetrics.scopeMetrics = mergeScopeMetrics(got);
    return { resourceMetrics, errors };
  }

  close(): void {
    this.channel.close();
  }
}

/** Worker thread: answers the main thread's collections with this thread's metrics. */
export function serveWorkerMetrics(reader: MetricReader): { close(): void } {
  const channel = new BroadcastChannel(CHANNEL);
  (channel as unknown as { unref(): void }).unref();
  channel.onmessage = (event) => {
    const message = (event as { data: BridgeMessage }).data;
    if (message.type !== 'collect') return;
    if (message.id === 0) {
      channel.postMessage({ type: 'hello', thread: threadId } satisfies BridgeMessage);
      return;
    }
    reader.collect().then(
      (result) =>
        channel.postMessage({
          type: 'metrics',
          id: message.id,
          thread: threadId,
          // Plain data (arrays, numbers, strings): structured-cloned as is.
          scopeMetrics: result.resourceMetrics.scopeMetrics,
          errors: result.errors.map(String),
        } satisfies BridgeMessage),
      (err: unknown) =>
        channel.postMessage({ type: 'metrics', id: message.id, thread: threadId, scopeMetrics: [], errors: [String(err)] } satisfies BridgeMessage),
    );
  };
  channel.postMessage({ type: 'hello', thread: threadId } satisfies BridgeMessage);
  return {
    close() {
      channel.postMessage({ type: 'bye', thread: threadId } satisfies BridgeMessage);
      channel.close();
    },
  };
}

export const inWorkerThread = !isMainThread;

const attributesKey = (point: DataPoint<unknown>): string =>
  JSON.stringify(Object.entries(point.attributes).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

const earlier = (a: [number, number], b: [number, number]): [number, number] => (a[0] < b[0] || (a[0] === b[0] && a[1] <= b[1]) ? a : b);
const later = (a: [number, number], b: [number, number]): [number, number] => (earlier(a, b) === a ? b : a);

/** Adds one cumulative point into another of the same instrument and attributes. */
function addPoint(metric: MetricData, into: DataPoint<unknown>, point: DataPoint<unknown>): DataPoint<unknown> {
  const startTime = earlier(into.startTime as [number, number], point.startTime as [number, number]);
  const endTime = later(into.endTime as [number, number], point.endTime as [number, number]);
  switch (metric.dataPointType) {
    case DataPointType.SUM:
      return { ...into, startTime, endTime, value: (into.value as number) + (point.value as number) };
    case DataPointType.HISTOGRAM: {
      const a = into.value as Histogram;
      const b = point.value as Histogram;
      if (a.buckets.boundaries.join() !== b.buckets.boundaries.join()) return into;
      return {
        ...into,
        startTime,
        endTime,
        value: {
          buckets: { boundaries: a.buckets.boundaries, counts: a.buckets.counts.map((c, i) => c + (b.buckets.counts[i] ?? 0)) },
          count: a.count + b.count,
          sum: (a.sum ?? 0) + (b.sum ?? 0),
          min: Math.min(a.min ?? Infinity, b.min ?? Infinity),
          max: Math.max(a.max ?? -Infinity, b.max ?? -Infinity),
        } satisfies Histogram,
      };
    }
    default:
      // Gauges (and anything else): the later observation wins.
      return endTime === (into.endTime as [number, number]) ? into : point;
  }
}

/**
 * One ScopeMetrics list from several threads' lists: metrics of the same scope and name become
 * one, and their points with the same attributes are added up (sums and histograms are
 * cumulative) or, for gauges, the later one is kept.
 */
export function mergeScopeMetrics(lists: ScopeMetrics[][]): ScopeMetrics[] {
  const scopes = new Map<string, { scope: ScopeMetrics['scope']; metrics: Map<string, MetricData & { points: Map<string, DataPoint<unknown>> }> }>();
  for (const list of lists) {
    for (const scopeMetrics of list) {
      const scopeKey = `${scopeMetrics.scope.name}@${scopeMetrics.scope.version ?? ''}`;
      let scope = scopes.get(scopeKey);
      if (!scope) scopes.set(scopeKey, (scope = { scope: scopeMetrics.scope, metrics: new Map() }));
      for (const metric of scopeMetrics.metrics) {
        let merged = scope.metrics.get(metric.descriptor.name);
        if (!merged) {
          merged = { ...metric, points: new Map() };
          scope.metrics.set(metric.descriptor.name, merged);
        }
        for (const point of metric.dataPoints as DataPoint<unknown>[]) {
          const key = attributesKey(point);
          const existing = merged.points.get(key);
          merged.points.set(key, existing ? addPoint(merged, existing, point) : point);
        }
      }
    }
  }
  return [...scopes.values()].map(({ scope, metrics }) => ({
    scope,
    metrics: [...metrics.values()].map(({ points, ...metric }) => ({ ...metric, dataPoints: [...points.values()] }) as MetricData),
  }));
}
