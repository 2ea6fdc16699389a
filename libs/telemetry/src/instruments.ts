/**
 * Every metric the service records, in one place: names, units, attributes and bucket
 * boundaries follow the OpenTelemetry semantic conventions where one exists (HTTP, RPC, MCP,
 * messaging) and use the `planning.` namespace otherwise. Instrumentation sites call these
 * functions; they never create instruments themselves.
 *
 * Instruments belong to the MeterProvider that is global when they are first used, so they are
 * made lazily, per provider: a process (or a test) that starts telemetry again gets fresh ones.
 */
import { metrics, type Attributes, type BatchObservableResult, type Meter, type MeterProvider, type Observable } from '@opentelemetry/api';

const METER_NAME = 'planning';

/** Seconds: the semantic conventions' advice for request durations. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
/** Seconds: lags run from milliseconds (a healthy bus) to minutes (a backlog). */
const LAG_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Seconds: a flush of the write-ahead log takes from tenths of a millisecond (a quiet SSD) to a second (a saturated disk). */
const FLUSH_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Commits one flush made durable: 1 when writes come one at a time, more under load (group commit). */
const COMMITS_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128];
/** Seconds: leases last minutes to a day. */
const LEASE_BUCKETS = [0, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400];

/** Every instrument: its name as recorded (Prometheus: dots become underscores, counters end in `_total`). */
export const METRICS = {
  httpServerDuration: 'http.server.request.duration',
  rpcServerDuration: 'rpc.server.call.duration',
  rpcClientDuration: 'rpc.client.call.duration',
  mcpServerDuration: 'mcp.server.operation.duration',
  messagingProcessDuration: 'messaging.process.duration',
  busPublishLag: 'planning.bus.publish.lag',
  busConsumeLag: 'planning.bus.consume.lag',
  busDropped: 'planning.bus.dropped',
  outboxPending: 'planning.outbox.pending',
  outboxLag: 'planning.outbox.lag',
  claimsActive: 'planning.claims.active',
  claimsStarted: 'planning.claims.started',
  claimsRefused: 'planning.claims.refused',
  claimsExpired: 'planning.claims.expired',
  claimsLeaseRemaining: 'planning.claims.lease.remaining',
  claimsSweepDuration: 'planning.claims.sweep.duration',
  rateLimitDecisions: 'planning.rate_limit.decisions',
  importRows: 'planning.import.rows',
  exportBytes: 'planning.export.bytes',
  auditWriteLag: 'planning.audit.write.lag',
  storeFlushDuration: 'planning.store.flush.duration',
  storeFlushCommits: 'planning.store.flush.commits',
} as const;

