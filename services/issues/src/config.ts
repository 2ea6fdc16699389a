/** The issues service's settings: the only place it reads environment variables. */
import { env, type EnvValues } from '@planning/config';

export const issuesSettings = {
  /** How long a pending approval request blocks the move it was requested for (default 7 days). */
  APPROVAL_TTL_SECONDS: env.int(1, 31_536_000).default(604_800),
  /** How often each issues process records expired approval requests (their `approval.expired` events). */
  APPROVAL_SWEEP_INTERVAL_MS: env.int(100, 3_600_000).default(30_000),
};

export type IssuesSettings = EnvValues<typeof issuesSettings>;

/** The demo module's (all-in-one only). */
export const demoSettings = {
  /** Seed the demo workspace (DECISIONS §1); `0` turns it off. */
  SERVICE_DEMO: env.bool().default(true),
};
