/** The issues service's settings: the only place it reads environment variables. */
import { env } from '@planning/config';

export const issuesSettings = {
  /** Seed the demo workspace in all-in-one mode (DECISIONS §1). */
  SERVICE_DEMO: env.bool().default(true),
};
