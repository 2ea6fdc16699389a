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
 * Sends a request whose body the server is expected to refuse for its size (413) and returns the
 * answer. The server decides on the Content-Length header and closes the connection; a client
 * that is still writing then gets EPIPE or a reset, which can lose the answer. So only the
 * headers go out at first; the body follows only if no answer came within a second.
 */
export async function requestOversized(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<{ status: number; body: any }> {
  const { connect } = await import('node:net');
  const url = new URL(path, baseUrl);
  const payload = Buffer.from(options.rawBody ?? JSON.stringify(options.body ?? null), 'utf8');
  const headers: Record<string, string> = {
    host: url.host,
    'content-type': 'application/json',
    'content-length': String(payload.length),
    connection: 'close',
    ...options.headers,
  };
  if (options.cookie) headers.cookie = options.cookie;
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    let bodyTimer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (bodyTimer) clearTimeout(bodyTimer);
      const raw = Buffer.concat(chunks).toString('utf8');
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(raw);
      if (!match) {
        reject(new Error(`no HTTP answer to an oversized body (got ${raw.length} bytes)`));
        return;
      }
      const text = raw.slice(raw.indexOf('\r\n\r\n') + 4);
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON (or chunked): leave the text
      }
      resolve({ status: Number(match[1]), body });
    };
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (bodyTimer) clearTimeout(bodyTimer);
    });
    socket.on('error', () => undefined); // a cut write: the answer, if any, is already in `chunks`
    socket.on('close', finish);
    socket.on('connect', () => {
      socket.write(head);
      bodyTimer = setTimeout(() => {
        if (chunks.length === 0) socket.write(payload);
      }, 1_000);
    });
  });
}

/** The month's agent-run count of a workspace, as its usage endpoint shows it to `cookie`'s admin. */
export async function agentRunsUsed(baseUrl: string, cookie: string, workspaceId: string): Promise<number> {
  const res = await request(baseUrl, 'GET', `/api/billing/usage?workspaceId=${workspaceId}`, { cookie });
  return res.body.data.quotas.find((q: { kind: string }) => q.kind === 'agent-runs').used as number;
}

/** A workspace's audit events of one type, read by `cookie`'s admin. */
export async function auditEvents(baseUrl: string, cookie: string, workspaceId: string, type: string): Promise<any[]> {
  const res = await request(baseUrl, 'GET', `/api/admin/audit-events?workspaceId=${workspaceId}&type=${type}`, { cookie });
  return res.body.data as any[];
}
