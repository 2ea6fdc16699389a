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
  /**
   * How long a replica reuses an API key it looked up for token requests. A revoke applies at once
   * on the replica that handled it, on the others within this (0: every token request reads the key).
   */
  API_KEY_CACHE_MS: env.int(0, 60_000).default(2_000),
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

  /**
   * The service's public base URL (scheme, host, port; no path), as agents and browsers reach it:
   * the OAuth issuer, and with `/api/mcp` the canonical MCP resource tokens are bound to. Default:
   * `http://<HOST>:<PORT>` (`localhost` for a wildcard HOST). Set it behind a load balancer; every
   * gateway replica must have the same value.
   */
  PUBLIC_URL: env.url(['http', 'https']).optional(),

  /** The built-in OAuth 2.1 authorization server for MCP sign-in (docs/mcp.md); off when OAUTH_ISSUER names an external one. */
  OAUTH_ENABLED: env.bool().default(true),
  /** Lifetime of an OAuth access token (short: revocation and plan changes also apply on every request). */
  OAUTH_ACCESS_TOKEN_TTL_SECONDS: env.int(60, 86_400).default(600),
  /** Lifetime of a refresh token; each refresh rotates it and starts this again. */
  OAUTH_REFRESH_TOKEN_TTL_SECONDS: env.int(300, 365 * 86_400).default(30 * 86_400),
  /** How long a grant lives at most (refreshing does not extend it). */
  OAUTH_GRANT_TTL_SECONDS: env.int(300, 5 * 365 * 86_400).default(365 * 86_400),
  /**
   * Secret the authorization server's signing key and cookie keys are derived from (≥ 32
   * characters, the same on every gateway replica). Default: SERVICE_INTERNAL_SECRET, which
   * distributed mode requires and shares already; all-in-one makes one per start.
   */
  OAUTH_KEYS_SECRET: secret(env.string().min(32, 'must be at least 32 characters').optional()),
  /** Open Dynamic Client Registration (RFC 7591) for clients that cannot use a Client ID Metadata Document. */
  OAUTH_DYNAMIC_REGISTRATION: env.bool().default(true),
  /** Test setups only: fetch Client ID Metadata Documents from private and loopback addresses too. */
  OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES: env.bool().default(false),

  /**
   * An external OAuth/OIDC issuer (Cognito user pool, Keycloak realm, ...) whose JWT access tokens
   * the MCP endpoint accepts instead of the built-in server's. Its JWKS comes from OAUTH_JWKS_URL,
   * else from its discovery document.
   */
  OAUTH_ISSUER: env.url(['http', 'https']).optional(),
  OAUTH_JWKS_URL: env.url(['http', 'https']).optional(),
  /** Audiences accepted in external tokens (comma-separated). Default: the canonical MCP URL. */
  OAUTH_AUDIENCE: env.list().default([]),
  /** The claim holding the audience: `aud`, or `client_id` for Cognito access tokens. */
  OAUTH_AUDIENCE_CLAIM: env.string().default('aud'),
  /** The claim naming the user; matched against user emails. */
  OAUTH_USER_CLAIM: env.string().default('email'),
  /** The claim naming the workspace the token acts in. */
  OAUTH_WORKSPACE_CLAIM: env.string().default('planning_workspace'),
  /** The claim naming the agent the token acts as; default: the token's client id (`azp`, `client_id`). */
  OAUTH_AGENT_CLAIM: env.string().default('planning_agent'),
  /** Stripped from external scope names (e.g. a Cognito resource server identifier followed by `/`). */
  OAUTH_SCOPE_PREFIX: env.string().optional(),
};
