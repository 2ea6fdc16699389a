/**
 * How the MCP endpoint names its tools and which list a caller reads (`?toolset=`, `?names=`).
 * Its own module so that what renders guidance for MCP can use it without the catalog.
 */

export const TOOL_PREFIX = 'service.';

/**
 * How tool names are written on the wire: `dotted` is the contract's `service.<name>` (the
 * default list); `portable` is `service_<name>`, for hosts and model APIs that accept only
 * `^[a-zA-Z0-9_-]{1,64}$` (`POST /api/mcp?names=portable`). `tools/call` takes both, always.
 */
export const NAME_STYLES = ['dotted', 'portable'] as const;
export type NameStyle = (typeof NAME_STYLES)[number];
export const NAME_PREFIXES: Readonly<Record<NameStyle, string>> = { dotted: TOOL_PREFIX, portable: 'service_' };
/** What strict hosts and model APIs accept as a tool name. */
export const PORTABLE_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** A catalog name (`claim_work`) as the wire writes it in a name style. */
export function wireName(name: string, names: NameStyle = 'dotted'): string {
  return `${NAME_PREFIXES[names]}${name}`;
}

export type Toolset = 'full' | 'core';

/** The tool list a caller reads: which tools (`toolset`) and how their names are written (`names`). */
export interface ToolView {
  toolset: Toolset;
  names: NameStyle;
}

export const DEFAULT_VIEW: ToolView = { toolset: 'full', names: 'dotted' };
