/**
 * Plans decide API access, scopes, request rate and burst (API document §8) and monthly quotas
 * and export formats (DECISIONS §2). One table, read by every service.
 */

export const PLAN_IDS = ['free', 'beginner', 'hobbyist', 'pro', 'enterprise'] as const;
export type PlanId = (typeof PLAN_IDS)[number];

export const SCOPES = [
  'issues:read',
  'issues:write',
  'projects:read',
  'projects:write',
  'agents:read',
  'agents:execute',
  'billing:read',
  'admin',
] as const;
export type Scope = (typeof SCOPES)[number];

export const QUOTA_KINDS = ['agent-runs', 'imports', 'exports', 'stored-tasks', 'api-requests'] as const;
export type QuotaKind = (typeof QUOTA_KINDS)[number];

export const EXPORT_FORMATS = ['json', 'csv', 'markdown', 'backup'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export interface Plan {
  id: PlanId;
  /** Null when the plan has no API access. */
  rateLimit: { requestsPerMinute: number; burst: number } | null;
  scopes: readonly Scope[];
  /** Monthly (UTC calendar month) limits per workspace; null = unlimited. */
  quotas: Readonly<Record<QuotaKind, number | null>>;
  exportFormats: readonly ExportFormat[];
}

const READ: readonly Scope[] = ['issues:read', 'projects:read', 'agents:read'];
const WRITE: readonly Scope[] = ['issues:read', 'issues:write', 'projects:read', 'projects:write', 'agents:read'];
const PRO: readonly Scope[] = [...WRITE, 'agents:execute', 'billing:read'];

export const PLANS: Readonly<Record<PlanId, Plan>> = {
  free: {
    id: 'free',
    rateLimit: null,
    scopes: [],
    quotas: { 'agent-runs': 0, imports: 2, exports: 0, 'stored-tasks': 500, 'api-requests': 0 },
    exportFormats: [],
  },
  beginner: {
    id: 'beginner',
    rateLimit: { requestsPerMinute: 60, burst: 120 },
    scopes: READ,
    quotas: { 'agent-runs': 200, imports: 10, exports: 20, 'stored-tasks': 2_000, 'api-requests': 100_000 },
    exportFormats: ['json'],
  },
  hobbyist: {
    id: 'hobbyist',
    rateLimit: { requestsPerMinute: 180, burst: 360 },
    scopes: WRITE,
    quotas: { 'agent-runs': 1_000, imports: 50, exports: 100, 'stored-tasks': 10_000, 'api-requests': 500_000 },
    exportFormats: ['json', 'csv'],
  },
  pro: {
    id: 'pro',
    rateLimit: { requestsPerMinute: 600, burst: 1_200 },
    scopes: PRO,
    quotas: {
      'agent-runs': 10_000,
      imports: 500,
      exports: 1_000,
      'stored-tasks': 100_000,
      'api-requests': 5_000_000,
    },
    exportFormats: ['json', 'csv', 'markdown'],
  },
  enterprise: {
    id: 'enterprise',
    rateLimit: { requestsPerMinute: 2_000, burst: 4_000 },
    scopes: [...PRO, 'admin'],
    quotas: { 'agent-runs': null, imports: null, exports: null, 'stored-tasks': null, 'api-requests': null },
    exportFormats: ['json', 'csv', 'markdown', 'backup'],
  },
};

export function isPlanId(value: unknown): value is PlanId {
  return typeof value === 'string' && (PLAN_IDS as readonly string[]).includes(value);
}

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && (SCOPES as readonly string[]).includes(value);
}

export function planOf(id: string): Plan {
  return isPlanId(id) ? PLANS[id] : PLANS.free;
}

/** Start of the next UTC calendar month: when monthly quotas reset. */
export function quotaResetsAt(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/** `YYYY-MM` of the UTC month a usage count belongs to. */
export function quotaPeriod(now: Date): string {
  return now.toISOString().slice(0, 7);
}

/**
 * What an API key may do now: the scopes it was given, capped by its workspace's current plan
 * (a downgrade takes scopes away at once; an upgrade never adds scopes the key was not given).
 */
export function effectiveScopes(keyScopes: readonly string[], currentPlan: PlanId): Scope[] {
  const allowed = PLANS[currentPlan].scopes;
  return keyScopes.filter((s): s is Scope => isScope(s) && allowed.includes(s));
}

/**
 * A key's rate limit now: the one it was created with, capped field by field by the current
 * plan's; null when the current plan has no API access.
 */
export function effectiveRateLimit(
  keyRate: { requestsPerMinute: number; burst: number },
  currentPlan: PlanId,
): { requestsPerMinute: number; burst: number } | null {
  const planRate = PLANS[currentPlan].rateLimit;
  if (!planRate) return null;
  return {
    requestsPerMinute: Math.min(keyRate.requestsPerMinute, planRate.requestsPerMinute),
    burst: Math.min(keyRate.burst, planRate.burst),
  };
}
