/** The gateway's settings: the only place it reads environment variables. */
import { env, secret } from '@planning/config';

export const gatewaySettings = {
  /** The system administrator created on first start (DECISIONS §1). */
  SERVICE_ADMIN_EMAIL: env.string().email('must be an email address').default('admin@example.com'),
  /** Its password; when unset, one is generated and printed once. */
  SERVICE_ADMIN_PASSWORD: secret(env.string().min(12, 'must be at least 12 characters').optional()),
  /** Mark the session cookie Secure even when the request did not arrive over https. */
  SERVICE_COOKIE_SECURE: env.bool().default(false),
  SESSION_TTL_SECONDS: env.int(60, 30 * 86_400).default(12 * 3_600),

  /** Amazon Cognito user pool: when set (with the client id), sign-in goes through Cognito (`mode: cognito`). */
  COGNITO_USER_POOL_ID: env.string().optional(),
  /** The app client (USER_PASSWORD_AUTH must be enabled on it). */
  COGNITO_CLIENT_ID: env.string().optional(),
  /** The app client's secret, when it has one (SECRET_HASH is then sent). */
  COGNITO_CLIENT_SECRET: secret(env.string().optional()),
  /** Region of the pool; default: the region part of the pool id. */
  COGNITO_REGION: env.string().optional(),
  /** Another endpoint for the Cognito API (e.g. the cognito-local emulator). */
  COGNITO_ENDPOINT: env.url(['http', 'https']).optional(),

  /** Failed sign-ins allowed per email before 429 (refilled over LOGIN_THROTTLE_WINDOW_SECONDS). */
  LOGIN_MAX_FAILURES_PER_EMAIL: env.int(1, 1_000).default(5),
  /** Failed sign-ins allowed per client address before 429. */
  LOGIN_MAX_FAILURES_PER_ADDRESS: env.int(1, 100_000).default(50),
  /** How long an emptied failure allowance takes to refill completely. */
  LOGIN_THROTTLE_WINDOW_SECONDS: env.int(10, 86_400).default(900),

  /** How long the gateway keeps a workspace's plan and status for token requests (other replicas see a change within this). */
  WORKSPACE_CACHE_MS: env.int(0, 300_000).default(5_000),
  /** An API key's `lastUsedAt` is written at most once per this interval. */
  API_KEY_LAST_USED_INTERVAL_SECONDS: env.int(1, 86_400).default(60),

  /** Denial audit events written per client address (and actor) per minute; beyond it they are counted, not written. */
  AUDIT_DENIALS_PER_SOURCE_PER_MINUTE: env.int(1, 100_000).default(30),
  /** Denial audit events written per gateway replica per minute, all sources together. */
  AUDIT_DENIALS_PER_MINUTE: env.int(1, 1_000_000).default(600),

  /**
   * Browser origins allowed to call the MCP endpoint (comma-separated, e.g. `https://app.example.com`;
   * `*`: any). A request whose Origin header is present and not listed gets 403 (DNS-rebinding
   * defence); requests without Origin (agents, CLIs) are not affected.
   */
  MCP_ALLOWED_ORIGINS: env.list().default([]),
};
