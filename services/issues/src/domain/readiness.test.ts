import { describe, expect, it } from 'vitest';
import { completionPercent, productReadiness } from './readiness.js';

describe('readiness: product readiness', () => {
  it('readiness: completion is done over not-cancelled tasks, rounded; no tasks is 0', () => {
    expect(completionPercent(0, 0)).toBe(0);
    expect(completionPercent(1, 3)).toBe(33);
    expect(completionPercent(2, 3)).toBe(67);
    expect(completionPercent(5, 5)).toBe(100);
  });

  it('readiness: ready for launch only without open launch blockers; next proof is the top blocker', () => {
    const blocked = productReadiness({
      doneCount: 1,
      notCancelledCount: 4,
      verifiedCount: 1,
      openBlockerCount: 2,
      proofPacketCount: 3,
      nextBlocker: { id: 'iss_1', nextAction: 'Claim it' },
    });
    expect(blocked).toEqual({
      implementation: { completionPercent: 25, verifiedCount: 1 },
      launchProof: {
        readyForPublicLaunch: false,
        nextProof: { id: 'iss_1', nextAction: 'Claim it' },
        summary: { publicLaunchBlockerCount: 2, proofPacketCount: 3 },
      },
    });
    const clear = productReadiness({ doneCount: 4, notCancelledCount: 4, verifiedCount: 4, openBlockerCount: 0, proofPacketCount: 4 });
    expect(clear.launchProof).toMatchObject({ readyForPublicLaunch: true, nextProof: null });
  });
});
