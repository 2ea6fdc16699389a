/**
 * Protocol revisions the endpoint serves: the stateless 2026-07-28 revision (per-request `_meta`
 * envelope, `server/discover`) and the session-era revisions deployed clients still speak
 * (`initialize`; served statelessly: no session ids are issued).
 */
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const;
/**
 * The session-era revisions: the SDK's `SUPPORTED_PROTOCOL_VERSIONS`, written out so that the
 * modules naming the revisions (the route's description, the OAuth metadata, guidance) do not
 * load the SDK, which the endpoint loads on its first request (mcp.test.ts holds the two lists
 * equal, so an SDK upgrade that adds or drops one fails there).
 */
export const LEGACY_PROTOCOL_VERSIONS: readonly string[] = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];
export const PROTOCOL_VERSIONS: readonly string[] = [...MODERN_PROTOCOL_VERSIONS, ...LEGACY_PROTOCOL_VERSIONS];

export const MCP_PATH = '/api/mcp';
