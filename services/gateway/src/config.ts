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
};
