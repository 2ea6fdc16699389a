/* eslint-disable @typescript-eslint/no-explicit-any -- OpenAPI documents and answers are JSON; the helpers walk them. */
/**
 * Hostile requests for every route of the served OpenAPI document (the fuzz test), and raw-socket
 * requests the HTTP parser refuses. Values are chosen per schema type: non-finite, huge, negative
 * and fractional numbers; empty, huge, control-character, traversal and malformed-encoding
 * strings; wrong types; unknown fields; malformed and deeply nested JSON.
 */
import { connect } from 'node:net';

export interface HostileRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  what: string;
  /**
   * The request holds a number outside what the document allows for it (not finite, beyond its
   * minimum or maximum, a fraction where an integer is due): it must never be accepted.
   */
  outOfBounds?: boolean;
}

export interface Operation {
  method: string;
  path: string;
  op: any;
}

export function operationsOf(doc: any): Operation[] {
  const out: Operation[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (['get', 'post', 'put', 'patch', 'delete'].includes(method)) out.push({ method: method.toUpperCase(), path, op });
    }
  }
  return out;
}

const NUMBERS = ['Infinity', '-Infinity', '1e309', '-1e309', 'NaN', '-1', '0', '99999999999999999999', '1.5', '0x1A', '1e2'];
const STRINGS = ['', 'x'.repeat(5_000), '%00', '%E0%A4%A', '..%2F..%2Fetc%2Fpasswd', '%7B%22%24gt%22%3A%22%22%7D', '%3Cscript%3E', 'a%0D%0Ab'];
const PATH_VALUES = ['%E0%A4%A', 'a'.repeat(300), '..%2F..', '%00', '%20', "x'%3B--", '%F0%9F%92%A9'.repeat(20)];

/** Whether `value` (a query value as sent, or a JSON body value) is a number `schema` does not allow. */
function outside(schema: any, doc: any, value: string, source: 'query' | 'body'): boolean {
  const resolved = schema?.$ref ? resolveRef(doc, schema.$ref) : schema;
  const type = typeOf(resolved, doc);
  if (type !== 'integer' && type !== 'number') return false;
  if (source === 'body' && !/^-?[0-9]/.test(value)) return false; // a wrong type, not a number
  const n = source === 'query' ? (value.trim() === '' ? NaN : Number(value)) : (JSON.parse(value) as number);
  if (!Number.isFinite(n)) return true;
  if (type === 'integer' && !Number.isInteger(n)) return true;
  const below = resolved?.minimum !== undefined && n < resolved.minimum;
  const above = resolved?.maximum !== undefined && n > resolved.maximum;
  return below || above;
}

/** The type a parameter's or property's schema names first (resolving one `$ref` level in the document). */
function typeOf(schema: any, doc: any): string {
  const resolved = schema?.$ref ? resolveRef(doc, schema.$ref) : schema;
  const type = Array.isArray(resolved?.type) ? resolved.type.find((t: string) => t !== 'null') : resolved?.type;
  if (type) return type;
  if (resolved?.anyOf || resolved?.oneOf) return typeOf((resolved.anyOf ?? resolved.oneOf)[0], doc);
  return 'string';
}

