/**
 * Spans and metrics for MCP requests, after the OpenTelemetry MCP semantic conventions: a SERVER
 * span named `{mcp.method.name} {target}` (`tools/call create_task`), with the method, the tool
 * name, the JSON-RPC request id and the protocol version as attributes, and the
 * `mcp.server.operation.duration` histogram by method, tool and outcome.
 */
import { SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';
import { recordMcpOperation } from './instruments.js';

export interface McpRequestInfo {
  /** `mcp.method.name`: `tools/call`, `tools/list`, `initialize`, ... */
  method: string;
  /** `gen_ai.tool.name`, for `tools/call`. */
  toolName?: string;
  /** `jsonrpc.request.id`. */
  requestId?: string | number;
  /** `mcp.protocol.version`, as negotiated. */
  protocolVersion?: string;
  /** `mcp.session.id`, for session-era clients. */
  sessionId?: string;
}

/**
 * What a finished request reports: `errorType` for a failure (a JSON-RPC error code such as
 * `-32602`, or `tool_error` for a tool result flagged `isError`), nothing for success.
 */
export type McpOutcome = { errorType?: string };

/** The methods of the MCP specification; anything else is reported as `_OTHER` (attribute values stay bounded). */
const KNOWN_METHODS = new Set([
  'initialize',
  'ping',
  'server/discover',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/read',
  'resources/templates/list',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'subscriptions/listen',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
]);

/**
 * The telemetry view of one JSON-RPC message: its method (or `_OTHER`), its id, and, for
 * `tools/call`, the tool as `toolName` names it (undefined for an unknown tool: `_OTHER`).
 */
export function mcpRequestInfo(
  message: unknown,
  protocolVersion: string | undefined,
  toolName: (name: string) => string | undefined,
): McpRequestInfo | undefined {
  if (!message || typeof message !== 'object') return undefined;
  const { method, id, params } = message as { method?: unknown; id?: unknown; params?: { name?: unknown } };
  if (typeof method !== 'string') return undefined;
  const known = KNOWN_METHODS.has(method) ? method : '_OTHER';
  return {
    method: known,
    ...(known === 'tools/call' ? { toolName: (typeof params?.name === 'string' ? toolName(params.name) : undefined) ?? '_OTHER' } : {}),
    ...(typeof id === 'string' || typeof id === 'number' ? { requestId: id } : {}),
    ...(protocolVersion ? { protocolVersion } : {}),
  };
}

/** The outcome of a JSON-RPC response body: the error's code, `tool_error` for a tool result flagged isError. */
export function mcpOutcomeOf(body: string): McpOutcome {
  if (!body) return {};
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown }; result?: { isError?: unknown } };
    if (parsed.error) return { errorType: String(parsed.error.code ?? 'error') };
    if (parsed.result?.isError === true) return { errorType: 'tool_error' };
    return {};
  } catch {
    return { errorType: 'invalid_response' };
  }
}

/**
 * Runs `fn` (the handling of one MCP request) in its span and records its duration. `outcome`
 * reads the result; a throw counts as an error of its constructor's name.
 */
export async function withMcpSpan<T>(request: McpRequestInfo, fn: () => Promise<T>, outcome: (result: T) => McpOutcome = () => ({})): Promise<T> {
  const attributes: Attributes = {
    'mcp.method.name': request.method,
    ...(request.toolName ? { 'gen_ai.tool.name': request.toolName, 'gen_ai.operation.name': 'execute_tool' } : {}),
    ...(request.requestId !== undefined ? { 'jsonrpc.request.id': String(request.requestId) } : {}),
    ...(request.protocolVersion ? { 'mcp.protocol.version': request.protocolVersion } : {}),
    ...(request.sessionId ? { 'mcp.session.id': request.sessionId } : {}),
  };
  const name = request.toolName ? `${request.method} ${request.toolName}` : request.method;
  const started = performance.now();
  return trace.getTracer('planning-mcp').startActiveSpan(name, { kind: SpanKind.SERVER, attributes }, async (span) => {
    let errorType: string | undefined;
    try {
      const result = await fn();
      errorType = outcome(result).errorType;
      return result;
    } catch (err) {
      errorType = err instanceof Error ? err.constructor.name : 'Error';
      span.recordException(err instanceof Error ? err : String(err));
      throw err;
    } finally {
      if (errorType) {
        span.setAttribute('error.type', errorType);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
      recordMcpOperation({
        method: request.method,
        ...(request.toolName ? { toolName: request.toolName } : {}),
        ...(request.protocolVersion ? { protocolVersion: request.protocolVersion } : {}),
        seconds: (performance.now() - started) / 1000,
        ...(errorType ? { errorType } : {}),
      });
    }
  });
}
