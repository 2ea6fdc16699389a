/**
 * Guidance asked over MCP names MCP tools. The services word their advice for REST (a safe next
 * action "Set a due date (PATCH /api/issues/{id} dueDate)", a next action "Claim it (POST
 * /api/agents/claim)"), which is what REST callers get. Over MCP every `safeNextActions` entry
 * names the tool to call, in the caller's list's name style, with the arguments it already knows
 * (the task id), and REST calls mentioned in `nextAction` texts and refusal messages become tool
 * names.
 */
import { wireName, type ToolView } from './naming.js';

/** A safe next action as MCP callers get it. */
export interface McpSafeAction {
  action: string;
  description: string;
  /** The tool to call, as the caller's list names it; null for an action no tool takes. */
  tool: string | null;
  /** The arguments known already; the description names the ones to add. */
  arguments: { issueId?: string; includeDependencyGraph?: boolean };
}

/** `safeNextActions` items over MCP (exact: every key the entries below use). */
export const mcpSafeActionSchema = {
  type: 'object',
  required: ['action', 'description', 'tool', 'arguments'],
  properties: {
    action: { type: 'string' },
    description: { type: 'string', description: 'What to do, naming the tool and the arguments to add.' },
    tool: { type: ['string', 'null'], description: 'The tool to call.' },
    arguments: {
      type: 'object',
      description: 'Arguments already known (the task id).',
      properties: { issueId: { type: 'string' }, includeDependencyGraph: { type: 'boolean' } },
    },
  },
} as const;

interface ActionForm {
  tool: string;
  arguments: (issueId: string | undefined) => McpSafeAction['arguments'];
  /** `{tool}` and `{name}` are replaced by wire names. */
  describe: string;
}

const onTask = (issueId: string | undefined) => (issueId ? { issueId } : {});

/** Each action the issues service advises (services/issues task-health), as a tool call. */
const MCP_FORMS: Readonly<Record<string, ActionForm>> = {
  'reschedule-or-escalate': { tool: 'update_issue', arguments: onTask, describe: 'Agree a new due date ({tool} with dueDate) or ask to continue late ({request_approval})' },
  'post-status': { tool: 'add_comment', arguments: onTask, describe: 'Post a status update as a comment ({tool} with body)' },
  'log-time': { tool: 'log_time', arguments: onTask, describe: 'Log the time spent so far ({tool} with minutes)' },
  'set-due-date': { tool: 'update_issue', arguments: onTask, describe: 'Set a due date ({tool} with dueDate, YYYY-MM-DD)' },
  'check-status': { tool: 'get_task_contract', arguments: onTask, describe: "Only 'ready' tasks can be claimed; read the task before acting ({tool})" },
  'finish-dependencies': {
    tool: 'search_issues',
    arguments: () => ({ includeDependencyGraph: true }),
    describe: 'Finish or unblock the open dependencies first ({tool} with includeDependencyGraph shows them)',
  },
  'pick-other-work': { tool: 'list_ready_work', arguments: () => ({}), describe: 'Pick other ready work ({tool})' },
  claim: { tool: 'claim_work', arguments: onTask, describe: 'Claim the task to start work ({tool})' },
};

/** REST calls the services mention in advice and messages, and the tool that does the same. */
const REST_TWINS: Readonly<Record<string, string>> = {
  'POST /api/agents/claim': 'claim_work',
  'PATCH /api/issues/{id}': 'update_issue',
  'POST /api/issues/{id}/comments': 'add_comment',
  'POST /api/issues/{id}/time-entries': 'log_time',
  'POST /api/issues/{id}/evidence': 'add_evidence',
  'POST /api/issues/{id}/approvals': 'request_approval',
};

const MENTION = /\b(GET|POST|PATCH|PUT|DELETE) (\/api\/[^\s),]+)/g;

/** A text with the REST calls it mentions named as tools (`(POST /api/agents/claim)` → `(service.claim_work)`). */
export function toolMentions(text: string, view: ToolView): string {
  return text.replace(MENTION, (mention: string, method: string, path: string) => {
    const tool = REST_TWINS[`${method} ${path}`];
    return tool ? wireName(tool, view.names) : mention;
  });
}

export function mcpSafeAction(a: { action: string; description: string }, issueId: string | undefined, view: ToolView): McpSafeAction {
  const form = MCP_FORMS[a.action];
  // An action this table does not know yet keeps the service's words, with any REST call renamed.
  if (!form) return { action: a.action, description: toolMentions(a.description, view), tool: null, arguments: {} };
  const tool = wireName(form.tool, view.names);
  const description = form.describe.replace(/\{(\w+)\}/g, (_m, name: string) => (name === 'tool' ? tool : wireName(name, view.names)));
  return { action: a.action, description, tool, arguments: form.arguments(issueId) };
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * A tool's structuredContent for MCP callers: the REST body with `safeNextActions` as tool calls
 * and REST mentions in `nextAction` and `message` texts as tool names. The task an action is about
 * is the nearest enclosing `issueId`, else `id` (an issue).
 */
export function forMcp<T>(value: T, view: ToolView, issueId?: string): T {
  if (Array.isArray(value)) return value.map((v) => forMcp(v, view, issueId)) as T;
  if (!isRecord(value)) return value;
  const id = typeof value.issueId === 'string' ? value.issueId : typeof value.id === 'string' ? value.id : issueId;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === 'safeNextActions' && Array.isArray(v)) out[key] = v.map((a) => mcpSafeAction(a as { action: string; description: string }, id, view));
    else if ((key === 'nextAction' || key === 'message') && typeof v === 'string') out[key] = toolMentions(v, view);
    else out[key] = forMcp(v, view, id);
  }
  return out as T;
}