function create(meter: Meter) {
  const histogram = (name: string, description: string, unit: string, buckets: number[]) =>
    meter.createHistogram(name, { description, unit, advice: { explicitBucketBoundaries: buckets } });
  return {
    meter,
    httpServerDuration: histogram(METRICS.httpServerDuration, 'Duration of HTTP server requests.', 's', DURATION_BUCKETS),
    rpcServerDuration: histogram(METRICS.rpcServerDuration, 'Duration of incoming gRPC calls.', 's', DURATION_BUCKETS),
    rpcClientDuration: histogram(METRICS.rpcClientDuration, 'Duration of outgoing gRPC calls.', 's', DURATION_BUCKETS),
    mcpServerDuration: histogram(
      METRICS.mcpServerDuration,
      'MCP request duration as observed on the receiver, from receipt until the result is sent.',
      's',
      DURATION_BUCKETS,
    ),
    messagingProcessDuration: histogram(METRICS.messagingProcessDuration, 'Duration of handling one event from the bus.', 's', DURATION_BUCKETS),
    busPublishLag: histogram(METRICS.busPublishLag, 'Time from an event being recorded to the bus accepting it.', 's', LAG_BUCKETS),
    busConsumeLag: histogram(METRICS.busConsumeLag, 'Time from the bus accepting an event to a consumer starting to handle it.', 's', LAG_BUCKETS),
    busDropped: meter.createCounter(METRICS.busDropped, {
      description: 'Events a retention cap of the in-process bus dropped before every consumer had handled them.',
      unit: '{event}',
    }),
    outboxPending: meter.createObservableGauge(METRICS.outboxPending, { description: 'Events recorded in an outbox and not yet published.', unit: '{event}' }),
    outboxLag: meter.createObservableGauge(METRICS.outboxLag, { description: 'Age of the oldest event not yet published from an outbox (0 when empty).', unit: 's' }),
    claimsActive: meter.createObservableGauge(METRICS.claimsActive, { description: 'Claims currently held, as the claims store counts them.', unit: '{claim}' }),
    claimsStarted: meter.createCounter(METRICS.claimsStarted, { description: 'Claims granted (the task moved to in-progress).', unit: '{claim}' }),
    claimsRefused: meter.createCounter(METRICS.claimsRefused, { description: 'Claim requests refused, by reason.', unit: '{claim}' }),
    claimsExpired: meter.createCounter(METRICS.claimsExpired, { description: 'Claims ended because their lease passed.', unit: '{claim}' }),
    claimsLeaseRemaining: histogram(
      METRICS.claimsLeaseRemaining,
      'Lease a claim still had when its agent renewed or released it.',
      's',
      LEASE_BUCKETS,
    ),
    claimsSweepDuration: histogram(METRICS.claimsSweepDuration, 'Duration of claim sweeper runs, by result.', 's', DURATION_BUCKETS),
    rateLimitDecisions: meter.createCounter(METRICS.rateLimitDecisions, { description: 'Rate-limit decisions, by plan and decision.', unit: '{request}' }),
    importRows: meter.createCounter(METRICS.importRows, { description: 'Rows of committed imports, by result.', unit: '{row}' }),
    exportBytes: meter.createCounter(METRICS.exportBytes, { description: 'Bytes of export artifacts produced, by format.', unit: 'By' }),
    auditWriteLag: histogram(METRICS.auditWriteLag, 'Time from an event to its audit record being written.', 's', LAG_BUCKETS),
    storeFlushDuration: histogram(
      METRICS.storeFlushDuration,
      "Duration of one flush of an embedded store's write-ahead log to the disk (fdatasync); every write waits for one before it is acknowledged.",
      's',
      FLUSH_BUCKETS,
    ),
    storeFlushCommits: histogram(METRICS.storeFlushCommits, 'Commits one flush of an embedded store made durable (group commit).', '{commit}', COMMITS_BUCKETS),
  };
}

type Instruments = ReturnType<typeof create>;
const byProvider = new WeakMap<MeterProvider, Instruments>();

function instruments(): Instruments {
  const provider = metrics.getMeterProvider();
  let found = byProvider.get(provider);
  if (!found) {
    found = create(provider.getMeter(METER_NAME));
    byProvider.set(provider, found);
  }
  return found;
}

const withError = (attributes: Attributes, errorType: string | undefined): Attributes =>
  errorType ? { ...attributes, 'error.type': errorType } : attributes;

/** One answered HTTP request. `route` is the route pattern, never the raw path. */
export function recordHttpServerRequest(r: { method: string; route: string | undefined; statusCode: number; scheme?: string; seconds: number; errorType?: string }): void {
  const attributes: Attributes = {
    'http.request.method': r.method,
    'http.response.status_code': r.statusCode,
    ...(r.route ? { 'http.route': r.route } : {}),
    ...(r.scheme ? { 'url.scheme': r.scheme } : {}),
  };
  instruments().httpServerDuration.record(r.seconds, withError(attributes, r.errorType ?? (r.statusCode >= 500 ? String(r.statusCode) : undefined)));
}

/**
 * One RPC, on either side. `method` is `package.Service/Method`; `statusCode` the gRPC status
 * name (`OK`, `NOT_FOUND`, ...); `system` is `grpc`, or `direct` for a call to a service in the
 * same process (all-in-one).
 */
export function recordRpcCall(side: 'server' | 'client', r: { method: string; statusCode: string; seconds: number; errorType?: string; system?: string }): void {
  const attributes = { 'rpc.system.name': r.system ?? 'grpc', 'rpc.method': r.method, 'rpc.status_code': r.statusCode };
  const i = instruments();
  (side === 'server' ? i.rpcServerDuration : i.rpcClientDuration).record(r.seconds, withError(attributes, r.errorType));
}

/** One MCP request: `tools/call` by tool name; `errorType` set when it failed (`tool_error` for a tool result flagged isError). */
export function recordMcpOperation(r: { method: string; toolName?: string; protocolVersion?: string; seconds: number; errorType?: string }): void {
  const attributes: Attributes = {
    'mcp.method.name': r.method,
    ...(r.toolName ? { 'gen_ai.tool.name': r.toolName } : {}),
    ...(r.protocolVersion ? { 'mcp.protocol.version': r.protocolVersion } : {}),
  };
  instruments().mcpServerDuration.record(r.seconds, withError(attributes, r.errorType));
}

