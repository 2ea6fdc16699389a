import { Worker } from 'node:worker_threads';
import { parsePrometheusText, type PrometheusFamily } from '@planning/testing';
import { afterEach, describe, expect, it } from 'vitest';
import {
  observeOutbox,
  recordClaimRefused,
  recordClaimStarted,
  recordHttpServerRequest,
  recordRpcCall,
  recordSweep,
} from './instruments.js';
import { startMetricsServer, type MetricsServer } from './metrics-server.js';
import { resolveMetricExportSettings, startTelemetry, type Telemetry } from './telemetry.js';

async function scrape(server: MetricsServer): Promise<Map<string, PrometheusFamily>> {
  const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return parsePrometheusText(await res.text());
}

const sample = (family: PrometheusFamily | undefined, labels: Record<string, string>) =>
  family?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));

describe('metric export settings', () => {
  it('metrics settings: Prometheus always, OTLP as well once an endpoint is set, none when asked', () => {
    expect(resolveMetricExportSettings({}).exporters).toEqual(['prometheus']);
    expect(resolveMetricExportSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toMatchObject({
      exporters: ['prometheus', 'otlp'],
      url: 'http://c:4318/v1/metrics',
      protocol: 'http/protobuf',
    });
    expect(resolveMetricExportSettings({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).exporters).toEqual(['otlp']);
    expect(resolveMetricExportSettings({ OTEL_METRICS_EXPORTER: 'none' }).exporters).toEqual([]);
    expect(resolveMetricExportSettings({ OTEL_SDK_DISABLED: 'true' }).exporters).toEqual([]);
    expect(resolveMetricExportSettings({ OTEL_METRIC_EXPORT_INTERVAL: '250' }).intervalMs).toBe(250);
  });
});

describe('GET /metrics', () => {
  let telemetry: Telemetry | undefined;
  let server: MetricsServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await telemetry?.shutdown();
    telemetry = undefined;
  });

  it('metrics endpoint: serves the instruments in the Prometheus text format, with the service on every series', async () => {
    telemetry = startTelemetry({ serviceName: 'metrics-test', serviceVersion: '9.8.7', env: {} });
    server = await startMetricsServer({ host: '127.0.0.1', port: 0 });
    expect(server).toBeDefined();
    recordHttpServerRequest({ method: 'GET', route: '/api/tasks/:id', statusCode: 200, seconds: 0.012 });
    recordHttpServerRequest({ method: 'GET', route: '/api/tasks/:id', statusCode: 200, seconds: 0.3 });
    recordHttpServerRequest({ method: 'POST', route: '/api/tasks', statusCode: 503, seconds: 0.05 });
    recordRpcCall('server', { method: 'planning.issues.v1.TaskService/GetTask', statusCode: 'NOT_FOUND', seconds: 0.004, errorType: 'not-found' });
    recordClaimStarted();
    recordClaimRefused('active-claim');
    recordClaimRefused('active-claim');
    recordSweep('idle', 0.002);
    let pending = 3;
    const stop = observeOutbox('issues', async () => ({ pending, oldestAgeSeconds: pending > 0 ? 12.5 : 0 }));

    const families = await scrape(server!);
    const http = families.get('http_server_request_duration');
    expect(http?.type).toBe('HISTOGRAM');
    const get = sample(http, { http_request_method: 'GET', http_route: '/api/tasks/:id', http_response_status_code: '200' });
    expect(get).toMatchObject({ count: 2, labels: { service_name: 'metrics-test' } });
    expect(get?.sum).toBeCloseTo(0.312, 6);
    expect(get?.buckets?.['0.025']).toBe(1);
    expect(get?.buckets?.['+Inf']).toBe(2);
    expect(sample(http, { http_response_status_code: '503' })?.labels['error_type']).toBe('503');

    expect(sample(families.get('rpc_server_call_duration'), { rpc_method: 'planning.issues.v1.TaskService/GetTask', rpc_status_code: 'NOT_FOUND' })).toMatchObject({
      count: 1,
      labels: { rpc_system_name: 'grpc', error_type: 'not-found' },
    });
    expect(families.get('planning_claims_started_total')?.samples[0]?.value).toBe(1);
    expect(sample(families.get('planning_claims_refused_total'), { planning_claim_refusal_reason: 'active-claim' })?.value).toBe(2);
    expect(sample(families.get('planning_claims_sweep_duration'), { planning_sweep_result: 'idle' })?.count).toBe(1);
    expect(sample(families.get('planning_outbox_pending'), { planning_outbox: 'issues' })?.value).toBe(3);
    expect(sample(families.get('planning_outbox_lag'), { planning_outbox: 'issues' })?.value).toBe(12.5);
    const target = families.get('target_info')?.samples[0]?.labels;
    expect(target).toMatchObject({ service_name: 'metrics-test', service_version: '9.8.7', deployment_environment_name: 'development' });

    // Each collection asks the callback again.
    pending = 0;
    expect(sample((await scrape(server!)).get('planning_outbox_pending'), { planning_outbox: 'issues' })?.value).toBe(0);
    stop();

    const other = await fetch(`http://127.0.0.1:${server!.port}/`);
    expect(other.status).toBe(404);
  });

  it('metrics endpoint: a taken port is refused with a message naming METRICS_PORT', async () => {
    telemetry = startTelemetry({ serviceName: 'metrics-test', env: {} });
    server = await startMetricsServer({ host: '127.0.0.1', port: 0 });
    await expect(startMetricsServer({ host: '127.0.0.1', port: server!.port })).rejects.toThrow(/METRICS_PORT \d+ .* already in use/);
  });

  it('metrics endpoint: off when OTEL_METRICS_EXPORTER leaves out prometheus, or the SDK is disabled', async () => {
    telemetry = startTelemetry({ serviceName: 'metrics-test', env: { OTEL_METRICS_EXPORTER: 'none' } });
    expect(await startMetricsServer({ host: '127.0.0.1', port: 0 })).toBeUndefined();
    await telemetry.shutdown();
    telemetry = startTelemetry({ serviceName: 'metrics-test', env: { OTEL_SDK_DISABLED: 'true' } });
    expect(telemetry.metricExporters).toEqual([]);
    expect(await startMetricsServer({ host: '127.0.0.1', port: 0 })).toBeUndefined();
  });

  it('metrics endpoint: worker threads report through the main thread, merged into the same series', async () => {
    telemetry = startTelemetry({ serviceName: 'main-thread', env: {} });
    server = await startMetricsServer({ host: '127.0.0.1', port: 0 });
    recordHttpServerRequest({ method: 'GET', route: '/api/things', statusCode: 200, seconds: 0.02 });
    recordClaimRefused('agent-busy');

    const workers = [
      { requests: 2, refusals: 1 },
      { requests: 3, refusals: 0 },
    ].map((data) => {
      // Worker threads do not take TypeScript entry points; tsx loads this one.
      const entry = new URL('./testing/metrics-worker.ts', import.meta.url).href;
      const code = `import('tsx/esm/api').then(({ tsImport }) => tsImport(${JSON.stringify(entry)}, ${JSON.stringify(entry)}))`;
      return new Worker(code, { eval: true, workerData: data });
    });
    await Promise.all(workers.map((w) => new Promise((resolve, reject) => w.once('message', resolve).once('error', reject))));

    const families = await scrape(server!);
    // One series per attribute set: 1 + 2 + 3 requests, 1 + 1 refusals, whichever thread recorded them.
    const http = families.get('http_server_request_duration')!;
    expect(http.samples.filter((s) => s.labels['http_route'] === '/api/things')).toHaveLength(1);
    expect(sample(http, { http_route: '/api/things' })?.count).toBe(6);
    expect(sample(families.get('planning_claims_refused_total'), { planning_claim_refusal_reason: 'agent-busy' })?.value).toBe(2);

    // A worker that stops takes its series with it.
    workers[1]!.postMessage('stop');
    await new Promise((resolve) => workers[1]!.once('exit', resolve));
    expect(sample((await scrape(server!)).get('http_server_request_duration'), { http_route: '/api/things' })?.count).toBe(3);
    workers[0]!.postMessage('stop');
    await new Promise((resolve) => workers[0]!.once('exit', resolve));
  }, 30_000);
});
