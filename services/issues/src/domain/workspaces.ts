import { ServiceError } from '@planning/errors';
import { isPlanId, type PlanId } from '@planning/plans';

export const WORKSPACE_STATUSES = ['active', 'suspended', 'archived'] as const;
export type WorkspaceStatus = (typeof WORKSPACE_STATUSES)[number];

export const DEFAULT_SANDBOX = 'workspace-write';
export const MAX_NAME_LENGTH = 200;

export function validateWorkspaceName(name: unknown, field = 'name'): string {
  if (typeof name !== 'string') throw new ServiceError('invalid-input', `'${field}' must be a string`, { field });
  const trimmed = name.trim();
  if (trimmed.length === 0) throw new ServiceError('invalid-input', `'${field}' must not be empty`, { field });
  if (trimmed.length > MAX_NAME_LENGTH) {
    throw new ServiceError('invalid-input', `'${field}' must be at most ${MAX_NAME_LENGTH} characters`, { field });
  }
  return trimmed;
}

export function validatePlanId(planId: unknown, field = 'planId'): PlanId {
  if (!isPlanId(planId)) {
    throw new ServiceError('invalid-input', `'${field}' must be one of free, beginner, hobbyist, pro, enterprise`, {
      field,
    });
  }
  return planId;
}

/**
 * The workspace slug: lower-case ASCII letters, digits and single dashes, derived from the name
 * at creation (exports name workspaces by it). `n` > 1 makes the n-th candidate when the plain
 * one is taken.
 */
export function slugify(name: string, n = 1): string {
  const base =
    name
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 48)
      .replace(/-+$/g, '') || 'workspace';
  return n > 1 ? `${base}-${n}` : base;
}

export function validateWorkspaceStatus(status: unknown, field = 'status'): WorkspaceStatus {
  if (typeof status !== 'string' || !(WORKSPACE_STATUSES as readonly string[]).includes(status)) {
    throw new ServiceError('invalid-input', `'${field}' must be one of ${WORKSPACE_STATUSES.join(', ')}`, { field });
  }
  return status as WorkspaceStatus;
}
