/**
 * Where the service is reached from outside: the public base URL (the OAuth issuer), the
 * canonical MCP URL (the resource every token is bound to, RFC 8707) and the protected-resource
 * metadata URL (RFC 9728), from PUBLIC_URL or the listen address.
 */
import { MCP_PATH } from '../mcp/protocol.js';

export interface Site {
  /** `https://planning.example.com` (no trailing slash, no path). */
  publicUrl: string;
  /** `https://planning.example.com/api/mcp`: the resource tokens are minted for. */
  mcpUrl: string;
  /** The path-suffixed protected-resource metadata URL of the MCP endpoint. */
  resourceMetadataUrl: string;
  /** The server listens on a loopback address only: loopback browser origins are its own. */
  loopback: boolean;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '::1', '[::1]']);

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return LOOPBACK_HOSTS.has(host) || /^127(\.\d{1,3}){3}$/.test(host);
}

/** The well-known path of a resource's protected-resource metadata (RFC 9728 §3.1: inserted before the path). */
export const PROTECTED_RESOURCE_METADATA = '/.well-known/oauth-protected-resource';

export function siteOf(publicUrl: string | undefined, listen: { host: string; port: number }): Site {
  const loopback = isLoopbackHost(listen.host);
  const wildcard = listen.host === '0.0.0.0' || listen.host === '::';
  const host = wildcard ? 'localhost' : listen.host.includes(':') && !listen.host.startsWith('[') ? `[${listen.host}]` : listen.host;
  const base = new URL(publicUrl ?? `http://${host}:${listen.port}`).origin;
  return { publicUrl: base, mcpUrl: `${base}${MCP_PATH}`, resourceMetadataUrl: `${base}${PROTECTED_RESOURCE_METADATA}${MCP_PATH}`, loopback };
}
