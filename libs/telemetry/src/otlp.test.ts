import { trace } from '@opentelemetry/api';
import { startOtlpReceiver, type OtlpReceiver } from '@planning/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { recordClaimRefused, recordHttpServerRequest } from './instruments.js';
import { startTelemetry, type Telemetry } from './telemetry.js';

describe('OTLP export', () => {
  let receiver: OtlpReceiver | undefined;
  let telemetry: Telemetry | undefined;
  afterEach(async () => {
    await telemetry?.shutdown();
    telemetry = undefined;
    await receiver?.stop();
    receiver = undefined;
  });

  it.each([
    ['http/protobuf', 'http', 'application/x-protobuf'],
    ['grpc', 'grpc', 'application/grpc'],
    ['http/json', 'http', 'application/json'],
  ] as const)('otlp: OTEL_EXPORTER_OTLP_PROTOCOL=%s sends spans and metrics with the full resource', async (protocol, transport, contentType) => {
    receiver = await startOtlpReceiver();
    telemetry = startTelemetry({
      serviceName: 'otlp-protocols',
      serviceVersion: '4.5.6',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: transport === 'grpc' ? receiver.grpcEndpoint : receiver.httpEndpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        OTEL_RESOURCE_ATTRIBUTES: '',
        NODE_ENV: 'production',
      },
    });
    expect(telemetry.exporters).toEqual(['otlp']);
    expect(telemetry.metricExporters).toEqual(['prometheus', 'otlp']);
    const span = trace.getTracer('test').startSpan(`span over ${protocol}`);
    span.setAttribute('answer', 42);
    span.end();
    recordHttpServerRequest({ method: 'GET', route: '/api/x', statusCode: 200, seconds: 0.05 });
    recordClaimRefused('quota-exceeded');
    // Shutdown flushes the batch span processor and makes the periodic reader export once more.
    await telemetry.shutdown();

    expect(receiver.rejected).toEqual([]);
    expect(new Set(receiver.requests.map((r) => `${r.transport} ${r.signal} ${r.contentType}`))).toEqual(
      new Set([`${transport} traces ${contentType}`, `${transport} metrics ${contentType}`]),
    );
    const exported = receiver.spans.find((s) => s.name === `span over ${protocol}`);
    expect(exported?.attributes).toMatchObject({ answer: 42 });
    for (const resource of [exported!.resource, ...receiver.points.map((p) => p.resource)]) {
      expect(resource).toMatchObject({
        'service.name': 'otlp-protocols',
        'service.version': '4.5.6',
        'deployment.environment.name': 'production',
        'deployment.environment': 'production',
      });
    }
    const http = receiver.points.find((p) => p.name === 'http.server.request.duration');
    expect(http).toMatchObject({ type: 'histogram', unit: 's', count: 1, attributes: { 'http.route': '/api/x' } });
    const refused = receiver.points.find((p) => p.name === 'planning.claims.refused');
    expect(refused).toMatchObject({ type: 'sum', isMonotonic: true, value: 1, attributes: { 'planning.claim.refusal_reason': 'quota-exceeded' } });
  });

  it('otlp: OTEL_RESOURCE_ATTRIBUTES names the deployment environment; both keys follow it', async () => {
    receiver = await startOtlpReceiver();
    telemetry = startTelemetry({
      serviceName: 'env-test',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.httpEndpoint, OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging,team=planning' },
    });
    trace.getTracer('test').startSpan('env').end();
    await telemetry.shutdown();
    expect(receiver.spans[0]?.resource).toMatchObject({ 'deployment.environment.name': 'staging', 'deployment.environment': 'staging' });
  });
});
