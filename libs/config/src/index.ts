/**
 * Environment configuration: each service describes its variables once with zod schemas keyed by
 * variable name; `loadEnv` parses them all and reports every problem together; `describeConfig`
 * renders a resolved configuration with secrets hidden (for `--print-config`).
 */
import { z } from 'zod';

export { z };

const secretSchemas = new WeakSet<z.ZodType>();

/** Marks a variable as secret: `--print-config` and logs show it as `[hidden]`. */
export function secret<T extends z.ZodType>(schema: T): T {
  secretSchemas.add(schema);
  return schema;
}

const TRUE_VALUES = new Set(['1', 'true', 'yes', 'on']);
const FALSE_VALUES = new Set(['0', 'false', 'no', 'off', '']);

/** Helpers for the shapes environment variables take. Every value arrives as a string. */
export const env = {
  string: () => z.string().trim().min(1, 'must not be empty'),
  int: (min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER) =>
    z
      .string()
      .trim()
      .regex(/^-?\d+$/, 'must be an integer')
      .transform(Number)
      .pipe(z.number().int().min(min).max(max)),
  port: () =>
    z
      .string()
      .trim()
      .regex(/^\d+$/, 'must be a port number')
      .transform(Number)
      .pipe(z.number().int().min(0).max(65535)),
  bool: () =>
    z
      .string()
      .trim()
      .toLowerCase()
      .refine((v) => TRUE_VALUES.has(v) || FALSE_VALUES.has(v), 'must be one of 1, 0, true, false, yes, no, on, off')
      .transform((v) => TRUE_VALUES.has(v)),
  url: (protocols: readonly string[]) =>
    z
      .string()
      .trim()
      .refine((v) => {
        try {
          return protocols.includes(new URL(v).protocol.replace(/:$/, ''));
        } catch {
          return false;
        }
      }, `must be a URL with scheme ${protocols.join(' or ')}`),
  /** A comma-separated list of URLs (e.g. several NATS servers). */
  urlList: (protocols: readonly string[]) =>
    z
      .string()
      .trim()
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      )
      .refine(
        (list) =>
          list.length > 0 &&
          list.every((v) => {
            try {
              return protocols.includes(new URL(v).protocol.replace(/:$/, ''));
            } catch {
              return false;
            }
          }),
        `must be a comma-separated list of URLs with scheme ${protocols.join(' or ')}`,
      ),
  /** host:port, as gRPC targets are written. */
  hostPort: () =>
    z
      .string()
      .trim()
      .regex(/^[A-Za-z0-9.\-_[\]:]+:\d{1,5}$/, 'must be host:port'),
  list: () =>
    z
      .string()
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      ),
  oneOf: <const T extends readonly [string, ...string[]]>(values: T) => z.enum(values),
};

export type EnvShape = Record<string, z.ZodType>;

export type EnvValues<S extends EnvShape> = { [K in keyof S]: z.output<S[K]> };

/** One problem with one variable. */
export interface ConfigProblem {
  variable: string;
  message: string;
}

export class ConfigError extends Error {
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    super(
      `Invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n` +
        problems.map((p) => `  - ${p.variable}: ${p.message}`).join('\n'),
    );
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export type LoadResult<T> = { ok: true; value: T } | { ok: false; problems: ConfigProblem[] };

/**
 * Parses the variables of `shape` from `source`. Unset and empty variables count as missing
 * (so `.optional()` and `.default()` apply). Returns every problem, not only the first.
 */
export function loadEnv<S extends EnvShape>(shape: S, source: NodeJS.ProcessEnv): LoadResult<EnvValues<S>> {
  const input: Record<string, string | undefined> = {};
  for (const key of Object.keys(shape)) {
    const raw = source[key];
    input[key] = raw === undefined || raw.trim() === '' ? undefined : raw;
  }
  const result = z.object(shape).safeParse(input);
  if (result.success) return { ok: true, value: result.data as EnvValues<S> };
  const problems = result.error.issues.map((issue) => ({
    variable: String(issue.path[0] ?? '(config)'),
    message: issue.code === 'invalid_type' && input[String(issue.path[0])] === undefined ? 'is required' : issue.message,
  }));
  return { ok: false, problems };
}

function isSecret(schema: z.ZodType | undefined): boolean {
  let current: unknown = schema;
  // Unwrap optional/default/pipe wrappers to find a schema marked secret.
  for (let depth = 0; depth < 8 && current; depth++) {
    if (secretSchemas.has(current as z.ZodType)) return true;
    const def = (current as { def?: { innerType?: unknown; in?: unknown } }).def;
    current = def?.innerType ?? def?.in;
  }
  return false;
}

/** The resolved values of `shape` with secrets replaced by `[hidden]` (unset secrets stay unset). */
export function describeEnv<S extends EnvShape>(shape: S, values: EnvValues<S>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(shape)) {
    const value = (values as Record<string, unknown>)[key];
    out[key] = isSecret(shape[key]) && value !== undefined ? '[hidden]' : value;
  }
  return out;
}
