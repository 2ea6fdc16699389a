import { describe, expect, it } from 'vitest';
import { PLANS, PLAN_IDS, effectiveRateLimit, effectiveScopes, planOf, quotaPeriod, quotaResetsAt } from './index.js';

describe('plans: table', () => {
  it('plans: rates and bursts follow the API document', () => {
    expect(PLANS.free.rateLimit).toBeNull();
    expect(PLANS.beginner.rateLimit).toEqual({ requestsPerMinute: 60, burst: 120 });
    expect(PLANS.hobbyist.rateLimit).toEqual({ requestsPerMinute: 180, burst: 360 });
    expect(PLANS.pro.rateLimit).toEqual({ requestsPerMinute: 600, burst: 1200 });
    expect(PLANS.enterprise.rateLimit).toEqual({ requestsPerMinute: 2000, burst: 4000 });
  });

  it('plans: each plan scopes include the smaller plans scopes', () => {
    for (let i = 1; i < PLAN_IDS.length; i++) {
      const smaller = PLANS[PLAN_IDS[i - 1]!].scopes;
      const larger = PLANS[PLAN_IDS[i]!].scopes;
      for (const scope of smaller) expect(larger).toContain(scope);
    }
    expect(PLANS.pro.scopes).toContain('agents:execute');
    expect(PLANS.hobbyist.scopes).not.toContain('agents:execute');
    expect(PLANS.enterprise.scopes).toContain('admin');
  });

  it('plans: unknown plan ids fall back to free', () => {
    expect(planOf('gold').id).toBe('free');
  });

  it('plans: quotas reset at the start of the next UTC month', () => {
    expect(quotaResetsAt(new Date('2026-12-31T23:59:59Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(quotaPeriod(new Date('2026-11-22T10:00:00Z'))).toBe('2026-11');
  });
});

describe('plans: effective key limits', () => {
  it("plans: a downgrade caps a key's scopes and rate; an upgrade adds nothing", () => {
    const scopes = ['issues:read', 'issues:write', 'agents:execute'];
    expect(effectiveScopes(scopes, 'beginner')).toEqual(['issues:read']);
    expect(effectiveScopes(scopes, 'enterprise')).toEqual(scopes);
    expect(effectiveRateLimit({ requestsPerMinute: 600, burst: 1200 }, 'beginner')).toEqual({ requestsPerMinute: 60, burst: 120 });
    expect(effectiveRateLimit({ requestsPerMinute: 60, burst: 120 }, 'enterprise')).toEqual({ requestsPerMinute: 60, burst: 120 });
    expect(effectiveRateLimit({ requestsPerMinute: 60, burst: 120 }, 'free')).toBeNull();
  });
});
