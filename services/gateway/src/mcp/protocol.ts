import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';

/**
 * Protocol revisions the endpoint serves: the stateless 2026-07-28 revision (per-request `_meta`
 * envelope, `server/discover`) and the session-era revisions deployed clients still speak
 * (`initialize`; served statelessly: no session ids are issued).
 */
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const;
export const LEGACY_PROTOCOL_VERSIONS: readonly string[] = [...SUPPORTED_PROTOCOL_VERSIONS];
export const PROTOCOL_VERSIONS: readonly string[] = [...MODERN_PROTOCOL_VERSIONS, ...LEGACY_PROTOCOL_VERSIONS];

export const MCP_PATH = '/api/mcp';
