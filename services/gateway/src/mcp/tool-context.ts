/* eslint-disable @typescript-eslint/no-explicit-any -- arguments were validated against the tool's input schema before a handler runs. */
/**
 * What a tool handler gets and returns. Its own module so that the handler files (`tools.ts`,
 * `claim-tools.ts`) depend on it and never on each other's exports in a cycle.
 */
import type { Principal } from '@planning/rpc';
import type { GatewayDeps } from '../deps.js';
import type { ToolView } from './catalog.js';

export interface ToolContext {
  deps: GatewayDeps;
  principal: Principal;
  /** The tool list the caller reads: guidance that names tools names only listed ones, in the list's name style. */
  view: ToolView;
}

export type ToolHandler = (args: Record<string, any>, ctx: ToolContext) => Promise<Record<string, unknown>>;
