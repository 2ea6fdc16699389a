import { fromBinary } from '@bufbuild/protobuf';
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import { ERROR_CODES, ERROR_TABLE, ServiceError, type ErrorDetails } from '@planning/errors';
import { AuditService } from '@planning/proto/planning/audit/v1/audit_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import { service as healthServiceDefinition } from 'grpc-health-check';
import { afterEach, describe, expect, it } from 'vitest';
import { createRpcClient } from './client.js';
import { ERROR_CODE_HEADER, ERROR_DETAILS_HEADER } from './errors.js';
import { PRINCIPAL_HEADER, PRINCIPAL_SIGNATURE_HEADER, createPrincipalSigner, type Principal } from './principal.js';
import { createRpcServer, type RpcServer } from './server.js';
import { SECRET, USER, captureLogs, signer, startWorkspaceServer, workspaceImplementation } from './test-fixture.js';
import { callOptionsFrom, type CallContext, type RpcClient } from './types.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function track<T extends { close(): void } | RpcServer>(thing: T): T {
  cleanups.push(() => ('stop' in thing ? thing.stop() : thing.close()));
  return thing;
}

async function serve(...args: Parameters<typeof startWorkspaceServer>) {
  const started = await startWorkspaceServer(...args);
  track(started.server);
  return started;
}

function workspaceClient(address: string, options: { principal?: Principal; signer?: typeof signer } = {}) {
  return track(
    createRpcClient(WorkspaceService, {
      address,
      principalSigner: options.signer ?? signer,
      defaultPrincipal: options.principal ?? USER,
    }),
  );
}

async function expectServiceError(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ServiceError);
  return error as ServiceError;
}

/** A raw grpc-js unary call, to see the status our server sends on the wire. */
function rawUnary(
  address: string,
  path: string,
  request: Buffer,
  metadata = new grpc.Metadata(),
): Promise<{ error: grpc.ServiceError | null; response: Buffer | undefined }> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      request,
      metadata,
      { deadline: Date.now() + 5_000 },
      (error, response) => {
        client.close();
        resolve({ error, response });
      },
    );
  });
}

function signedMetadata(principal: Principal = USER): grpc.Metadata {
  const metadata = new grpc.Metadata();
  const signed = signer.sign(principal);
  metadata.set(PRINCIPAL_HEADER, signed.principal);
  metadata.set(PRINCIPAL_SIGNATURE_HEADER, signed.signature);
  return metadata;
}

const GET_WORKSPACE_PATH = '/planning.issues.v1.WorkspaceService/GetWorkspace';