/** An event published: how long after it was recorded. */
export function recordBusPublish(r: { system: string; subject: string; lagSeconds: number }): void {
  instruments().busPublishLag.record(Math.max(0, r.lagSeconds), { 'messaging.system': r.system, 'messaging.destination.name': r.subject });
}

/** An event handled by a consumer: how long after publication it started, and how long it took. */
export function recordBusProcess(r: { system: string; subject: string; group: string; lagSeconds: number | undefined; seconds: number; errorType?: string }): void {
  const attributes = { 'messaging.system': r.system, 'messaging.destination.name': r.subject, 'messaging.consumer.group.name': r.group };
  const i = instruments();
  if (r.lagSeconds !== undefined) i.busConsumeLag.record(Math.max(0, r.lagSeconds), attributes);
  i.messagingProcessDuration.record(r.seconds, withError(attributes, r.errorType));
}

/** An event the bus dropped before a consumer had it (the in-process bus's caps). */
export function recordBusDropped(r: { system: string; subject: string; reason: string }): void {
  instruments().busDropped.add(1, { 'messaging.system': r.system, 'messaging.destination.name': r.subject, 'planning.bus.drop_reason': r.reason });
}

type Unobserve = () => void;

/** Reports an outbox's depth and the age of its oldest pending event whenever metrics are collected. */
export function observeOutbox(name: string, read: () => Promise<{ pending: number; oldestAgeSeconds: number }>): Unobserve {
  const { meter, outboxPending, outboxLag } = instruments();
  const callback = async (result: BatchObservableResult): Promise<void> => {
    const { pending, oldestAgeSeconds } = await read();
    result.observe(outboxPending, pending, { 'planning.outbox': name });
    result.observe(outboxLag, Math.max(0, oldestAgeSeconds), { 'planning.outbox': name });
  };
  const observables: Observable[] = [outboxPending, outboxLag];
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}

/** Reports the number of active claims whenever metrics are collected. */
export function observeActiveClaims(count: () => Promise<number>): Unobserve {
  const { claimsActive } = instruments();
  const callback = async (result: { observe(value: number, attributes?: Attributes): void }): Promise<void> => {
    result.observe(await count());
  };
  claimsActive.addCallback(callback);
  return () => claimsActive.removeCallback(callback);
}

export function recordClaimStarted(): void {
  instruments().claimsStarted.add(1);
}

/** A refused claim request; `reason` is the refusal's reason (`active-claim`, `agent-busy`, ...) or error code. */
export function recordClaimRefused(reason: string): void {
  instruments().claimsRefused.add(1, { 'planning.claim.refusal_reason': reason });
}

export function recordClaimsExpired(count: number): void {
  if (count > 0) instruments().claimsExpired.add(count);
}

/** The lease a claim had left when it was renewed or released. */
export function recordLeaseRemaining(seconds: number, operation: 'renew' | 'release'): void {
  instruments().claimsLeaseRemaining.record(Math.max(0, seconds), { 'planning.claim.operation': operation });
}

/** One sweeper run: `idle` (nothing to do), `worked` or `failed`. */
export function recordSweep(result: 'idle' | 'worked' | 'failed', seconds: number): void {
  instruments().claimsSweepDuration.record(seconds, { 'planning.sweep.result': result });
}

/** A rate-limit decision for a request of a workspace on `plan`. */
export function recordRateLimitDecision(plan: string, decision: 'allowed' | 'limited'): void {
  instruments().rateLimitDecisions.add(1, { 'planning.plan': plan, 'planning.rate_limit.decision': decision });
}

/** Rows an import commit wrote (`created`, `updated`, ...). */
export function recordImportRows(result: string, count: number): void {
  if (count > 0) instruments().importRows.add(count, { 'planning.import.result': result });
}

/** An export artifact of `bytes` in `format`. */
export function recordExportBytes(format: string, bytes: number): void {
  if (bytes > 0) instruments().exportBytes.add(bytes, { 'planning.export.format': format });
}

/** An audit record written `seconds` after its event. */
export function recordAuditWriteLag(seconds: number): void {
  instruments().auditWriteLag.record(Math.max(0, seconds));
}

/** One flush of the write-ahead log of the embedded store `store` (its service's name): how long it took, how many commits it made durable. */
export function recordStoreFlush(store: string, seconds: number, commits: number): void {
  const { storeFlushDuration, storeFlushCommits } = instruments();
  const attributes = { 'planning.store': store };
  storeFlushDuration.record(seconds, attributes);
  storeFlushCommits.record(commits, attributes);
}
