/**
 * What telemetry costs on the request path: three all-in-one bundles (`node dist/main.mjs`) side
 * by side, in interleaved rounds on the same read route (`GET /api/issues/{id}` with an API key):
 * - metrics off (`OTEL_METRICS_EXPORTER=none`), no traces: the baseline;
 * - the default: metrics recorded and served on /metrics, no traces;
 * - everything: metrics on /metrics and pushed over OTLP (http/protobuf, every second), and every
 *   request traced and exported over OTLP, to a receiver in this process.
 * Then the cost of a scrape: `GET /metrics` latency and size on the default bundle after the load.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import autocannon, { type AutocannonRequest } from 'autocannon';
import { recordHttpServerRequest, recordRpcCall, startTelemetry } from '@planning/telemetry';
import { startOtlpReceiver } from '@planning/testing';
import { createKey, createWorkspace } from '../test/support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../test/support/cluster.js';
import { login, request } from '../test/support/http.js';
import { machine, measure, ms, type Bench } from './support.js';

const CONNECTIONS = 20;
const ROUNDS = Number(process.env.TELEMETRY_BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.TELEMETRY_BENCH_SECONDS ?? 5);

interface Row {
  label: string;
  cluster: Cluster;
  tokens: string[];
  path: string;
  runs: { rps: number; p50: number; p99: number; rssMb: number; failures: number }[];
}

function rssMb(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

async function prepare(label: string, env: Record<string, string>): Promise<Row> {
  const cluster = await startCluster('all-in-one', { env });
  const admin = await login(cluster.baseUrl, ADMIN_EMAIL, cluster.adminPassword);
  const ws = (await createWorkspace(cluster.baseUrl, admin, `Telemetry bench ${randomBytes(3).toString('hex')}`, 'enterprise')).id as string;
  const project = (await request(cluster.baseUrl, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Bench' } })).body.data.id as string;
  const issue = await request(cluster.baseUrl, 'POST', '/api/issues', { cookie: admin, body: { projectId: project, title: 'Read me', status: 'ready' } });
  // One key per connection: a key's rate limit would otherwise be what is measured.
  const tokens: string[] = [];
  for (let i = 0; i < CONNECTIONS; i++) tokens.push((await createKey(cluster.baseUrl, admin, ws, 'enterprise', ['issues:read'], `bench-${i}`)).token);
  return { label, cluster, tokens, path: `/api/issues/${issue.body.data.id as string}`, runs: [] };
}

async function round(row: Row): Promise<void> {
  const pid = row.cluster.process('all').pid;
  let next = 0;
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 250);
  try {
    const result = await autocannon({
      url: `${row.cluster.baseUrl}${row.path}`,
      connections: CONNECTIONS,
      duration: SECONDS,
      requests: [
        {
          setupRequest(req: AutocannonRequest, context: Record<string, unknown>) {
            context.token ??= row.tokens[next++ % row.tokens.length];
            return { ...req, headers: { ...req.headers, authorization: `Bearer ${context.token as string}` } };
          },
        },
      ],
    });
    row.runs.push({
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      rssMb: Math.max(peak, rssMb(pid)),
      failures: result.non2xx + result.errors + result.timeouts,
    });
  } finally {
    clearInterval(sampler);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/**
 * Nanoseconds per request for what the request path records (one HTTP duration, two RPC
 * durations), in this process: with the SDK's MeterProvider, and with none (no-op instruments).
 * Interleaved batches; the median batch.
 */
async function recordingCost(): Promise<{ sdk: number; noop: number }> {
  const batch = 20_000;
  const once = (i: number) => {
    recordHttpServerRequest({ method: 'GET', route: '/api/issues/:id', statusCode: 200, scheme: 'http', seconds: (i % 50) / 1000 });
    recordRpcCall('client', { method: 'planning.issues.v1.TaskService/GetTask', statusCode: 'OK', seconds: 0.001, system: 'direct' });
    recordRpcCall('server', { method: 'planning.issues.v1.TaskService/GetTask', statusCode: 'OK', seconds: 0.001, system: 'direct' });
  };
  const time = () => {
    const t = process.hrtime.bigint();
    for (let i = 0; i < batch; i++) once(i);
    return Number(process.hrtime.bigint() - t) / batch;
  };
  const sdk: number[] = [];
  const noop: number[] = [];
  for (let round = 0; round < 7; round++) {
    const telemetry = startTelemetry({ serviceName: 'bench', env: {} });
    time(); // first use creates the instruments
    sdk.push(time());
    await telemetry.shutdown();
    noop.push(time());
  }
  return { sdk: median(sdk), noop: median(noop) };
}

