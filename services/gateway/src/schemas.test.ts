import { compileAllSchemas } from '@planning/runtime/http';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp } from './app.js';
import { inertDeps } from './document.js';

/**
 * The gateway compiles a route's request validators and response serializers when the route first
 * needs them, not at start (libs/runtime/src/http.ts, lazyValidator): a schema that cannot compile
 * would surface only on its route's first request, so this compiles all of them. The routes never
 * run: their dependencies are inert.
 */

let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

describe('gateway schemas', () => {
  it('gateway schemas: a request compiles only what its route uses; every route schema compiles', async () => {
    app = await buildApp(inertDeps());
    await app.ready();
    const bad = () => app!.inject({ method: 'POST', url: '/api/auth/login', payload: { email: 'someone@example.com' } });
    const first = await bad();
    expect(first.statusCode).toBe(400);
    expect(first.json()).toMatchObject({ error: { code: 'invalid-input', field: 'password' } });

    const { total, compiledBefore } = compileAllSchemas(app);
    // The login body's validator, perhaps the error body's serializer: a handful, not the gateway's hundreds.
    expect(compiledBefore).toBeGreaterThanOrEqual(1);
    expect(compiledBefore).toBeLessThan(5);
    expect(total).toBeGreaterThan(1000);

    // Compiled ahead of use, the validators answer as before, and a second pass compiles nothing.
    const again = await bad();
    expect({ status: again.statusCode, body: again.json() }).toEqual({ status: first.statusCode, body: first.json() });
    expect(compileAllSchemas(app)).toEqual({ total, compiledBefore: total });
  });
});
