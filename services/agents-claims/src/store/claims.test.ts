import { newId } from '@planning/ids';
import type { UsageMeter } from '@planning/metering';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createClaimsHarness, type ClaimsHarness } from '../testing/claims-harness.js';
import type { ClaimRecord, MeteredInsert } from './claims.js';

let h: ClaimsHarness;
let ws: string;
const LIMIT = 10;

beforeEach(async () => {
  h = await createClaimsHarness();
  ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'pro' });
});

afterEach(async () => {
  vi.restoreAllMocks();
  await h.close();
});

function record(issueId: string, agentId: string): ClaimRecord {
  const now = h.planning.now;
  return {
    _id: newId('clm'),
    workspaceId: ws,
    issueId,
    agentId,
    keyId: `key_${agentId}`,
    state: 'active',
    started: false,
    fencingToken: 0,
    leaseSeconds: 600,
    expiresAt: new Date(now.getTime() + 600_000),
    startBy: new Date(now.getTime() + 15_000),
    createdAt: now,
  };
}

const summary = (o: MeteredInsert): string => (o.ok ? `ok ${o.decision.used}` : o.conflict ? `conflict ${o.conflict}` : `denied ${o.denied.used}`);

describe('claims: metering turns', () => {
  it('claims of a workspace arriving together share one transaction and are each decided as alone, in arrival order: counts, conflicts with committed and with turn-mate claims, quota refusals that store nothing', async () => {
    const claims = h.store.collection<ClaimRecord>('claims');
    const held = record('iss_taken', 'agent-z');
    await claims.insertOne(held);
    await h.meter.tryConsume({ workspaceId: ws, kind: 'agent-runs', limit: LIMIT, amount: 4, now: h.planning.now });
    const transactions = vi.spyOn(h.store, 'withTransaction');
    const meter: UsageMeter = h.meter;
    const requests = [
      record('iss_1', 'agent-a'), // 5 of 10
      record('iss_taken', 'agent-b'), // an active claim committed before: the turn runs again without it
      record('iss_1', 'agent-c'), // the first request's task, in the same turn
      record('iss_2', 'agent-a'), // the first request's agent, in the same turn
      ...['d', 'e', 'f', 'g', 'h', 'i'].map((a, i) => record(`iss_${i + 3}`, `agent-${a}`)), // 6..10, then refused
      record('iss_9', 'agent-z'), // an agent holding a committed claim
    ];
    const outcomes = await Promise.all(requests.map((r) => h.claims.insertMetered(r, meter, LIMIT, h.planning.now)));
    expect(outcomes.map(summary)).toEqual([
      'ok 5',
      'conflict issue',
      'conflict issue',
      'conflict agent',
      'ok 6',
      'ok 7',
      'ok 8',
      'ok 9',
      'ok 10',
      'denied 10',
      'conflict agent',
    ]);
    // One turn: its transaction, run again once for each conflict with a committed claim.
    expect(transactions).toHaveBeenCalledTimes(3);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(LIMIT);
    const stored = await claims.find({}, { sort: { _id: 1 } });
    const granted = requests.filter((_, i) => outcomes[i]?.ok);
    expect(stored.map((c) => c._id).sort()).toEqual([held._id, ...granted.map((c) => c._id)].sort());
    expect(stored.filter((c) => c._id !== held._id).every((c) => c.meteredPeriod === '2025-06')).toBe(true);
  });

  it('claims arriving while a turn runs wait for the next one, which takes them all together', async () => {
    const transactions = vi.spyOn(h.store, 'withTransaction');
    const first = h.claims.insertMetered(record('iss_a', 'agent-a'), h.meter, null, h.planning.now);
    // Arrives once the first turn's transaction has begun.
    await new Promise((resolve) => setImmediate(resolve));
    expect(transactions).toHaveBeenCalledTimes(1);
    const later = Array.from({ length: 20 }, (_, i) => h.claims.insertMetered(record(`iss_${i}`, `agent-${i}`), h.meter, null, h.planning.now));
    const outcomes = await Promise.all([first, ...later]);
    expect(outcomes.map(summary)).toEqual(Array.from({ length: 21 }, (_, i) => `ok ${i + 1}`));
    expect(transactions).toHaveBeenCalledTimes(2);
    expect(await h.meter.used(ws, 'agent-runs')).toBe(21);
  });
});
