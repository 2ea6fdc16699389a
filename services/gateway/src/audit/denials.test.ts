import type { NewEvent, Outbox } from '@planning/outbox';
import { describe, expect, it } from 'vitest';
import { createDenialAuditor, type Denial } from './denials.js';

function fakeOutbox() {
  const events: NewEvent[] = [];
  const outbox = {
    async add(event: NewEvent) {
      events.push(event);
      return event;
    },
  } as unknown as Outbox;
  return { outbox, events };
}

const denial = (reason = 'unknown-token'): Denial => ({
  type: 'auth.token.denied',
  actor: { type: 'anonymous', id: 'anonymous' },
  subject: { type: 'api-token', id: 'unknown' },
  reason,
});

describe('audit: denial budget', () => {
  it('audit: a flood from one source writes its budget, then one summary', async () => {
    const { outbox, events } = fakeOutbox();
    const warnings: object[] = [];
    const auditor = createDenialAuditor({
      outbox,
      logger: { warn: (o) => warnings.push(o), error: () => {} },
      perSourcePerMinute: 5,
      perMinute: 100,
      clock: () => 0,
    });
    for (let i = 0; i < 50; i++) await auditor.record(denial(), '10.0.0.1');
    await auditor.record(denial('malformed-token'), '10.0.0.2');
    await auditor.stop();
    const written = events.filter((e) => e.type === 'auth.token.denied');
    expect(written).toHaveLength(6);
    expect(written[0]).toMatchObject({ data: { outcome: 'denied', reason: 'unknown-token', subject: { type: 'api-token', id: 'unknown' } } });
    const summary = events.filter((e) => e.type === 'audit.denials-suppressed');
    expect(summary).toHaveLength(1);
    expect(summary[0]!.data).toMatchObject({ reason: 'denials-suppressed', suppressed: 45 });
    expect(warnings).toEqual([{ suppressed: { 'unknown-token': 45 }, total: 45 }]);
  });

  it('audit: the replica-wide budget caps many sources together', async () => {
    const { outbox, events } = fakeOutbox();
    const auditor = createDenialAuditor({ outbox, logger: { warn() {}, error() {} }, perSourcePerMinute: 5, perMinute: 10, clock: () => 0 });
    for (let i = 0; i < 30; i++) await auditor.record(denial(), `10.0.1.${i}`);
    await auditor.stop();
    expect(events.filter((e) => e.type === 'auth.token.denied')).toHaveLength(10);
  });
});
