/**
 * Output schemas that hold: each tool's `outputSchema` is its REST twin's response schema (the
 * same JSON mappers build both bodies), made exact and portable, or the refusal body. Exact: every
 * object closes (`additionalProperties: false`) and keeps its `required` list, so a validating
 * host learns the shape and a drift between mapper and schema fails validation. Portable: no type
 * arrays (`["string", "null"]` becomes `anyOf` of single types, which MCP Inspector and strict
 * validators accept), no `{}` placeholders, no `$id`s. A schema that cannot be made exact (an
 * open object, an untyped value) throws when the catalog loads, so it never reaches the wire.
 */
import { ERROR_CODES } from '@planning/errors';
import { safeActionSchema } from '../routes/planning-json.js';
import { mcpSafeActionSchema } from './next-actions.js';

type Json = Record<string, unknown>;

/** Keywords that belong to one JSON type (they move into that type's branch when a type array is split). */
const TYPE_KEYWORDS: Readonly<Record<string, readonly string[]>> = {
  object: ['properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties', 'patternProperties', 'propertyNames'],
  array: ['items', 'minItems', 'maxItems', 'uniqueItems', 'prefixItems', 'contains'],
  string: ['minLength', 'maxLength', 'pattern', 'format'],
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'],
  integer: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'],
  boolean: [],
  null: [],
};
const COMBINATORS = ['anyOf', 'oneOf', 'allOf'] as const;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

const valueHasType = (value: unknown, type: string): boolean =>
  type === 'null' ? value === null : type === 'integer' ? Number.isInteger(value) : type === 'array' ? Array.isArray(value) : typeof value === type;

/** `{ type: [a, b], ... }` as `{ anyOf: [{ type: a, ... }, { type: b, ... }] }`, each branch with its own keywords. */
function splitTypes(schema: Json, types: readonly string[]): Json {
  const typed = new Set(types.flatMap((t) => TYPE_KEYWORDS[t] ?? []));
  const shared: Json = {};
  for (const [key, value] of Object.entries(schema)) if (key !== 'type' && key !== 'enum' && !typed.has(key)) shared[key] = value;
  const branches = types.map((type) => {
    const branch: Json = { type };
    for (const key of TYPE_KEYWORDS[type] ?? []) if (key in schema) branch[key] = schema[key];
    if (Array.isArray(schema.enum)) branch.enum = schema.enum.filter((v) => valueHasType(v, type));
    return branch;
  });
  return { ...shared, anyOf: branches };
}

/** Subschemas whose MCP form differs from REST's, by identity: over MCP, safe next actions name tools (next-actions.ts). */
export const MCP_FORMS: ReadonlyMap<object, object> = new Map<object, object>([[safeActionSchema, mcpSafeActionSchema]]);

/**
 * The exact, portable form of a JSON schema (see the module comment), with each subschema that is
 * a key of `forms` replaced by its value. `path` names the place in error messages.
 */
export function exactSchema(schema: unknown, path = '$', forms: ReadonlyMap<object, object> = new Map()): Json {
  if (!isObject(schema)) throw new Error(`${path}: a schema must be an object`);
  const form = forms.get(schema);
  if (form) return exactSchema(form, path, forms);
  if (Array.isArray(schema.type)) return exactSchema(splitTypes(schema, schema.type as string[]), path, forms);
  if (typeof schema.$ref === 'string') throw new Error(`${path}: $ref ${schema.$ref} is not resolved here; inline the schema`);
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$id') continue;
    if (key === 'properties') {
      if (!isObject(value)) throw new Error(`${path}.properties must be an object`);
      out.properties = Object.fromEntries(Object.entries(value).map(([name, s]) => [name, exactSchema(s, `${path}.${name}`, forms)]));
    } else if (key === 'items') {
      out.items = exactSchema(value, `${path}[]`, forms);
    } else if ((COMBINATORS as readonly string[]).includes(key)) {
      if (!Array.isArray(value)) throw new Error(`${path}.${key} must be an array`);
      out[key] = value.map((s, i) => exactSchema(s, `${path}.${key}[${i}]`, forms));
    } else {
      out[key] = value;
    }
  }
  const hasShape = 'type' in out || 'enum' in out || 'const' in out || COMBINATORS.some((k) => k in out);
  if (!hasShape) throw new Error(`${path}: an untyped schema ({}) says nothing about the value`);
  if (out.type === 'object') {
    if (out.additionalProperties === undefined) out.additionalProperties = false;
    else if (out.additionalProperties !== false) throw new Error(`${path}: an open object is not an exact shape`);
    if (!isObject(out.properties)) throw new Error(`${path}: an object schema needs its properties`);
    const missing = ((out.required as string[] | undefined) ?? []).filter((name) => !(name in (out.properties as Json)));
    if (missing.length > 0) throw new Error(`${path}: required ${missing.join(', ')} not among the properties`);
  }
  if (out.type === 'array' && out.items === undefined) throw new Error(`${path}: an array schema needs its items`);
  return out;
}

/** The body of a refusal (`isError: true`): the REST error envelope, as `ServiceError.toBody()` writes it. */
export const REFUSAL_SCHEMA: Json = exactSchema({
  type: 'object',
  description: 'A refusal (isError): the REST error body.',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', enum: [...ERROR_CODES] },
        message: { type: 'string' },
        reason: { type: 'string', description: 'e.g. not-ready, active-claim, stale-claim, invalid-transition, evidence-missing, approval-pending, approval-required.' },
        field: { type: 'string' },
        quota: {
          type: 'object',
          required: ['kind', 'limit', 'used', 'resetsAt'],
          properties: { kind: { type: 'string' }, limit: { type: 'integer' }, used: { type: 'integer' }, resetsAt: { type: 'string', format: 'date-time' } },
        },
        failedIds: { type: 'array', items: { type: 'string' } },
        missingCheckIds: { type: 'array', items: { type: 'string' } },
      },
    },
  },
});

/**
 * A tool's `outputSchema`: its success body (the REST twin's 200/201 response schema, with the
 * MCP forms of `MCP_FORMS`) or the refusal body. The root stays `type: object` (MCP requires it);
 * `anyOf` picks the branch.
 */
export function toolOutputSchema(success: object): Json {
  return { type: 'object', anyOf: [successOf(success), REFUSAL_SCHEMA] };
}

/** The success branch for a REST response schema (its `description` says "Success"; the branch needs none). */
export function successOf(rest: object): Json {
  const { description: _description, ...body } = rest as Json;
  return exactSchema(body, '$success', MCP_FORMS);
}

/** The success branch of a tool's output schema. */
export function successSchemaOf(outputSchema: Json): Json {
  return (outputSchema.anyOf as Json[])[0]!;
}
