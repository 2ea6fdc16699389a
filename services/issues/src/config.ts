/** The issues service's settings: the only place it reads environment variables. */
import { env } from '@planning/config';

export const issuesSettings = {};

/** The demo module's (all-in-one only). */
export const demoSettings = {
  /** Seed the demo workspace (DECISIONS §1); `0` turns it off. */
  SERVICE_DEMO: env.bool().default(true),
};
