import { ProtocolError, ProtocolErrorCode, Server, type AuthInfo, type CallToolResult, type McpRequestContext, type Tool } from '@modelcontextprotocol/server';
import { ServiceError, toServiceError, publicMessage } from '@planning/errors';
import type { Principal } from '@planning/rpc';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { argumentProblemOf, createArgumentValidator } from './arguments.js';
import product from '../../../../package.json' with { type: 'json' };
import { DEFAULT_VIEW, listedTools, NAME_PREFIXES, requiredScopes, toolNamed, wireName, type ToolView } from './catalog.js';
import { forMcp, toolMentions } from './next-actions.js';
import { TOOL_HANDLERS } from './tools.js';

/** What one HTTP request hands its MCP server instance (through the SDK's `authInfo.extra`). */
export interface McpCallState {
  principal: Principal;
  view: ToolView;
}

/** `serverInfo`: the product and its release (the repository's package version). */
export const SERVER_INFO = { name: product.name, title: 'Planning service', version: product.version } as const;

const prefixed = (view: ToolView) => `Every tool name starts with "${NAME_PREFIXES[view.names]}" (e.g. ${wireName('search_issues', view.names)}).`;
const RETRIES = 'Reads are safe to retry; writes need issues:write and agents:execute and are not all idempotent (comments, time, evidence).';

/**
 * The server's `instructions` (the API document's rules for clients) for a toolset: they name
 * only tools that toolset lists, by their canonical (issue-named) names.
 */
export function instructionsFor(view: ToolView = DEFAULT_VIEW): string {
  if (view.toolset === 'core') {
    return [
      `Work planning for coding agents; this is the compact tool list. ${prefixed(view)}`,
      '1. Call list_ready_work first: your held task comes first; else claim the top claimable one with claim_work.',
      '2. Before claiming or changing a task, read taskHealth from search_issues and follow safeNextActions.',
      '3. After claiming: get_task_contract and get_context_pack; post_status before the lease expires; add_evidence per check; update_issue_status to in-review when verified.',
      `4. ${RETRIES}`,
      'Preflight, workspace customization, standards, launch readiness, knowledgebase, reminders, bootstrap and the task-named aliases are in the full list (the endpoint without toolset=core).',
    ].join('\n');
  }
  return [
    `Work planning for coding agents. ${prefixed(view)} Task-named aliases share the issue-named tools.`,
    '1. Call get_agent_preflight first and follow firstSessionDecision.',
    '2. Call get_workspace_customization and keep its views, rules, evidencePolicy and handoffPacket for the run.',
    '3. Before claiming or changing a task, read taskHealth from search_issues and follow safeNextActions (list_issue_reminders).',
    `4. ${RETRIES}`,
  ].join('\n');
}

/** The AuthInfo a request passes to the SDK: the principal, never the token. */
export function authInfoFor(state: McpCallState): AuthInfo {
  return { token: '', clientId: state.principal.keyId ?? state.principal.id, scopes: [...state.principal.scopes], extra: { planning: state } };
}

function stateOf(ctx: { authInfo?: AuthInfo }): McpCallState {
  const state = ctx.authInfo?.extra?.planning as McpCallState | undefined;
  // The route always passes it; a server reached without it has no caller to act for.
  if (!state) throw new ProtocolError(ProtocolErrorCode.InvalidRequest, 'Unauthenticated');
  return state;
}

function toolResult(body: object, isError = false): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body as Record<string, unknown>, ...(isError ? { isError: true } : {}) };
}

/**
 * The server factory of the endpoint: a fresh low-level SDK `Server` per HTTP request (the
 * endpoint is stateless in both protocol eras), with `tools/list` and `tools/call` over the tool
 * catalog. The SDK answers everything else of the protocol (initialize, server/discover, ping,
 * unknown methods with -32601). Tool errors follow the error table:
 * - arguments that do not fit the tool (`invalid-input`): JSON-RPC -32602 naming the field;
 * - unknown tool: -32602;
 * - any other refusal: a tool result with `isError: true` and `structuredContent` = the REST
 *   error body `{ error: { code, message, reason? } }`;
 * - an unexpected failure: -32603 with a generic message (the cause is logged).
 */
export function createServerFactory(deps: GatewayDeps, logger: FastifyBaseLogger) {
  const validate = createArgumentValidator();
  return (ctx: Pick<McpRequestContext, 'authInfo'>): Server => {
    const view = (ctx.authInfo?.extra?.planning as McpCallState | undefined)?.view ?? DEFAULT_VIEW;
    const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: instructionsFor(view) });
    server.setRequestHandler('tools/list', async () => {
      const state = stateOf(ctx);
      return { tools: listedTools(state.view.toolset, state.view.names) as Tool[] };
    });
    server.setRequestHandler('tools/call', async (request) => {
      const state = stateOf(ctx);
      const name = request.params.name;
      const tool = toolNamed(name);
      if (!tool) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool '${name}'`, { code: 'invalid-input', field: 'name' });
      const args = request.params.arguments ?? {};
      const problem = validate(tool, args);
      if (problem) throw new ProtocolError(ProtocolErrorCode.InvalidParams, problem.message, { code: 'invalid-input', field: problem.field });
      // The route refuses a missing scope with HTTP 403 before the call gets here; kept as a second gate.
      const missing = requiredScopes(tool).filter((s) => !state.principal.scopes.includes(s));
      if (missing.length > 0) {
        return toolResult(new ServiceError('forbidden', `The token lacks the scope ${missing.join(', ')} for ${wireName(tool.name, state.view.names)}`, { reason: 'missing-scope' }).toBody(), true);
      }
      const handler = TOOL_HANDLERS[tool.aliasOf ?? tool.name];
      if (!handler) throw new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error');
      try {
        const body = await handler(args as Record<string, unknown>, { deps, principal: state.principal, view: state.view });
        return server.projectCallToolResult(toolResult(forMcp(body, state.view)), tool.outputSchema);
      } catch (err) {
        const error = toServiceError(err);
        if (error.code === 'invalid-input') {
          // Named as the tool's arguments, not the service's request fields.
          const problem = argumentProblemOf(tool, error.details.field || undefined, toolMentions(publicMessage(error.message), state.view));
          throw new ProtocolError(ProtocolErrorCode.InvalidParams, problem.message, { code: 'invalid-input', ...(problem.field ? { field: problem.field } : {}) });
        }
        if (error.code === 'internal') {
          logger.error({ err, tool: tool.name }, 'mcp tool failed');
          throw new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error');
        }
        return toolResult(forMcp(error.toBody(), state.view), true);
      }
    });
    return server;
  };
}