export function resolveRef(doc: any, ref: string): any {
  return ref
    .replace(/^#\//, '')
    .split('/')
    .reduce((node: any, part: string) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
}

function valuesFor(type: string): string[] {
  if (type === 'integer' || type === 'number') return NUMBERS;
  if (type === 'boolean') return ['maybe', '2', '', 'TRUE '];
  return STRINGS;
}

/** A JSON body value of the wrong kind (and some right kinds out of bounds) for a property of `type`. */
function bodyValuesFor(type: string): string[] {
  const deepArray = `${'['.repeat(3_000)}${']'.repeat(3_000)}`;
  switch (type) {
    case 'integer':
    case 'number':
      return ['"12"', 'true', '1e309', '-1e309', '-1', '1.5', '99999999999999999999', 'null', '{}'];
    case 'boolean':
      return ['"true"', '1', 'null', '[]'];
    case 'array':
      return ['"x"', '{}', 'null', `[${Array.from({ length: 5_000 }, () => '"a"').join(',')}]`, '[1,{},null]', deepArray];
    case 'object':
      return ['"x"', '[]', '42', 'null', `{${Array.from({ length: 2_000 }, (_, i) => `"k${i}":1`).join(',')}}`];
    default:
      return ['42', 'true', '{}', '[]', 'null', JSON.stringify('x'.repeat(100_000)), '"\\u0000\\ud800"'];
  }
}

/** A valid-looking value for each path parameter (so other parts can be tested behind it). */
function plainPath(path: string): string {
  return path.replace(/\{[^}]+\}/g, 'zz_fuzz_id');
}

/** Every hostile request for one operation. */
export function hostileRequests({ method, path, op }: Operation, doc: any): HostileRequest[] {
  const out: HostileRequest[] = [];
  const params = (op.parameters ?? []) as any[];
  const json = { 'content-type': 'application/json' };
  const bodySchema = op.requestBody?.content?.['application/json']?.schema;
  const baseBody = bodySchema ? '{}' : undefined;
  const withBody = (r: HostileRequest): HostileRequest => (r.body === undefined && baseBody !== undefined ? { ...r, body: baseBody, headers: { ...json, ...r.headers } } : r);

  for (const p of params.filter((p) => p.in === 'path')) {
    for (const value of PATH_VALUES) out.push(withBody({ method, path: path.replace(`{${p.name}}`, value).replace(/\{[^}]+\}/g, 'zz_fuzz_id'), what: `path ${p.name}=${value.slice(0, 20)}` }));
  }
  const base = plainPath(path);
  for (const p of params.filter((p) => p.in === 'query')) {
    for (const value of valuesFor(typeOf(p.schema, doc))) {
      out.push(withBody({ method, path: `${base}?${p.name}=${value}`, what: `query ${p.name}=${value.slice(0, 20)}`, outOfBounds: outside(p.schema, doc, value, 'query') }));
    }
    out.push(withBody({ method, path: `${base}?${p.name}=1&${p.name}=2&${p.name}=${'y'.repeat(300)}`, what: `query ${p.name} repeated` }));
  }
  out.push(withBody({ method, path: `${base}?zz_unknown=1`, what: 'unknown query parameter' }));
  for (const p of params.filter((p) => p.in === 'header')) {
    out.push(withBody({ method, path: base, headers: { [p.name]: 'x'.repeat(5_000) }, what: `header ${p.name} huge` }));
  }
  if (bodySchema) {
    const schema = bodySchema.$ref ? resolveRef(doc, bodySchema.$ref) : bodySchema;
    for (const raw of ['{"a":', '[]', 'null', '"string"', '42', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}', `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`]) {
      out.push({ method, path: base, headers: json, body: raw, what: `body ${raw.slice(0, 20)}` });
    }
    out.push({ method, path: base, headers: { 'content-type': 'text/plain' }, body: 'hello', what: 'body as text/plain' });
    out.push({ method, path: base, headers: { 'content-type': 'application/json; charset=latin1' }, body: '{}', what: 'body with an odd charset' });
    out.push({ method, path: base, headers: json, body: '{"zz_unknown_field":1}', what: 'body unknown field' });
    for (const [name, property] of Object.entries<any>(schema?.properties ?? {})) {
      for (const value of bodyValuesFor(typeOf(property, doc))) {
        out.push({ method, path: base, headers: json, body: `{"${name}":${value}}`, what: `body ${name}=${value.slice(0, 20)}`, outOfBounds: outside(property, doc, value, 'body') });
      }
    }
  }
  return out;
}

/** Sends raw bytes and reads the answer (status and body), for what the HTTP parser refuses. */
export function rawRequest(baseUrl: string, bytes: string): Promise<{ status: number; body: string }> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (!match) return reject(new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 100))}`));
      resolve({ status: Number(match[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
    socket.on('connect', () => socket.write(bytes));
  });
}
