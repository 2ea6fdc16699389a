/**
 * The MCP endpoint's half that runs the official SDK: the modern (2026-07-28) handler and the
 * per-request stateless transport for session-era clients, over one server factory. route.ts
 * loads this module with `import()` on the endpoint's first POST, so a gateway that serves no MCP
 * traffic never loads the SDK (its protocol schemas are several MB of heap: see
 * docs/benchmarks.md, idle memory).
 */
import { createMcpHandler, isLegacyRequest, WebStandardStreamableHTTPServerTransport, type McpHttpHandler } from '@modelcontextprotocol/server';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { authInfoFor, createServerFactory, type McpCallState } from './server.js';

export interface McpEngine {
  /** Whether a request speaks a session-era revision (`initialize` handshake) rather than 2026-07-28. */
  isLegacy(webRequest: Request, parsedBody: unknown): Promise<boolean>;
  /** Serves one message; `parsedBody` is absent when the body is not JSON (the SDK answers -32700). */
  serve(webRequest: Request, state: McpCallState, legacy: boolean, parsed: { ok: boolean; value: unknown }): Promise<Response>;
  close(): Promise<void>;
}

/**
 * The SDK prints a notice to the console whenever a handler answers in JSON (mid-call
 * notifications are dropped; this endpoint sends none). JSON is the documented choice here, so
 * that one line is kept out of the service's structured logs; every other warning passes.
 */
function withoutJsonModeNotice<T>(create: () => T): T {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].startsWith("responseMode: 'json' drops mid-call notifications")) return;
    warn(...args);
  };
  try {
    return create();
  } finally {
    console.warn = warn;
  }
}

export function createMcpEngine(deps: GatewayDeps, logger: FastifyBaseLogger): McpEngine {
  const factory = createServerFactory(deps, logger);
  const onerror = (error: Error) => logger.debug({ err: error }, 'mcp request rejected');
  const modern: McpHttpHandler = withoutJsonModeNotice(() => createMcpHandler((ctx) => factory(ctx), { legacy: 'reject', responseMode: 'json', onerror }));

  const serveLegacy = async (webRequest: Request, state: McpCallState, parsed: { ok: boolean; value: unknown }): Promise<Response> => {
    const authInfo = authInfoFor(state);
    const server = factory({ authInfo });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      const response = await transport.handleRequest(webRequest, { authInfo, ...(parsed.ok ? { parsedBody: parsed.value } : {}) });
      // Read the body before the transport closes.
      return new Response(await response.text(), { status: response.status, headers: response.headers });
    } finally {
      await transport.close().catch(() => undefined);
      await server.close().catch(() => undefined);
    }
  };

  return {
    isLegacy: (webRequest, parsedBody) => isLegacyRequest(webRequest, parsedBody),
    serve: (webRequest, state, legacy, parsed) =>
      legacy ? serveLegacy(webRequest, state, parsed) : modern.fetch(webRequest, { authInfo: authInfoFor(state), ...(parsed.ok ? { parsedBody: parsed.value } : {}) }),
    close: () => modern.close(),
  };
}