describe('rpc round trip', () => {
  it('rpc: typed calls round-trip through the protobuf codec over loopback', async () => {
    const { address } = await serve();
    const client = workspaceClient(address);

    const created = await client.createWorkspace({ name: 'Launch Plan', planId: 'pro' });
    expect(created.$typeName).toBe('planning.issues.v1.CreateWorkspaceResponse');
    expect(created.workspace).toMatchObject({
      id: 'ws-1',
      name: 'Launch Plan',
      slug: 'launch-plan',
      status: 'active',
      ownerId: 'user-1',
      defaultSandbox: 'workspace-write',
      planId: 'pro',
      createdAt: '2025-01-02T03:04:05.000Z',
    });
    await client.createWorkspace({ name: 'Second', ownerId: 'user-9' });

    const fetched = await client.getWorkspace({ id: 'ws-1' });
    expect(fetched.workspace?.name).toBe('Launch Plan');

    const page = await client.listWorkspaces({ limit: 1 });
    expect(page.workspaces.map((w) => w.id)).toEqual(['ws-1']);
    expect(page.nextCursor).toBe('1');
    const all = await client.listWorkspaces({});
    expect(all.workspaces.map((w) => w.ownerId)).toEqual(['user-1', 'user-9']);
    expect(all.nextCursor).toBeUndefined();
  });

  it('rpc: the handler sees the verified principal, a deadline and an unaborted signal', async () => {
    let seen: CallContext | undefined;
    const { address } = await serve(
      workspaceImplementation({
        async getWorkspace(request, ctx) {
          seen = ctx;
          return { workspace: { id: request.id } };
        },
      }),
    );
    const agent: Principal = {
      type: 'api-key',
      id: 'key-7',
      keyId: 'key-7',
      agentId: 'agent-3',
      workspaceId: 'ws-1',
      planId: 'pro',
      isAdmin: false,
      scopes: ['agents:read'],
    };
    const before = Date.now();
    await workspaceClient(address).getWorkspace({ id: 'ws-1' }, { principal: agent });
    expect(seen?.principal).toEqual(agent);
    expect(seen?.signal.aborted).toBe(false);
    // The default deadline (10 s) travels with the call.
    expect(seen?.deadline).toBeInstanceOf(Date);
    expect(seen?.deadline?.getTime()).toBeGreaterThan(before + 5_000);
    expect(seen?.deadline?.getTime()).toBeLessThanOrEqual(Date.now() + 10_000);
  });

  it('rpc: callOptionsFrom passes the principal and the remaining deadline on to the next call', async () => {
    const inner: CallContext[] = [];
    // The handler calls back into its own server through this client, created once the port is known.
    const holder: { client?: RpcClient<typeof WorkspaceService> } = {};
    const { address } = await serve(
      workspaceImplementation({
        async getWorkspace(request, ctx) {
          if (request.id === 'outer') {
            return holder.client!.getWorkspace({ id: 'inner' }, callOptionsFrom(ctx));
          }
          inner.push(ctx);
          return { workspace: { id: request.id } };
        },
      }),
    );
    const client = track(createRpcClient(WorkspaceService, { address, principalSigner: signer }));
    holder.client = client;
    const response = await client.getWorkspace({ id: 'outer' }, { principal: USER, deadlineMs: 2_000 });
    expect(response.workspace?.id).toBe('inner');
    expect(inner[0]?.principal).toEqual(USER);
    // Without the outer deadline the inner call would have had the 10 s default.
    expect(inner[0]?.deadline?.getTime()).toBeLessThan(Date.now() + 5_000);
  });

  it('rpc: a client without a principal sends the anonymous one', async () => {
    let principal: Principal | undefined;
    const { address } = await serve(
      workspaceImplementation({
        async getWorkspace(_request, ctx) {
          principal = ctx.principal;
          return {};
        },
      }),
    );
    const client = track(createRpcClient(WorkspaceService, { address, principalSigner: signer }));
    await client.getWorkspace({ id: 'x' });
    expect(principal).toEqual({ type: 'anonymous', id: 'anonymous', isAdmin: false, scopes: [] });
  });
});