const bench: Bench = {
  name: 'telemetry',
  async run(log) {
    const header = machine();
    const startedLoad = loadavg()[0]!.toFixed(2);
    const receiver = await startOtlpReceiver();
    const base = { LOG_LEVEL: 'warn' };
    const rows: Row[] = [];
    try {
      log('starting three bundles');
      rows.push(await prepare('metrics off, no traces (`OTEL_METRICS_EXPORTER=none`)', { ...base, OTEL_METRICS_EXPORTER: 'none' }));
      rows.push(await prepare('default: metrics on `/metrics`, no traces', base));
      rows.push(
        await prepare('metrics on `/metrics` and OTLP, every request traced and exported (OTLP http/protobuf)', {
          ...base,
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.httpEndpoint,
          OTEL_METRIC_EXPORT_INTERVAL: '1000',
        }),
      );
      for (let r = 0; r < ROUNDS; r++) {
        for (const row of rows) {
          log(`round ${r + 1}/${ROUNDS}: ${row.label}`);
          await round(row);
        }
      }
      const scrapeUrl = rows[1]!.cluster.process('all').metricsUrl;
      let bytes = 0;
      const scrape = await measure(
        async () => {
          bytes = (await (await fetch(scrapeUrl)).text()).length;
        },
        { iterations: 200, warmup: 10 },
      );
      const cost = await recordingCost();
      const baseline = median(rows[0]!.runs.map((x) => x.rps));
      const lines = rows.map((row) => {
        const rps = median(row.runs.map((x) => x.rps));
        return `| ${row.label} | ${Math.round(rps).toLocaleString('en')} | ${ms(median(row.runs.map((x) => x.p50)))} | ${ms(median(row.runs.map((x) => x.p99)))} | ${Math.max(...row.runs.map((x) => x.rssMb)).toFixed(0)} MB | ${row.runs.reduce((n, x) => n + x.failures, 0)} | ${(rps / baseline).toFixed(2)} × |`;
      });
      const spans = receiver.spans.length;
      return [
        '## Telemetry on the request path',
        '',
        `${header} (load average ${startedLoad} at the start, ${loadavg()[0]!.toFixed(2)} at the end; compare rows of this run only). ` +
          `Three all-in-one bundles side by side, ${ROUNDS} interleaved rounds of ${SECONDS} s each, ${CONNECTIONS} connections, \`GET /api/issues/{id}\` with an enterprise API key; medians of the rounds, RSS is the server's peak. ` +
          `Load: autocannon in the benchmark process, on the same cores. The traced bundle exported ${spans.toLocaleString('en')} spans to an OTLP receiver in the benchmark process.`,
        '',
        '| bundle | req/s | p50 | p99 | server RSS | non-2xx + errors | vs metrics off |',
        '|---|---:|---:|---:|---:|---:|---:|',
        ...lines,
        '',
        `A scrape of \`/metrics\` on the default bundle after the load: p50 ${ms(scrape.p50)}, p99 ${ms(scrape.p99)}, ${(bytes / 1024).toFixed(1)} KiB of text.`,
        '',
        `Recording alone, in the benchmark process (what a request through the gateway to a service records: one HTTP and two RPC durations; median of 7 interleaved batches of 20,000): ` +
          `${Math.round(cost.sdk).toLocaleString('en')} ns with the SDK's MeterProvider, ${Math.round(cost.noop).toLocaleString('en')} ns with no provider (no-op instruments).`,
      ].join('\n');
    } finally {
      for (const row of rows) await row.cluster.stop();
      await receiver.stop();
    }
  },
};

export default bench;
