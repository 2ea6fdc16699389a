import { describe, expect, it } from 'vitest';
import { coveringFilter, passesClientFilters, planFilters } from './filter-plan.js';
import { miscountsRedeliveryToStalePull, supportsMultipleFilters } from './server-version.js';

describe('filter plan', () => {
  it('server version: filter_subjects needs 2.10; stale-pull redelivery counts are right from 2.10.15', () => {
    expect(supportsMultipleFilters('2.9.10')).toBe(false);
    expect(supportsMultipleFilters('2.10.0')).toBe(true);
    expect(supportsMultipleFilters('2.11.3-beta')).toBe(true);
    expect(supportsMultipleFilters('3.0.0')).toBe(true);
    expect(supportsMultipleFilters(undefined)).toBe(false);
    expect(miscountsRedeliveryToStalePull('2.9.10')).toBe(true);
    expect(miscountsRedeliveryToStalePull('2.10.14')).toBe(true);
    expect(miscountsRedeliveryToStalePull('2.10.15')).toBe(false);
    expect(miscountsRedeliveryToStalePull('2.11.0')).toBe(false);
  });

  it('covering filter: the shared literal tokens, then >', () => {
    expect(coveringFilter(['planning.issues.task.*', 'planning.issues.project.>'])).toBe('planning.issues.>');
    expect(coveringFilter(['planning.*.task.created', 'planning.*.task.updated'])).toBe('planning.*.task.>');
    expect(coveringFilter(['planning.a', 'planning.a.b'])).toBe('planning.>');
    expect(coveringFilter(['planning.>', 'planning.a.b'])).toBe('planning.>');
    expect(coveringFilter(['a.x', 'b.x'])).toBe('');
  });

  it('plan: one filter passes through; several use filter_subjects on 2.10', () => {
    expect(planFilters(['planning.a.>'], '2.9.10', ['planning.>'])).toEqual({ filter_subject: 'planning.a.>' });
    expect(planFilters(['planning.a.*', 'planning.b.>'], '2.10.4', ['planning.>'])).toEqual({
      filter_subjects: ['planning.a.*', 'planning.b.>'],
    });
  });

  it('plan: several filters on 2.9 cover on the server and filter in the client', () => {
    const plan = planFilters(['planning.a.*', 'planning.b.>'], '2.9.10', ['planning.>']);
    expect(plan).toEqual({ filter_subject: 'planning.>', clientFilters: ['planning.a.*', 'planning.b.>'] });
    expect(passesClientFilters(plan, 'planning.a.x')).toBe(true);
    expect(passesClientFilters(plan, 'planning.b.x.y')).toBe(true);
    expect(passesClientFilters(plan, 'planning.a.x.y')).toBe(false);
    expect(passesClientFilters(plan, 'planning.c.x')).toBe(false);
  });

  it('plan: filters with no common token fall back to the single stream subject, or are refused', () => {
    expect(planFilters(['a.x', 'b.x'], '2.9.10', ['>'])).toEqual({ filter_subject: '>', clientFilters: ['a.x', 'b.x'] });
    expect(() => planFilters(['a.x', 'b.x'], '2.9.10', ['a.>', 'b.>'])).toThrow(/nats-server 2.10/);
  });
});