describe('rpc errors', () => {
  const details: ErrorDetails = {
    reason: 'agent-busy',
    field: 'name',
    quota: { kind: 'agent-runs', limit: 10, used: 10, resetsAt: '2025-02-01T00:00:00.000Z' },
    retryAfterSeconds: 30,
    failedIds: ['t-1', 't-2'],
  };

  it.each(ERROR_CODES.map((code) => [code]))('rpc: ServiceError %s round-trips with message and details', async (code) => {
    const message = `failure ${code}: naïve “quotes” ✓`;
    const { address } = await serve(
      workspaceImplementation({
        async getWorkspace() {
          throw new ServiceError(code, message, details);
        },
      }),
    );

    const error = await expectServiceError(workspaceClient(address).getWorkspace({ id: 'x' }));
    expect(error.code).toBe(code);
    expect(error.message).toBe(message);
    expect(error.details).toEqual(details);

    // On the wire: the table's gRPC status and the trailers.
    const raw = await rawUnary(address, GET_WORKSPACE_PATH, Buffer.alloc(0), signedMetadata());
    expect(raw.error?.code).toBe(ERROR_TABLE[code].grpc);
    expect(raw.error?.metadata.get(ERROR_CODE_HEADER)).toEqual([code]);
    expect(JSON.parse(String(raw.error?.metadata.get(ERROR_DETAILS_HEADER)[0]))).toEqual(details);
  });

  it('rpc: an unexpected throw becomes internal with a generic message and the cause is logged', async () => {
    const { address, logs } = await serve(
      workspaceImplementation({
        async getWorkspace() {
          throw new Error('db password=hunter2 leaked in a stack');
        },
      }),
    );
    const error = await expectServiceError(workspaceClient(address).getWorkspace({ id: 'x' }));
    expect(error.code).toBe('internal');
    expect(error.message).toBe('Internal error');
    expect(error.details).toEqual({});
    expect(JSON.stringify(error)).not.toContain('hunter2');

    const logged = logs.lines().find((line) => line.msg === 'rpc handler failed');
    expect(logged?.rpc).toEqual({ service: 'planning.issues.v1.WorkspaceService', method: 'GetWorkspace' });
    expect(JSON.stringify(logged?.err)).toContain('hunter2');
  });

  it('rpc: a handler result that cannot be encoded becomes internal and is logged', async () => {
    const { address, logs } = await serve(
      workspaceImplementation({
        async getWorkspace() {
          return { workspace: { id: Symbol('not a string') as unknown as string } };
        },
      }),
    );
    const error = await expectServiceError(workspaceClient(address).getWorkspace({ id: 'x' }));
    expect(error.code).toBe('internal');
    expect(error.message).toBe('Internal error');
    expect(logs.lines().some((line) => line.msg === 'rpc handler failed')).toBe(true);
  });

  it('rpc: a request value its field cannot hold is invalid-input, and nothing is sent', async () => {
    let calls = 0;
    const { address } = await serve(
      workspaceImplementation({
        async listWorkspaces() {
          calls += 1;
          return { workspaces: [] };
        },
      }),
    );
    const error = await expectServiceError(workspaceClient(address).listWorkspaces({ limit: 3_000_000_000 }));
    expect(error.code).toBe('invalid-input');
    expect(error.httpStatus).toBe(400);
    expect(calls).toBe(0);
  });

  it('rpc: a server that cannot be reached is unavailable', async () => {
    // Bind and release a port so nothing listens there.
    const probe = createRpcServer({
      host: '127.0.0.1',
      port: 0,
      logger: captureLogs().logger,
      principalVerifier: { verify: () => USER },
    });
    await probe.start();
    const address = probe.address();
    await probe.stop();
    const error = await expectServiceError(workspaceClient(address).getWorkspace({ id: 'x' }, { deadlineMs: 2_000 }));
    expect(error.code).toBe('unavailable');
  });

  it('rpc: foreign statuses without our trailers map to unavailable or internal', async () => {
    const foreign = new grpc.Server();
    const statuses = new Map([
      ['unavailable', grpc.status.UNAVAILABLE],
      ['not-found', grpc.status.NOT_FOUND],
      ['permission', grpc.status.PERMISSION_DENIED],
    ]);
    foreign.addService(
      {
        GetWorkspace: {
          path: GET_WORKSPACE_PATH,
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      {
        GetWorkspace: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
          // The request's id field (tag 1) is the status key.
          const key = call.request.subarray(2).toString('utf8');
          callback({ code: statuses.get(key) ?? grpc.status.UNKNOWN, details: `foreign ${key} at 10.0.0.7` });
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      foreign.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    cleanups.push(() => foreign.forceShutdown());
    const client = workspaceClient(`127.0.0.1:${port}`);

    const unavailable = await expectServiceError(client.getWorkspace({ id: 'unavailable' }));
    expect(unavailable.code).toBe('unavailable');
    expect(unavailable.message).not.toContain('10.0.0.7');
    for (const key of ['not-found', 'permission']) {
      const error = await expectServiceError(client.getWorkspace({ id: key }));
      expect(error.code).toBe('internal');
      expect(error.message).toBe('Internal error');
    }
  });

  it('rpc: a closed client refuses calls with unavailable', async () => {
    const { address } = await serve();
    const client = workspaceClient(address);
    client.close();
    expect((await expectServiceError(client.getWorkspace({ id: 'x' }))).code).toBe('unavailable');
  });
});

describe('rpc principal', () => {
  it('rpc: a call without a signed principal is rejected unauthorized before the handler runs', async () => {
    let called = false;
    const { address } = await serve(
      workspaceImplementation({
        async getWorkspace() {
          called = true;
          return {};
        },
      }),
    );
    const metadata = new grpc.Metadata();
    metadata.set(PRINCIPAL_HEADER, Buffer.from(JSON.stringify({ p: USER, iat: Date.now() })).toString('base64url'));
    for (const md of [new grpc.Metadata(), metadata]) {
      const raw = await rawUnary(address, GET_WORKSPACE_PATH, Buffer.alloc(0), md);
      expect(raw.error?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(raw.error?.metadata.get(ERROR_CODE_HEADER)).toEqual(['unauthorized']);
    }
    expect(called).toBe(false);
  });

  it('rpc: a principal signed with another secret is rejected unauthorized', async () => {
    const { address } = await serve();
    const forger = createPrincipalSigner('another-secret-0123456789abcdef-xyz');
    const error = await expectServiceError(
      workspaceClient(address, { signer: forger, principal: { ...USER, isAdmin: true } }).getWorkspace({ id: 'x' }),
    );
    expect(error.code).toBe('unauthorized');
  });

  it('rpc: a tampered principal header is rejected unauthorized', async () => {
    const { address } = await serve();
    const signed = signer.sign(USER);
    const tampered = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(signed.principal, 'base64url').toString()), p: { ...USER, isAdmin: true } }),
    ).toString('base64url');
    const metadata = new grpc.Metadata();
    metadata.set(PRINCIPAL_HEADER, tampered);
    metadata.set(PRINCIPAL_SIGNATURE_HEADER, signed.signature);
    const raw = await rawUnary(address, GET_WORKSPACE_PATH, Buffer.alloc(0), metadata);
    expect(raw.error?.code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it('rpc: an expired principal signature is rejected unauthorized', async () => {
    const { address } = await serve();
    const stale = createPrincipalSigner(SECRET, { now: () => Date.now() - 10 * 60_000 });
    const error = await expectServiceError(workspaceClient(address, { signer: stale }).getWorkspace({ id: 'x' }));
    expect(error.code).toBe('unauthorized');
    expect(error.message).toMatch(/expired/);
  });
});

describe('rpc deadlines and cancellation', () => {
  function waitingImplementation() {
    let resolveAborted: (reason: unknown) => void = () => {};
    const aborted = new Promise<unknown>((resolve) => (resolveAborted = resolve));
    const implementation = workspaceImplementation({
      getWorkspace: (_request, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            resolveAborted(ctx.signal.reason);
            reject(ctx.signal.reason);
          });
        }),
    });
    return { implementation, aborted };
  }

  it('rpc: an exceeded deadline fails the call with unavailable and aborts the handler signal', async () => {
    const { implementation, aborted } = waitingImplementation();
    const { address } = await serve(implementation);
    const error = await expectServiceError(workspaceClient(address).getWorkspace({ id: 'slow' }, { deadlineMs: 150 }));
    expect(error.code).toBe('unavailable');
    expect(error.message).toMatch(/deadline/i);
    const reason = await aborted;
    expect(reason).toBeInstanceOf(ServiceError);
  });

  it('rpc: aborting the caller signal cancels the call and aborts the handler signal', async () => {
    const { implementation, aborted } = waitingImplementation();
    let started: () => void = () => {};
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    const wrapped = {
      ...implementation,
      getWorkspace: (request: Parameters<typeof implementation.getWorkspace>[0], ctx: CallContext) => {
        started();
        return implementation.getWorkspace(request, ctx);
      },
    };
    const { address } = await serve(wrapped);
    const controller = new AbortController();
    const call = workspaceClient(address).getWorkspace({ id: 'slow' }, { signal: controller.signal });
    await handlerStarted;
    controller.abort();
    const error = await expectServiceError(call);
    expect(error.code).toBe('unavailable');
    await aborted;
  });

  it('rpc: an already aborted signal fails without calling', async () => {
    let called = false;
    const { address } = await serve(
      workspaceImplementation({
        async getWorkspace() {
          called = true;
          return {};
        },
      }),
    );
    const error = await expectServiceError(workspaceClient(address).getWorkspace({ id: 'x' }, { signal: AbortSignal.abort() }));
    expect(error.code).toBe('unavailable');
    expect(called).toBe(false);
  });
});

describe('rpc health and reflection', () => {
  const HealthClient = grpc.makeGenericClientConstructor(healthServiceDefinition as grpc.ServiceDefinition, 'Health');
  type HealthStub = grpc.Client & {
    check(request: { service: string }, callback: (err: grpc.ServiceError | null, res?: { status: string }) => void): void;
    watch(request: { service: string }): grpc.ClientReadableStream<{ status: string }>;
  };

  function healthClient(address: string): HealthStub {
    const client = new HealthClient(address, grpc.credentials.createInsecure()) as unknown as HealthStub;
    cleanups.push(() => client.close());
    return client;
  }

  const check = (client: HealthStub, service: string) =>
    new Promise<string>((resolve, reject) =>
      client.check({ service }, (err, res) => (err ? reject(err) : resolve(res?.status ?? ''))),
    );

  it('health: added services and the server report SERVING once started, without a principal', async () => {
    const { address } = await serve();
    const client = healthClient(address);
    expect(await check(client, 'planning.issues.v1.WorkspaceService')).toBe('SERVING');
    expect(await check(client, '')).toBe('SERVING');
  });

  it('health: setServing(false) reports NOT_SERVING and true restores SERVING', async () => {
    const { server, address } = await serve();
    const client = healthClient(address);
    server.setServing('planning.issues.v1.WorkspaceService', false);
    expect(await check(client, 'planning.issues.v1.WorkspaceService')).toBe('NOT_SERVING');
    server.setServing('planning.issues.v1.WorkspaceService', true);
    expect(await check(client, 'planning.issues.v1.WorkspaceService')).toBe('SERVING');
  });

  it('health: stop() sends NOT_SERVING to watchers and ends their streams so the drain completes', async () => {
    const { server, address } = await startWorkspaceServer(undefined, { shutdownTimeoutMs: 60_000 });
    const stream = healthClient(address).watch({ service: 'planning.issues.v1.WorkspaceService' });
    const seen: string[] = [];
    const ended = new Promise<void>((resolve) => {
      stream.on('data', (message: { status: string }) => {
        seen.push(message.status);
        if (message.status === 'SERVING') void server.stop();
      });
      stream.on('error', () => resolve());
      stream.on('end', () => resolve());
    });
    await ended;
    await server.stop();
    expect(seen).toEqual(['SERVING', 'NOT_SERVING']);
  });

  it('reflection: lists the services and serves their descriptors without a principal', async () => {
    const { address } = await serve(undefined, {
      configure: (server) =>
        server.addService(AuditService, {
          getDiagnostics: async () => ({ generatedAt: '2025-01-01T00:00:00.000Z' }),
          listAuditEvents: async () => ({ events: [] }),
        }),
    });
    const client = new grpc.Client(address, grpc.credentials.createInsecure());
    cleanups.push(() => client.close());
    const ask = (field: number, value: string) =>
      new Promise<BinaryReader>((resolve, reject) => {
        const stream = client.makeBidiStreamRequest(
          '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
          (b: Buffer) => b,
          (b: Buffer) => b,
        );
        stream.on('data', (response: Buffer) => {
          resolve(new BinaryReader(response));
          stream.end();
        });
        stream.on('error', reject);
        stream.write(Buffer.from(new BinaryWriter().tag(field, WireType.LengthDelimited).string(value).finish()));
      });
    /** The length-delimited values of one field of a message (nested: a path of field numbers). */
    const fieldValues = (reader: BinaryReader, path: number[]): Uint8Array[] => {
      const [head, ...rest] = path;
      const found: Uint8Array[] = [];
      while (reader.pos < reader.len) {
        const [no, wireType] = reader.tag();
        if (no === head && wireType === WireType.LengthDelimited) {
          const bytes = reader.bytes();
          if (rest.length === 0) found.push(bytes);
          else found.push(...fieldValues(new BinaryReader(bytes), rest));
        } else reader.skip(wireType, no);
      }
      return found;
    };

    // ServerReflectionRequest.list_services = 7 -> ServerReflectionResponse.list_services_response = 6,
    // ListServiceResponse.service = 1, ServiceResponse.name = 1.
    const names = fieldValues(await ask(7, '*'), [6, 1, 1]).map((b) => Buffer.from(b).toString('utf8'));
    expect(names.sort()).toEqual(['grpc.health.v1.Health', 'planning.audit.v1.AuditService', 'planning.issues.v1.WorkspaceService']);

    // file_containing_symbol = 4 -> file_descriptor_response = 4, FileDescriptorResponse.file_descriptor_proto = 1.
    const files = fieldValues(await ask(4, 'planning.audit.v1.AuditService'), [4, 1]).map((b) =>
      fromBinary(FileDescriptorProtoSchema, b),
    );
    const audit = files.find((f) => f.name === 'planning/audit/v1/audit.proto');
    expect(audit?.service.map((s) => s.name)).toEqual(['AuditService']);
    expect(audit?.messageType.map((m) => m.name)).toContain('AuditSummary');
  });
});

describe('rpc server lifecycle', () => {
  const base = () => ({
    host: '127.0.0.1',
    port: 0,
    logger: captureLogs().logger,
    principalVerifier: { verify: (): Principal => USER },
  });

  it('server: refuses streaming methods with a clear error', () => {
    const server = createRpcServer(base());
    const method = WorkspaceService.methods[0]!;
    const streaming = { ...WorkspaceService, methods: [{ ...method, methodKind: 'server_streaming' as const }] };
    expect(() => server.addService(streaming, workspaceImplementation())).toThrow(
      /CreateWorkspace is server_streaming; only unary methods are supported/,
    );
  });

  it('server: refuses a missing handler, a duplicate service and services added after start', async () => {
    const server = track(createRpcServer(base()));
    const { getWorkspace: _omitted, ...partial } = workspaceImplementation();
    expect(() => server.addService(WorkspaceService, partial as never)).toThrow(/no handler for getWorkspace/);
    server.addService(WorkspaceService, workspaceImplementation());
    expect(() => server.addService(WorkspaceService, workspaceImplementation())).toThrow(/already added/);
    await server.start();
    expect(() => server.addService(WorkspaceService, workspaceImplementation())).toThrow(/before start/);
  });

  it('server: stop() lets an in-flight call finish', async () => {
    let release: () => void = () => {};
    let started: () => void = () => {};
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    const { server, address } = await startWorkspaceServer(
      workspaceImplementation({
        getWorkspace: (request) =>
          new Promise((resolve) => {
            started();
            release = () => resolve({ workspace: { id: request.id } });
          }),
      }),
    );
    const client = workspaceClient(address);
    const call = client.getWorkspace({ id: 'in-flight' });
    await handlerStarted;
    const stopped = server.stop();
    release();
    expect((await call).workspace?.id).toBe('in-flight');
    await stopped;
  });
});
