/**
 * MCP sign-in from a test: an OAuth client provider for the official SDK clients (in memory), and
 * a browser that walks the service's sign-in and consent pages over HTTP (cookies, forms,
 * redirects) the way a person would, returning the code the client's redirect URI receives.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

export const REDIRECT_URI = 'http://127.0.0.1:9/callback';

/** The SDK's OAuth client provider, kept in memory; `authorizationUrl` is where it wanted to send the user. */
export class TestOAuthClient implements OAuthClientProvider {
  authorizationUrl?: URL;
  private info?: OAuthClientInformationMixed;
  private saved?: OAuthTokens;
  private verifier = '';

  constructor(
    private readonly name = 'e2e agent',
    readonly clientMetadataUrl?: string,
  ) {}

  get redirectUrl() {
    return REDIRECT_URI;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** A cookie jar that keeps name → value (the service's cookies do not collide by path). */
class Jar {
  private readonly cookies = new Map<string, string>();
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
  take(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split('=')[1]!) < Date.now()));
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
}

export interface ConsentChoice {
  email: string;
  password: string;
  /** Pick this workspace (from the list, or by asking for it when the page went straight to another). */
  workspaceId?: string;
  /** Stop at the list of workspaces (asked for with `?choose=1`). */
  showWorkspaces?: boolean;
  /** An existing agent, or with `newAgent` a new one. */
  agentId?: string;
  newAgentId?: string;
  /** The scopes to tick; default: every one offered. */
  scopes?: string[];
  deny?: boolean;
}

export interface BrowserResult {
  /** Where the browser was sent back to the client, if it was. */
  redirect?: URL;
  code?: string;
  error?: string;
  /** The last page of the service when the flow stopped there (status and HTML). */
  page?: { status: number; html: string; url: string };
  /** Every page the browser saw: `METHOD path status`. */
  steps: string[];
}

const formValues = (html: string, name: string): string[] => [...html.matchAll(new RegExp(`name="${name}" value="([^"]*)"`, 'g'))].map((m) => m[1]!);
const selectOptions = (html: string, name: string): string[] => {
  const select = new RegExp(`<select name="${name}">([\\s\\S]*?)</select>`).exec(html)?.[1] ?? '';
  return [...select.matchAll(/<option value="([^"]*)"/g)].map((m) => m[1]!).filter(Boolean);
};
const unescape = (s: string) => s.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');

/**
 * Walks the flow from the authorization URL: sign-in form, workspace choice, consent form, and the
 * redirects in between, to the client's redirect URI (never fetched). `fetchVia` lets a test send
 * each request through a load balancer of its own.
 */
export async function authorizeInBrowser(authorizationUrl: URL | string, choice: ConsentChoice, options: { maxSteps?: number } = {}): Promise<BrowserResult> {
  const jar = new Jar();
  const steps: string[] = [];
  let url = new URL(authorizationUrl);
  let method = 'GET';
  let body: string | undefined;
  const serviceOrigin = url.origin;
  for (let i = 0; i < (options.maxSteps ?? 20); i++) {
    const response = await fetch(url, {
      method,
      redirect: 'manual',
      headers: { cookie: jar.header(), ...(body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      ...(body !== undefined ? { body } : {}),
    });
    jar.take(response);
    steps.push(`${method} ${url.pathname}${url.search && url.pathname.startsWith('/oauth/interaction/') ? url.search : ''} ${response.status}`);
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      const next = new URL(location, url);
      if (next.origin !== serviceOrigin || next.href.startsWith(REDIRECT_URI)) {
        return {
          redirect: next,
          ...(next.searchParams.get('code') ? { code: next.searchParams.get('code')! } : {}),
          ...(next.searchParams.get('error') ? { error: next.searchParams.get('error')! } : {}),
          steps,
        };
      }
      url = next;
      method = 'GET';
      body = undefined;
      continue;
    }
    const html = await response.text();
    const page = { status: response.status, html, url: url.href };
    if (response.status !== 200) return { page, steps };
    const uid = /\/oauth\/interaction\/([^/"?]+)/.exec(html)?.[1];
    if (!uid) return { page, steps };
    const base = `${serviceOrigin}/oauth/interaction/${uid}`;
    if (choice.deny) {
      url = new URL(`${base}/abort`);
      method = 'POST';
      body = '';
      continue;
    }
    if (html.includes(`/oauth/interaction/${uid}/login`)) {
      if (steps.filter((s) => s.startsWith('POST') && s.includes('/login')).length > 0) return { page, steps };
      url = new URL(`${base}/login`);
      method = 'POST';
      body = new URLSearchParams({ email: choice.email, password: choice.password }).toString();
      continue;
    }
    if (html.includes('Choose a workspace')) {
      if (choice.showWorkspaces) return { page, steps };
      const links = [...html.matchAll(/href="([^"]*workspaceId=[^"]*)"/g)].map((m) => unescape(m[1]!));
      const link = links.find((l) => !choice.workspaceId || l.endsWith(`workspaceId=${encodeURIComponent(choice.workspaceId)}`));
      if (!link) return { page, steps };
      url = new URL(link, serviceOrigin);
      method = 'GET';
      body = undefined;
      continue;
    }
    if (html.includes(`/oauth/interaction/${uid}/consent`)) {
      if (steps.some((s) => s.includes('/consent'))) return { page, steps };
      const shown = unescape(formValues(html, 'workspaceId')[0] ?? '');
      if (choice.showWorkspaces || (choice.workspaceId && choice.workspaceId !== shown)) {
        if (steps.some((s) => s.startsWith(`GET /oauth/interaction/${uid}?`))) return { page, steps };
        url = new URL(choice.showWorkspaces ? `${base}?choose=1` : `${base}?workspaceId=${encodeURIComponent(choice.workspaceId!)}`);
        method = 'GET';
        body = undefined;
        continue;
      }
      const form = new URLSearchParams();
      form.set('workspaceId', unescape(formValues(html, 'workspaceId')[0] ?? ''));
      const agents = selectOptions(html, 'agentId');
      form.set('agentId', choice.agentId ?? agents[0] ?? '');
      if (choice.newAgentId) {
        form.set('agentId', '');
        form.set('newAgentId', choice.newAgentId);
      }
      for (const scope of choice.scopes ?? formValues(html, 'scope')) form.append('scope', scope);
      url = new URL(`${base}/consent`);
      method = 'POST';
      body = form.toString();
      continue;
    }
    return { page, steps };
  }
  throw new Error(`the sign-in did not finish: ${steps.join(' → ')}`);
}

/** The offered scopes and agents of a consent page. */
export function consentPage(html: string): { scopes: string[]; agents: string[]; withheld: string[] } {
  const withheld = /not granted: (.*?)\.<\/p>/.exec(html)?.[1] ?? '';
  return { scopes: formValues(html, 'scope'), agents: selectOptions(html, 'agentId'), withheld: [...withheld.matchAll(/<code>([^<]*)<\/code>/g)].map((m) => m[1]!) };
}

/** A PKCE pair (RFC 7636, S256). */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Registers a public client through Dynamic Client Registration (RFC 7591). */
export async function registerClient(baseUrl: string, metadata: Record<string, unknown> = {}): Promise<{ client_id: string; [k: string]: unknown }> {
  const response = await fetch(`${baseUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'raw client', redirect_uris: [REDIRECT_URI], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none', ...metadata }),
  });
  const body = (await response.json()) as { client_id: string };
  if (response.status !== 201) throw new Error(`registration failed: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

/** A token endpoint call (form-encoded), answering status and JSON. */
export async function tokenRequest(baseUrl: string, params: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${baseUrl}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString() });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** An authorization URL for a raw (non-SDK) flow. */
export function authorizationUrl(baseUrl: string, params: Record<string, string>): URL {
  const url = new URL(`${baseUrl}/oauth/authorize`);
  for (const [k, v] of Object.entries({ response_type: 'code', redirect_uri: REDIRECT_URI, state: randomBytes(8).toString('hex'), ...params })) url.searchParams.set(k, v);
  return url;
}

/**
 * An https server on 127.0.0.1 with a fresh self-signed certificate (openssl), serving one JSON
 * document: a Client ID Metadata Document whose URL is the client id. `caFile` is the certificate
 * for NODE_EXTRA_CA_CERTS of the process that fetches it.
 */
export async function startMetadataDocumentServer(document: (url: string) => Record<string, unknown>): Promise<{ url: string; caFile: string; requests: number; close(): Promise<void> }> {
  const { execFileSync } = await import('node:child_process');
  const { mkdtempSync, readFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { createServer } = await import('node:https');
  const dir = mkdtempSync(join(tmpdir(), 'planning-cimd-'));
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const state = { url: '', caFile: cert, requests: 0, close: async () => undefined as void };
  const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    state.requests += 1;
    if (req.url !== '/client.json') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' }).end(JSON.stringify(document(state.url)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `https://127.0.0.1:${(server.address() as { port: number }).port}/client.json`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      rmSync(dir, { recursive: true, force: true });
    });
  return state;
}
