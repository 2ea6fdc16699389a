/* eslint-disable @typescript-eslint/no-explicit-any -- answers are whatever the server sent; tests assert on them. */
import { connect } from 'node:net';
import { ServiceError } from '@planning/errors';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp, MAX_REQUEST_LINE_BYTES } from './http.js';

/**
 * Everything the HTTP layer refuses — the parser, the router, the body and query parsers — answers
 * in the one envelope with the right 4xx, over a real socket (the parser's refusals never reach
 * `inject`).
 */

let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  app = createHttpApp();
  app.get('/items/:id', { schema: { params: { type: 'object', properties: { id: { type: 'string', maxLength: 64 } } } } }, async (request) => ({
    data: request.params,
  }));
  app.get(
    '/list',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { limit: { type: 'integer', minimum: 1, maximum: 200 }, n: { type: 'number' } } } } },
    async (request) => ({ data: request.query }),
  );
  app.post('/things', { schema: { body: { type: 'object', properties: { name: { type: 'string' } } } } }, async (request) => ({ data: request.body }));
  app.get('/boom', async () => {
    throw new Error('the database said no at 10.0.0.7:27017');
  });
  app.get('/down', async () => {
    throw new ServiceError('unavailable', 'planning.issues.v1.TaskService/GetTask cannot be reached; try again shortly');
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as { port: number }).port;
});

afterAll(async () => {
  await app.close();
});

/** Sends `head` (and then `body`, slowly if large) on a raw socket and returns the parsed answer. */
function raw(head: string, body = ''): Promise<{ status: number; headers: string; json: any }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err) => reject(err));
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (!match) return reject(new Error(`no answer: ${JSON.stringify(text.slice(0, 200))}`));
      const split = text.indexOf('\r\n\r\n');
      resolve({ status: Number(match[1]), headers: text.slice(0, split), json: JSON.parse(text.slice(split + 4)) });
    });
    socket.on('connect', () => {
      socket.write(head);
      if (body) socket.write(body);
    });
  });
}

const get = (path: string, headers = '') => raw(`GET ${path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n${headers}\r\n`);

describe('http errors', () => {
  it('http errors: a malformed percent-encoding in the path is 400 naming the path, not a framework body', async () => {
    const res = await get('/items/%E0%A4%A');
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: { code: 'invalid-input', message: expect.any(String), field: 'path' } });
  });

  it('http errors: a request line over 8 KiB is 414 naming the url', async () => {
    const res = await get(`/items/${'a'.repeat(MAX_REQUEST_LINE_BYTES + 10)}`);
    expect(res.status).toBe(414);
    expect(res.json.error).toMatchObject({ code: 'uri-too-long', field: 'url' });
  });

  it('http errors: a path over the parser limit is 414 as well', async () => {
    const res = await get(`/items/${'a'.repeat(100_000)}`);
    expect(res.status).toBe(414);
    expect(res.json.error).toMatchObject({ code: 'uri-too-long', field: 'url' });
  });

  it('http errors: headers over 16 KiB are 431 naming the headers', async () => {
    const res = await get('/list', `x-big: ${'a'.repeat(20_000)}\r\n`);
    expect(res.status).toBe(431);
    expect(res.json.error).toMatchObject({ code: 'headers-too-large', field: 'headers' });
  });

  it('http errors: a 1 MB query string gets its 414 answer, the connection is not reset', async () => {
    const res = await raw(`GET /list?q=${'a'.repeat(1_000_000)} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`);
    expect(res.status).toBe(414);
    expect(res.json.error.code).toBe('uri-too-long');
  });

  it('http errors: a request that is not HTTP is 400 in the envelope', async () => {
    const res = await raw('NOT HTTP AT ALL\r\n\r\n');
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: 'invalid-input', field: 'request' });
  });

  it.each(['Infinity', '-Infinity', '1e309', '-1e309'])('http errors: limit=%s is 400 naming limit, never 500', async (value) => {
    const res = await app.inject({ method: 'GET', url: `/list?limit=${value}` });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'invalid-input', field: 'limit' });
    const number = await app.inject({ method: 'GET', url: `/list?n=${value}` });
    expect(number.statusCode).toBe(400);
    expect(number.json().error).toMatchObject({ code: 'invalid-input', field: 'n' });
  });

  it('http errors: numbers in bounds still pass, coerced', async () => {
    const res = await app.inject({ method: 'GET', url: '/list?limit=2e1&n=-3.5' });
    expect(res.json()).toEqual({ data: { limit: 20, n: -3.5 } });
  });

  it('http errors: a long path parameter is 400 naming it (its schema), not a router 414', async () => {
    const res = await app.inject({ method: 'GET', url: `/items/${'a'.repeat(300)}` });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'invalid-input', field: 'id' });
  });

  it('http errors: malformed, empty and oversized JSON bodies are 4xx naming the body', async () => {
    const malformed = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'application/json' }, payload: '{"name":' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error).toMatchObject({ code: 'invalid-input', field: 'body' });
    const empty = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'application/json' }, payload: '' });
    expect(empty.json().error).toMatchObject({ code: 'invalid-input', field: 'body' });
    const huge = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'application/json' }, payload: `{"name":"${'a'.repeat(2 * 1024 * 1024)}"}` });
    expect(huge.statusCode).toBe(413);
    expect(huge.json().error).toMatchObject({ code: 'payload-too-large', field: 'body' });
    const proto = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'application/json' }, payload: '{"__proto__":{"x":1}}' });
    expect(proto.statusCode).toBe(400);
    expect(proto.json().error.code).toBe('invalid-input');
  });

  it('http errors: a 500 says what failed and carries the request id, never the cause', async () => {
    const res = await app.inject({ method: 'GET', url: '/boom' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: { code: 'internal', message: 'The service failed to complete GET /boom', requestId: expect.stringMatching(/^req_[0-9a-f]{16}$/) } });
    expect(res.body).not.toContain('10.0.0.7');
  });

  it('http errors: a 503 names the service, not its gRPC method, and carries the request id', async () => {
    const res = await app.inject({ method: 'GET', url: '/down' });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toEqual({ code: 'unavailable', message: 'The issues service cannot be reached; try again shortly', requestId: expect.stringMatching(/^req_/) });
  });

  it('http errors: a token pasted into an unknown path is not echoed back', async () => {
    const token = `svc_${'A1b2C3d4'.repeat(5)}abc123456`;
    const res = await app.inject({ method: 'GET', url: `/nothing/${token}` });
    expect(res.statusCode).toBe(404);
    expect(res.body).not.toContain(token.slice(4));
    expect(res.json().error.message).toContain('svc_[redacted]');
  });
});
