/** The imports-exports service's settings: the only place it reads environment variables. */
import { env, type EnvValues } from '@planning/config';

/** Exports (DECISIONS §9; docs/exports.md). */
export const exportSettings = {
  /**
   * How long an export history entry is kept (DECISIONS §9: 30 days). Seconds so tests can use a
   * short retention; `retentionDays` in entries reports it in days.
   */
  EXPORT_RETENTION_SECONDS: env.int(1, 3_650 * 86_400).default(30 * 86_400),
  /** The largest artifact an export builds; a larger one is refused with 413 `payload-too-large`. */
  EXPORT_MAX_BYTES: env.int(1_024, 1_073_741_824).default(64 * 1_048_576),
  /**
   * How long one export may take from the request to its record. Past it the export stops with 503
   * `unavailable` and is neither recorded nor counted. The gateway's call waits longer than the
   * largest value allowed here, so the service always decides (and answers) first.
   */
  EXPORT_DEADLINE_MS: env.int(1_000, 600_000).default(120_000),
  /** Exports of one workspace building at once in one service process; more get 429 `rate-limited`. */
  EXPORT_MAX_CONCURRENT_PER_WORKSPACE: env.int(1, 1_000).default(2),
};

/** Imports (DECISIONS §8; docs/imports.md). */
export const importSettings = {
  /** How long a preview can be committed (DECISIONS §8: 24 h); short in tests of expiry. */
  IMPORT_PREVIEW_TTL_SECONDS: env.int(1, 30 * 86_400).default(86_400),
  /**
   * How long a commit owns its preview between checkpoints; a retry after that (the committing
   * process died) takes the commit over and resumes it from its checkpoints.
   */
  IMPORT_COMMIT_LEASE_MS: env.int(500, 600_000).default(30_000),
  /** Rows written per chunk (one issues transaction and one checkpoint each). */
  IMPORT_CHUNK_ROWS: env.int(1, 1_000).default(200),
};

export const importsExportsSettings = {
  ...exportSettings,
  ...importSettings,
};

export type ImportsExportsSettings = EnvValues<typeof importsExportsSettings>;
