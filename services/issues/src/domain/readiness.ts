/**
 * Launch readiness (DECISIONS §10): tasks labelled `launch-blocker` are launch blockers, evidence
 * records are proof packets. Computed from counts the store answers, for the diagnostics.
 */

export const LAUNCH_BLOCKER_LABEL = 'launch-blocker';

export interface ReadinessFacts {
  /** Tasks in scope that are done. */
  doneCount: number;
  /** Tasks in scope that are not cancelled. */
  notCancelledCount: number;
  /** Done tasks with at least one evidence record. */
  verifiedCount: number;
  /** Open (not done, not cancelled) launch blockers. */
  openBlockerCount: number;
  /** Evidence records in scope. */
  proofPacketCount: number;
  /** The top-ranked open launch blocker and its next action, if any. */
  nextBlocker?: { id: string; nextAction: string };
}

export interface ProductReadiness {
  implementation: { completionPercent: number; verifiedCount: number };
  launchProof: {
    readyForPublicLaunch: boolean;
    nextProof: { id: string; nextAction: string } | null;
    summary: { publicLaunchBlockerCount: number; proofPacketCount: number };
  };
}

/** completionPercent = done / not-cancelled × 100, rounded (0 with no tasks). */
export function completionPercent(done: number, notCancelled: number): number {
  if (notCancelled <= 0) return 0;
  return Math.round((Math.min(done, notCancelled) / notCancelled) * 100);
}

export function productReadiness(facts: ReadinessFacts): ProductReadiness {
  return {
    implementation: {
      completionPercent: completionPercent(facts.doneCount, facts.notCancelledCount),
      verifiedCount: facts.verifiedCount,
    },
    launchProof: {
      readyForPublicLaunch: facts.openBlockerCount === 0,
      nextProof: facts.nextBlocker ?? null,
      summary: { publicLaunchBlockerCount: facts.openBlockerCount, proofPacketCount: facts.proofPacketCount },
    },
  };
}
