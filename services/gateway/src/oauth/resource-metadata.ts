/**
 * The MCP endpoint as an OAuth protected resource (RFC 9728, MCP authorization): its metadata
 * names the canonical MCP URL, the authorization server(s) and the scopes; the endpoint's 401s
 * point to that metadata (`WWW-Authenticate: Bearer resource_metadata="…", scope="…"`) and a
 * token lacking a scope gets 403 `insufficient_scope` with the scopes it needs (step-up).
 */
import { SCOPES } from '@planning/plans';
import type { FastifyInstance } from 'fastify';
import { MCP_PATH } from '../mcp/protocol.js';
import { AGENT_SCOPES } from './scopes.js';
import { PROTECTED_RESOURCE_METADATA, type Site } from './site.js';

export interface ProtectedResource {
  site: Site;
  /** Issuers whose tokens are accepted; empty when only API keys are (OAuth off). */
  authorizationServers: readonly string[];
}

export function protectedResourceMetadata(resource: ProtectedResource) {
  return {
    resource: resource.site.mcpUrl,
    authorization_servers: [...resource.authorizationServers],
    scopes_supported: [...SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Planning service (MCP)',
    resource_documentation: `${resource.site.publicUrl}/docs`,
  };
}

const quote = (value: string) => `"${value.replace(/["\\]/g, '')}"`;

/** The challenge of a 401 from the MCP endpoint. */
export function unauthorizedChallenge(resource: ProtectedResource, invalidToken: boolean): string {
  const parts = ['Bearer realm="planning-service"'];
  if (resource.authorizationServers.length > 0) {
    parts.push(`resource_metadata=${quote(resource.site.resourceMetadataUrl)}`, `scope=${quote(AGENT_SCOPES.join(' '))}`);
  }
  if (invalidToken) parts.push('error="invalid_token"');
  return parts.join(', ');
}

/** The challenge of a 403 for a missing scope: the scopes to ask for (those held plus those needed). */
export function insufficientScopeChallenge(resource: ProtectedResource, held: readonly string[], needed: readonly string[]): string {
  const scopes = SCOPES.filter((s) => held.includes(s) || needed.includes(s));
  return [
    'Bearer realm="planning-service"',
    'error="insufficient_scope"',
    `scope=${quote(scopes.join(' '))}`,
    ...(resource.authorizationServers.length > 0 ? [`resource_metadata=${quote(resource.site.resourceMetadataUrl)}`] : []),
    `error_description=${quote(`The token lacks ${needed.filter((s) => !held.includes(s)).join(', ')}`)}`,
  ].join(', ');
}

/** `GET /.well-known/oauth-protected-resource` and its MCP-path-suffixed form: the same document. */
export async function protectedResourceRoutes(app: FastifyInstance, resource: ProtectedResource): Promise<void> {
  const document = protectedResourceMetadata(resource);
  for (const path of [PROTECTED_RESOURCE_METADATA, `${PROTECTED_RESOURCE_METADATA}${MCP_PATH}`]) {
    app.get(path, { schema: { hide: true } }, async (_request, reply) => {
      // Public metadata any page may read (browser-based MCP clients fetch it).
      void reply.header('access-control-allow-origin', '*').header('cache-control', 'public, max-age=300');
      return document;
    });
  }
}
