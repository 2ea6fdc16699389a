/**
 * What a person may delegate: a grant's scopes never exceed what the consenting user's role
 * allows in the workspace (the role table of docs/auth.md) nor what the workspace's plan includes.
 */
import { roleAllows, type Role } from '@planning/access';
import { PLANS, SCOPES, type PlanId, type Scope } from '@planning/plans';

/** Scopes each workspace action stands for (a role that may do the action may delegate them). */
const SCOPE_ACTION: Readonly<Record<Scope, 'read' | 'write-tasks' | 'manage'>> = {
  'issues:read': 'read',
  'projects:read': 'read',
  'agents:read': 'read',
  'issues:write': 'write-tasks',
  'agents:execute': 'write-tasks',
  'projects:write': 'manage',
  'billing:read': 'manage',
  admin: 'manage',
};

/** The scopes a user with `role` (a system administrator: all) may delegate in a workspace on `planId`. */
export function delegableScopes(role: Role | undefined, isAdmin: boolean, planId: PlanId): Scope[] {
  const plan = PLANS[planId].scopes;
  return SCOPES.filter((s) => plan.includes(s) && (isAdmin || roleAllows(role, SCOPE_ACTION[s])));
}

/** The scopes an agent needs for the whole job over MCP: what a 401 suggests asking for. */
export const AGENT_SCOPES: readonly Scope[] = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];

/** Known scope names of a space-separated list, in the canonical order, without duplicates. */
export function parseScopes(value: string | readonly string[] | undefined): Scope[] {
  const names = new Set(typeof value === 'string' ? value.split(/\s+/) : (value ?? []));
  return SCOPES.filter((s) => names.has(s));
}
