import { buildApp } from './app.js';
import type { GatewayDeps } from './deps.js';
import { siteOf } from './oauth/site.js';

/**
 * The OpenAPI document, without a running service: the gateway's routes registered on an app
 * whose dependencies are inert (nothing is called while only the document is read). For the
 * generated client (`pnpm generate:client`), the Spectral lint and the document tests.
 */
export async function buildOpenApiDocument(): Promise<Record<string, unknown>> {
  const app = await buildApp(inertDeps());
  try {
    const res = await app.inject({ method: 'GET', url: '/docs/json' });
    return res.json<Record<string, unknown>>();
  } finally {
    await app.close();
  }
}

/** Dependencies nothing calls: every property is a function answering another such function. */
export function inertDeps(): GatewayDeps {
  const inert: unknown = new Proxy(function () {}, {
    get: (_target, key) => (key === 'then' ? undefined : inert),
    apply: () => inert,
  });
  const site = siteOf(undefined, { host: 'localhost', port: 8080 });
  const given: Record<PropertyKey, unknown> = {
    settings: { MCP_ALLOWED_ORIGINS: [] },
    // The MCP endpoint as an OAuth protected resource; the authorization server's own routes are hidden from the document anyway.
    oauth: { resource: { site, authorizationServers: [site.publicUrl] }, grants: inert },
  };
  return new Proxy(given, { get: (target, key) => (key in target ? target[key] : inert) }) as unknown as GatewayDeps;
}
