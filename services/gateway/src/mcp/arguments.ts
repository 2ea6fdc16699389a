import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { CATALOG, type ToolDefinition } from './catalog.js';

/** A tool call's arguments that do not fit the tool's input schema: the field and why. */
export interface ArgumentProblem {
  field: string;
  message: string;
}

/** `/agent/instructions/verification/0` → `agent.instructions.verification[0]` (how the services name fields). */
function fieldOf(error: ErrorObject): string {
  const parts = error.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  const params = error.params as { missingProperty?: string; additionalProperty?: string };
  const extra = params.missingProperty ?? params.additionalProperty;
  if (extra !== undefined) parts.push(extra);
  return parts.reduce((path, p) => (/^\d+$/.test(p) ? `${path}[${p}]` : path ? `${path}.${p}` : p), '') || 'arguments';
}

function describe(error: ErrorObject): string {
  if (error.keyword === 'additionalProperties') return 'is not an argument of this tool';
  if (error.keyword === 'required') return 'is required';
  if (error.keyword === 'enum') return `must be one of ${((error.params as { allowedValues?: unknown[] }).allowedValues ?? []).map(String).join(', ')}`;
  return error.message ?? 'is invalid';
}

const INT32_MAX = 2 ** 31 - 1;

/**
 * A tool's input schema as checked: every integer the listed schema leaves unbounded above (a
 * fencing token, a version: values the service hands out, which the model copies rather than
 * invents, so the list spares it the bound) is an int32 field of the service's request, and is held
 * to that here, so a larger value is refused naming the argument rather than as an unnamed
 * out-of-range value.
 */
function checkedSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(checkedSchema);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, checkedSchema(value)]));
  if (out.type === 'integer' && out.maximum === undefined) out.maximum = INT32_MAX;
  return out;
}

/**
 * Validates tool arguments against each tool's input schema (JSON types are never coerced: a
 * number is not a string). The services check every rule again; this catches shape mistakes
 * before any call is made, with the field named.
 */
export function createArgumentValidator(catalog: readonly ToolDefinition[] = CATALOG) {
  const ajv = new Ajv({ allErrors: false, coerceTypes: false, useDefaults: false, strict: false });
  addFormats.default(ajv);
  const compiled = new Map<string, ValidateFunction>(catalog.map((t) => [t.name, ajv.compile(checkedSchema(t.inputSchema) as object)]));
  return (tool: ToolDefinition, args: unknown): ArgumentProblem | undefined => {
    const validate = compiled.get(tool.name);
    if (!validate) throw new Error(`no schema for tool ${tool.name}`);
    if (validate(args ?? {})) return undefined;
    const error = validate.errors?.[0];
    if (!error) return { field: 'arguments', message: "Invalid argument 'arguments'" };
    const field = fieldOf(error);
    return { field, message: `Invalid argument '${field}': ${describe(error)}` };
  };
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A service's `invalid-input` as a problem with the tool's arguments: the service names the field
 * of its own request (`id`, the `idempotency-key` header, `tags`), the tool's caller knows only the
 * tool's arguments (`issueId`, `idempotencyKey`, `tag`). Renames the field (and nested paths under
 * it: `tags[0]` → `tag[0]`) and its mentions in the message by the tool's `serviceFields`; fields
 * the tool does not rename are its arguments already.
 */
export function argumentProblemOf(tool: ToolDefinition, field: string | undefined, message: string): { field?: string; message: string } {
  if (field === undefined) return { message };
  const renames = tool.serviceFields ?? {};
  const from = Object.keys(renames)
    .sort((a, b) => b.length - a.length)
    .find((f) => field === f || field.startsWith(`${f}.`) || field.startsWith(`${f}[`));
  if (from === undefined) return { field, message };
  const to = renames[from]!;
  const renamed = `${to}${field.slice(from.length)}`;
  // "The 'idempotency-key' header must …" → "'idempotencyKey' must …"; "'id' is required" → "'issueId' is required".
  const text = message.replace(new RegExp(`(?:The )?'${escape(from)}((?:[.[][^']*)?)'(?: header)?`, 'g'), (_m, rest: string) => `'${to}${rest}'`);
  // "'issueId' is required" → "Invalid argument 'issueId': is required" (as the schema check words it).
  const lead = /^'([^']+)' (.*)$/s.exec(text);
  return { field: renamed, message: lead ? `Invalid argument '${lead[1]}': ${lead[2]}` : text };
}
