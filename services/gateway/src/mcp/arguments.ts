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

/**
 * Validates tool arguments against each tool's input schema (JSON types are never coerced: a
 * number is not a string). The services check every rule again; this catches shape mistakes
 * before any call is made, with the field named.
 */
export function createArgumentValidator(catalog: readonly ToolDefinition[] = CATALOG) {
  const ajv = new Ajv({ allErrors: false, coerceTypes: false, useDefaults: false, strict: false });
  addFormats.default(ajv);
  const compiled = new Map<string, ValidateFunction>(catalog.map((t) => [t.name, ajv.compile(t.inputSchema)]));
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
