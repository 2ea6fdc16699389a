/** The agents-claims service's settings: the only place it reads environment variables. */
import { env, type EnvValues } from '@planning/config';

export const agentsClaimsSettings = {
  /** Default lease of a claim (DECISIONS §7: 30 minutes); a workspace may set its own (claim policy). */
  CLAIM_LEASE_SECONDS: env.int(1, 86_400).default(1_800),
  /**
   * How often each agents-claims process sweeps: expired claims (their tasks back to ready),
   * claims whose start never finished, ends not yet applied to tasks. Expired claims are swept
   * within this interval (DECISIONS §7 promises 10 seconds).
   */
  CLAIM_SWEEP_INTERVAL_MS: env.int(100, 10_000).default(2_000),
  /**
   * How long a claim may take from its insert to the task's move to in-progress. A claim whose
   * start did not finish by then (its process died) is ended by the next sweep, and the issues
   * service refuses its start from then on.
   */
  CLAIM_START_TIMEOUT_MS: env.int(500, 120_000).default(15_000),
  /** How often claims are reconciled with the tasks' claim mirrors (a safety net; a loop of its own, apart from the sweep). */
  CLAIM_RECONCILE_INTERVAL_MS: env.int(1_000, 3_600_000).default(60_000),
  /**
   * How long a claim request holding an idempotency key owns it; a retry meanwhile gets 409
   * `idempotency-in-flight`, after it (the first request's process died) the retry takes over.
   */
  CLAIM_IDEMPOTENCY_LEASE_MS: env.int(1_000, 600_000).default(30_000),
};

export type AgentsClaimsSettings = EnvValues<typeof agentsClaimsSettings>;
