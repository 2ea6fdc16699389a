import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths };

/** A typed client of the planning service's REST API (every path, body and answer of `openapi.json`). */
export type PlanningClient = Client<paths>;

/** The error envelope every failure answers with. */
export type ErrorBody = components['schemas']['ErrorBody'];

export interface PlanningClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** Where the service runs, e.g. `http://localhost:8080`. */
  baseUrl: string;
  /** An API token (`svc_…`), sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** A session cookie pair (`service_session=…`), for server-side callers acting as a signed-in user. */
  cookie?: string;
}

/**
 * A client generated from the service's OpenAPI document with openapi-fetch: calls are typed by
 * path and method (`client.GET('/api/issues', { params: { query: { workspaceId } } })`), and each
 * answers `{ data, error, response }` with `error` typed as the documented envelope.
 */
export function createPlanningClient(options: PlanningClientOptions): PlanningClient {
  const { token, cookie, headers, ...rest } = options;
  const auth: Record<string, string> = {};
  if (token !== undefined) auth.authorization = `Bearer ${token}`;
  if (cookie !== undefined) auth.cookie = cookie;
  return createClient<paths>({ ...rest, headers: { ...auth, ...(headers as Record<string, string> | undefined) } });
}
