import { Readable } from 'node:stream';
import { ServiceError } from '@planning/errors';
import type { Principal, RpcCallOptions } from '@planning/rpc';
import { createHttpApp } from '@planning/runtime/http';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayDeps } from '../deps.js';
import { artifactChunks, EXPORT_CALL_DEADLINE_MS, exportRoutes } from './exports.js';

/** A fake ExportService client: chunk `i` is `[i]`; `failAt` makes that chunk's read fail. */
function fakeExports(options: { failAt?: number } = {}) {
  const released: string[] = [];
  const read: number[] = [];
  return {
    released,
    read,
    client: {
      readExportArtifact: async (request: { exportId?: string; index?: number }) => {
        read.push(request.index ?? 0);
        if (request.index === options.failAt) throw new ServiceError('unavailable', 'gone');
        return { chunk: new Uint8Array([request.index ?? 0]) } as never;
      },
      releaseExportArtifact: async (request: { exportId?: string }) => {
        released.push(request.exportId ?? "");
        return {} as never;
      },
    },
  };
}

const artifact = { exportId: 'exp_1', firstChunk: new Uint8Array([0]), chunkCount: 5 };
const principal: RpcCallOptions = { principal: { type: 'user', id: 'usr_1', userId: 'usr_1', isAdmin: false, scopes: [] } };

describe('exports: gateway artifact stream', () => {
  it('exports: a download read to the end releases nothing (the last read removes the chunks)', async () => {
    const fake = fakeExports();
    const parts: Buffer[] = [];
    for await (const part of artifactChunks(fake.client, artifact, principal)) parts.push(part);
    expect(Buffer.concat(parts)).toEqual(Buffer.from([0, 1, 2, 3, 4]));
    expect(fake.released).toEqual([]);
  });

  it('exports: a response stream destroyed early (client gone) releases the unread chunks', async () => {
    const fake = fakeExports();
    const stream = Readable.from(artifactChunks(fake.client, artifact, principal));
    const first = await new Promise<Buffer>((resolve) => stream.once('data', resolve));
    expect(first).toEqual(Buffer.from([0]));
    stream.destroy();
    await new Promise((r) => stream.once('close', r));
    await new Promise((r) => setTimeout(r, 20));
    expect(fake.released).toEqual(['exp_1']);
    expect(fake.read.length).toBeLessThan(4);
  });

  it('exports: a chunk that fails to arrive releases the rest', async () => {
    const fake = fakeExports({ failAt: 2 });
    const parts: Buffer[] = [];
    await expect(
      (async () => {
        for await (const part of artifactChunks(fake.client, artifact, principal)) parts.push(part);
      })(),
    ).rejects.toThrow('gone');
    expect(parts).toHaveLength(2);
    expect(fake.released).toEqual(['exp_1']);
  });
});

describe('exports: gateway route', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    app?.server.closeAllConnections();
    await app?.close();
    app = undefined;
  });

  /** The route over a fake ExportService whose CreateExport runs `create`. */
  const start = async (create: (options: RpcCallOptions) => Promise<unknown>) => {
    app = createHttpApp();
    app.decorateRequest('principal', null as unknown as Principal);
    app.addHook('onRequest', async (request) => {
      request.principal = principal.principal!;
    });
    const exports = { createExport: async (_request: unknown, options: RpcCallOptions) => create(options) };
    await exportRoutes(app, { rpc: { exports } } as unknown as GatewayDeps);
    return app;
  };
  const answer = {
    entry: { id: 'exp_1', sha256: 'ab', bytes: 2n },
    contentType: 'application/json; charset=utf-8',
    fileName: 'acme-issues-20261122-100000.json',
    firstChunk: new Uint8Array([123, 125]),
    chunkCount: 1,
  };

  it('exports: CreateExport gets a deadline longer than the service may take (not the 10 s default)', async () => {
    let seen: RpcCallOptions | undefined;
    const server = await start(async (options) => {
      seen = options;
      return answer;
    });
    const res = await server.inject({ method: 'GET', url: '/api/issues/export?workspaceId=ws_1&format=json' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('{}');
    expect(seen?.deadlineMs).toBe(EXPORT_CALL_DEADLINE_MS);
    expect(EXPORT_CALL_DEADLINE_MS).toBeGreaterThan(600_000);
    expect(seen?.signal?.aborted).toBe(false);
  });

  it('exports: a client that disconnects before the artifact is ready cancels the CreateExport call', async () => {
    let cancelled!: (value: boolean) => void;
    const wasCancelled = new Promise<boolean>((r) => (cancelled = r));
    let called!: () => void;
    const wasCalled = new Promise<void>((r) => (called = r));
    const server = await start(
      (options) =>
        new Promise((_resolve, reject) => {
          called();
          const timer = setTimeout(() => cancelled(false), 3_000);
          options.signal?.addEventListener('abort', () => {
            clearTimeout(timer);
            cancelled(true);
            reject(new ServiceError('unavailable', 'Call cancelled'));
          });
        }),
    );
    const address = await server.listen({ port: 0, host: '127.0.0.1' });
    const client = new AbortController();
    const pending = fetch(`${address}/api/issues/export?workspaceId=ws_1&format=json`, { signal: client.signal }).catch(() => undefined);
    await wasCalled;
    client.abort();
    await pending;
    const began = Date.now();
    expect(await wasCancelled).toBe(true);
    expect(Date.now() - began).toBeLessThan(1_000);
  });
});
