/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are whatever the server sent; tests assert on them. */
/** A small HTTP client for end-to-end suites: JSON in, JSON out, cookies and tokens by hand. */
export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body text (for malformed-JSON tests). */
  rawBody?: string;
  cookie?: string;
  token?: string;
  headers?: Record<string, string>;
}

export async function request<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined;
  if (options.rawBody !== undefined) {
    body = options.rawBody;
    headers['content-type'] ??= 'application/json';
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  if (options.cookie) headers.cookie = options.cookie;
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body, redirect: 'manual' });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON (e.g. CSV export)
  }
  return { status: res.status, body: parsed as T, headers: res.headers };
}

/** Signs in and returns the `service_session` cookie pair for later requests. */
export async function login(baseUrl: string, email: string, password: string): Promise<string> {
  const res = await request(baseUrl, 'POST', '/api/auth/login', { body: { email, password } });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${JSON.stringify(res.body)}`);
  const setCookie = res.headers.get('set-cookie') ?? '';
  const match = /service_session=([^;]+)/.exec(setCookie);
  if (!match) throw new Error('login set no service_session cookie');
  return `service_session=${match[1]}`;
}

/** Polls `fn` until it returns a truthy value or the timeout passes. */
export async function eventually<T>(fn: () => Promise<T | undefined | false>, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Sends a body the server is expected to refuse for its size (413) and returns the answer. The
 * server answers as soon as it sees the length and closes the connection, so the client may still
 * be writing (EPIPE, ECONNRESET): fetch reports that as a failure even when the answer arrived.
 * This waits for the answer and ignores a write cut short after it.
 */
export async function requestOversized(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<{ status: number; body: any }> {
  const { request: httpRequest } = await import('node:http');
  const payload = Buffer.from(options.rawBody ?? JSON.stringify(options.body ?? null), 'utf8');
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(payload.length), ...options.headers };
  if (options.cookie) headers.cookie = options.cookie;
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  return new Promise((resolve, reject) => {
    let answered = false;
    let failure: NodeJS.Timeout | undefined;
    const req = httpRequest(`${baseUrl}${path}`, { method, headers }, (res) => {
      answered = true;
      if (failure) clearTimeout(failure);
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', (err) => {
      // The answer may still be on its way after a write was cut: give it a moment.
      if (!answered) failure ??= setTimeout(() => reject(err), 2_000);
    });
    req.end(payload);
  });
}
