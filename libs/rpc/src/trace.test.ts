import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { ServiceError } from '@planning/errors';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { startTelemetry, type Telemetry } from '@planning/telemetry';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRpcClient } from './client.js';
import { signer, startWorkspaceServer, USER, workspaceImplementation } from './test-fixture.js';
import type { RpcServer } from './server.js';
import type { RpcClient } from './types.js';

describe('rpc trace context', () => {
  const exporter = new InMemorySpanExporter();
  const processor = new SimpleSpanProcessor({ exporter });
  let telemetry: Telemetry;
  let server: RpcServer;
  let client: RpcClient<typeof WorkspaceService>;
  let handlerTraceId: string | undefined;

  beforeAll(async () => {
    telemetry = startTelemetry({
      serviceName: 'rpc-trace-test',
      env: {},
      spanProcessors: [processor],
    });
    const started = await startWorkspaceServer(
      workspaceImplementation({
        async getWorkspace(request) {
          handlerTraceId = trace.getActiveSpan()?.spanContext().traceId;
          if (request.id === 'missing') throw new ServiceError('not-found', 'Workspace not found');
          if (request.id === 'boom') throw new Error('boom');
          return { workspace: { id: request.id } };
        },
      }),
    );
    server = started.server;
    client = createRpcClient(WorkspaceService, { address: started.address, principalSigner: signer, defaultPrincipal: USER });
  });

  afterAll(async () => {
    client.close();
    await server.stop();
    await telemetry.shutdown();
  });

  beforeEach(() => {
    exporter.reset();
    handlerTraceId = undefined;
  });

  // Export waits for the resource's async attributes (host detection), so flush before looking.
  const finished = async () => {
    await processor.forceFlush();
    return exporter.getFinishedSpans();
  };
  const spanOf = (spans: Awaited<ReturnType<typeof finished>>, kind: SpanKind) => spans.find((span) => span.kind === kind);

  it('trace: the server span is a child of the client span in the caller’s trace', async () => {
    const outer = trace.getTracer('test');
    const callerTraceId = await outer.startActiveSpan('caller', async (span) => {
      await client.getWorkspace({ id: 'ws-1' });
      span.end();
      return span.spanContext().traceId;
    });

    const spans = await finished();
    const clientSpan = spanOf(spans, SpanKind.CLIENT);
    const serverSpan = spanOf(spans, SpanKind.SERVER);
    expect(spans).toHaveLength(3);
    expect(clientSpan?.spanContext().traceId).toBe(callerTraceId);
    expect(serverSpan?.spanContext().traceId).toBe(callerTraceId);
    expect(serverSpan?.parentSpanContext?.spanId).toBe(clientSpan?.spanContext().spanId);
    expect(serverSpan?.parentSpanContext?.isRemote).toBe(true);
    // The handler runs inside the server span.
    expect(handlerTraceId).toBe(callerTraceId);

    expect(serverSpan?.name).toBe('planning.issues.v1.WorkspaceService/GetWorkspace');
    expect(serverSpan?.attributes).toMatchObject({
      'rpc.system': 'grpc',
      'rpc.service': 'planning.issues.v1.WorkspaceService',
      'rpc.method': 'GetWorkspace',
      'rpc.grpc.status_code': 0,
    });
    expect(serverSpan?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('trace: failures are recorded on the spans', async () => {
    await expect(client.getWorkspace({ id: 'boom' })).rejects.toBeInstanceOf(ServiceError);
    const spans = await finished();
    const serverSpan = spanOf(spans, SpanKind.SERVER);
    expect(serverSpan?.status.code).toBe(SpanStatusCode.ERROR);
    expect(serverSpan?.attributes).toMatchObject({ 'rpc.grpc.status_code': 13, 'error.type': 'internal' });
    expect(serverSpan?.events.some((event) => event.name === 'exception')).toBe(true);
    expect(spanOf(spans, SpanKind.CLIENT)?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('trace: a client error such as not-found is noted but leaves the server span status unset', async () => {
    await expect(client.getWorkspace({ id: 'missing' })).rejects.toMatchObject({ code: 'not-found' });
    const serverSpan = spanOf(await finished(), SpanKind.SERVER);
    expect(serverSpan?.attributes).toMatchObject({ 'rpc.grpc.status_code': 5, 'error.type': 'not-found' });
    expect(serverSpan?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('trace: a call outside any span still gets a trace shared by both ends', async () => {
    await client.getWorkspace({ id: 'ws-2' });
    const spans = await finished();
    const clientSpan = spanOf(spans, SpanKind.CLIENT);
    const serverSpan = spanOf(spans, SpanKind.SERVER);
    expect(clientSpan).toBeDefined();
    expect(serverSpan).toBeDefined();
    expect(clientSpan?.parentSpanContext).toBeUndefined();
    expect(serverSpan?.spanContext().traceId).toBe(clientSpan?.spanContext().traceId);
  });
});
