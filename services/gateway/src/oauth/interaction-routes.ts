/**
 * The sign-in and consent steps of MCP sign-in (oidc-provider's "interactions"), served by the
 * gateway as plain HTML forms:
 *
 * 1. `GET /oauth/interaction/{uid}` — not signed in: the sign-in form, which posts to
 *    `…/login` and signs in exactly as `POST /api/auth/login` does (password or Cognito, the same
 *    throttle and session cookie). Signed in: the workspaces the user belongs to (one eligible:
 *    straight to consent), then `?workspaceId=` the consent form.
 * 2. `POST …/consent` — the workspace, the agent the grant acts as (an existing agent id; admins
 *    may name a new one, created as for API keys) and the scopes. The server checks everything
 *    again: the workspace's plan must include API access; every scope must be one the client asked
 *    for and the user's role and the plan allow — anything else is refused, never widened. Then
 *    the grant is recorded (its own rate-limit bucket, counted against the workspace's quotas like
 *    a key), audited, and the browser goes back to the client with a code.
 * 3. `POST …/abort` — the user declines: `access_denied` to the client.
 *
 * The interaction is bound to the browser by the authorization server's cookie; a request without
 * it (another browser, a forged form) gets the error page.
 */
import { createRemoteAccess, isAgentId, isRole, type Role } from '@planning/access';
import { ServiceError, toServiceError } from '@planning/errors';
import { PLANS, SCOPES, isPlanId, type PlanId, type Scope } from '@planning/plans';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SESSION_COOKIE, sessionUser, userPrincipal } from '../auth.js';
import type { GatewayDeps } from '../deps.js';
import { signIn } from '../routes/auth.js';
import type { UserRecord } from '../store/users.js';
import { INTERACTION_PATH, type AuthorizationServer } from './authorization-server.js';
import { GrantRepository } from './grants.js';
import { PAGE_HEADERS, renderConsent, renderErrorPage, renderSignIn, renderWorkspacePicker, type ClientView, type WorkspaceChoice } from './pages.js';
import { delegableScopes, parseScopes } from './scopes.js';
import type { Site } from './site.js';

type Form = Record<string, string | string[] | undefined>;

const first = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);
const all = (value: string | string[] | undefined): string[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);

/** The scopes the client asked for (its `scope` parameter), among the service's; none named: every scope, for the user to choose from. */
function requestedScopes(params: Record<string, unknown>): { scopes: Scope[]; named: boolean } {
  const scopes = parseScopes(typeof params.scope === 'string' ? params.scope : undefined);
  return scopes.length > 0 ? { scopes, named: true } : { scopes: [...SCOPES], named: false };
}

export interface InteractionOptions {
  site: Site;
  server: AuthorizationServer;
  grants: GrantRepository;
  grantTtlSeconds: number;
}

export async function interactionRoutes(app: FastifyInstance, deps: GatewayDeps, options: InteractionOptions): Promise<void> {
  const { server, grants } = options;
  // The provider is loaded on the first sign-in request (see authorization-server.ts).
  const provider = (): ReturnType<AuthorizationServer['provider']> => server.provider();
  const access = createRemoteAccess(deps.rpc.workspaces);

  const send = (reply: FastifyReply, status: number, html: string) => reply.status(status).headers(PAGE_HEADERS).send(html);
  const fail = (reply: FastifyReply, status: number, error: string, description: string) => send(reply, status, renderErrorPage({ error, error_description: description }));

  /** The interaction this browser is in (its cookie must match the uid), with the client that asks. */
  const interactionOf = async (request: FastifyRequest<{ Params: { uid: string } }>, reply: FastifyReply) => {
    const oidc = await provider();
    let details;
    try {
      details = await oidc.interactionDetails(request.raw, reply.raw);
    } catch {
      return undefined;
    }
    if (details.uid !== request.params.uid) return undefined;
    const clientId = String(details.params.client_id ?? '');
    const client = await oidc.Client.find(clientId).catch(() => undefined);
    if (!client) return undefined;
    const redirect = typeof details.params.redirect_uri === 'string' ? details.params.redirect_uri : undefined;
    const redirectOrigin = redirect && URL.canParse(redirect) ? new URL(redirect).origin : null;
    const view: ClientView = { clientId, name: typeof client.clientName === 'string' ? client.clientName : null, redirectOrigin };
    return { details, client, view };
  };

  const signedIn = async (request: FastifyRequest): Promise<UserRecord | undefined> => {
    const cookie = request.cookies[SESSION_COOKIE];
    if (!cookie) return undefined;
    const found = await sessionUser(deps, cookie);
    return 'user' in found ? found.user : undefined;
  };

  /** The workspaces a user may pick, each with their role and whether a grant can be made there. */
  const workspacesOf = async (user: UserRecord): Promise<WorkspaceChoice[]> => {
    const principal = userPrincipal(user);
    const [listed, memberships] = await Promise.all([
      deps.rpc.workspaces.listWorkspaces({ limit: 200 }, { principal }),
      deps.rpc.workspaces.listMemberships({}, { principal }),
    ]);
    const roles = new Map(memberships.memberships.map((m) => [m.workspaceId, m.role]));
    return listed.workspaces.map((w) => {
      const role = roles.get(w.id) ?? (user.isAdmin ? 'system administrator' : 'viewer');
      const plan = isPlanId(w.planId) ? PLANS[w.planId] : PLANS.free;
      const unavailable = w.status !== 'active' ? `the workspace is ${w.status}` : !plan.rateLimit ? `the ${plan.id} plan has no API access` : undefined;
      return { id: w.id, name: w.name, role, ...(unavailable ? { unavailable } : {}) };
    });
  };

  /** What the user may grant in a workspace: refused (with why), or the consent page's facts. */
  const consentFacts = async (user: UserRecord, workspaceId: string, params: Record<string, unknown>) => {
    const principal = userPrincipal(user);
    const ws = await access(principal, workspaceId).catch(() => undefined);
    if (!ws?.exists || (!ws.role && !user.isAdmin)) return { refused: 'You are not a member of that workspace.' } as const;
    if (ws.status !== 'active') return { refused: `The workspace is ${ws.status}.` } as const;
    const plan = PLANS[ws.planId];
    if (!plan.rateLimit) return { refused: `The workspace's plan (${plan.id}) does not include API access, so no access can be granted.` } as const;
    const role: Role | undefined = isRole(ws.role) ? ws.role : undefined;
    const allowed = delegableScopes(role, user.isAdmin, ws.planId);
    const requested = requestedScopes(params);
    const offered = requested.scopes.filter((s) => allowed.includes(s));
    const withheld = requested.named ? requested.scopes.filter((s) => !allowed.includes(s)) : [];
    const workspace = (await deps.rpc.workspaces.getWorkspace({ id: workspaceId }, { principal })).workspace;
    const agents = (await deps.rpc.agents.listAgents({ workspaceId, limit: 200 }, { principal })).agents.map((a) => a.agentId);
    const mayCreateAgent = user.isAdmin || role === 'admin' || role === 'owner';
    return {
      planId: ws.planId,
      rate: plan.rateLimit,
      requested,
      view: {
        workspace: { id: workspaceId, name: workspace?.name ?? workspaceId, role: role ?? 'system administrator', planId: ws.planId },
        offered,
        withheld,
        agents,
        mayCreateAgent,
      },
    } as const;
  };

  await app.register(async (scope) => {
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 16 * 1024 }, (_request, body, done) => {
      const form: Form = {};
      for (const [key, value] of new URLSearchParams(body as string)) {
        const existing = form[key];
        form[key] = existing === undefined ? value : [...all(existing), value];
      }
      done(null, form);
    });
    const hidden = { schema: { hide: true } };

    scope.get<{ Params: { uid: string }; Querystring: { workspaceId?: string; choose?: string } }>(`${INTERACTION_PATH}/:uid`, hidden, async (request, reply) => {
      const interaction = await interactionOf(request, reply);
      if (!interaction) return fail(reply, 400, 'invalid_request', 'This sign-in has expired or belongs to another browser.');
      const user = await signedIn(request);
      if (!user) return send(reply, 200, renderSignIn(request.params.uid, interaction.view, { mode: deps.identity.mode }));
      let workspaceId = typeof request.query.workspaceId === 'string' ? request.query.workspaceId : undefined;
      if (!workspaceId) {
        const choices = await workspacesOf(user);
        const eligible = choices.filter((c) => !c.unavailable);
        if (eligible.length !== 1 || request.query.choose) return send(reply, 200, renderWorkspacePicker(request.params.uid, interaction.view, user, choices));
        workspaceId = eligible[0]!.id;
      }
      const facts = await consentFacts(user, workspaceId, interaction.details.params);
      if ('refused' in facts) return fail(reply, 403, 'access_denied', facts.refused!);
      return send(reply, 200, renderConsent(request.params.uid, interaction.view, user, facts.view));
    });

    scope.post<{ Params: { uid: string }; Body: Form }>(`${INTERACTION_PATH}/:uid/login`, hidden, async (request, reply) => {
      const interaction = await interactionOf(request, reply);
      if (!interaction) return fail(reply, 400, 'invalid_request', 'This sign-in has expired or belongs to another browser.');
      const email = first(request.body?.email) ?? '';
      const password = first(request.body?.password) ?? '';
      try {
        if (!email || !password || email.length > 320 || password.length > 1024) throw new ServiceError('unauthorized', 'Invalid email or password');
        await signIn(request, reply, deps, email, password);
      } catch (err) {
        const error = toServiceError(err);
        if (error.code === 'internal') throw err;
        // Not an /api route: the denial the sign-in marked is recorded here.
        const denial = request.denial;
        if (denial) {
          await deps.audit
            .record({ type: denial.type ?? 'auth.login.denied', actor: { type: 'anonymous', id: 'anonymous' }, subject: denial.subject ?? { type: 'user', id: 'unknown' }, reason: denial.reason }, request.ip)
            .catch((e: unknown) => request.log.error({ err: e }, 'could not record an audit event'));
        }
        if (error.code === 'rate-limited' && error.details.retryAfterSeconds) void reply.header('retry-after', String(error.details.retryAfterSeconds));
        const message = error.code === 'rate-limited' ? 'Too many failed sign-ins; try again later.' : 'Invalid email or password.';
        return send(reply, error.httpStatus, renderSignIn(request.params.uid, interaction.view, { email, error: message, mode: deps.identity.mode }));
      }
      return reply.status(303).header('location', `${INTERACTION_PATH}/${encodeURIComponent(request.params.uid)}`).header('cache-control', 'no-store').send();
    });

    scope.post<{ Params: { uid: string }; Body: Form }>(`${INTERACTION_PATH}/:uid/consent`, hidden, async (request, reply) => {
      const interaction = await interactionOf(request, reply);
      if (!interaction) return fail(reply, 400, 'invalid_request', 'This sign-in has expired or belongs to another browser.');
      const user = await signedIn(request);
      if (!user) return send(reply, 401, renderSignIn(request.params.uid, interaction.view, { mode: deps.identity.mode, error: 'Sign in first.' }));
      const form = request.body ?? {};
      const workspaceId = first(form.workspaceId) ?? '';
      const facts = workspaceId ? await consentFacts(user, workspaceId, interaction.details.params) : ({ refused: 'Choose a workspace.' } as const);
      if ('refused' in facts) return fail(reply, 403, 'access_denied', facts.refused!);
      const again = (status: number, error: string) => send(reply, status, renderConsent(request.params.uid, interaction.view, user, { ...facts.view, error }));

      // Scopes: only ones offered (asked for, and within role and plan); anything else is refused, never widened.
      const chosen = all(form.scope);
      const beyond = chosen.filter((s) => !(facts.view.offered as readonly string[]).includes(s));
      if (beyond.length > 0) return again(400, `Not grantable here: ${beyond.join(', ')}.`);
      const scopes = parseScopes(chosen);
      if (scopes.length === 0) return again(400, 'Choose at least one permission.');

      // The agent: an existing one, or (admins) a new one, created as key creation creates it.
      const newAgentId = first(form.newAgentId)?.trim();
      const agentId = newAgentId || first(form.agentId) || '';
      if (!isAgentId(agentId)) return again(400, 'An agent id is 1 to 64 characters: lower-case letters, digits, ".", "_" and "-", starting with a letter or digit.');
      if (!facts.view.agents.includes(agentId)) {
        if (!facts.view.mayCreateAgent) return again(403, 'Only an admin may create a new agent; choose an existing one.');
        try {
          await deps.rpc.agents.ensureAgent({ workspaceId, agentId }, { principal: userPrincipal(user) });
        } catch (err) {
          const error = toServiceError(err);
          if (error.code === 'internal' || error.code === 'unavailable') throw err;
          return again(error.httpStatus, error.message);
        }
      }

      const clientId = interaction.view.clientId;
      const now = deps.clock();
      const grantId = GrantRepository.newId();
      const grant = new (await provider()).Grant({ accountId: user._id, clientId });
      grant.jti = grantId;
      // The scopes are the resource's and the server's own (see authorization-server.ts): granted in
      // both; what was asked for and not granted is recorded as refused, so the server does not ask again.
      const refused = facts.requested.scopes.filter((s) => !scopes.includes(s));
      grant.addResourceScope(options.site.mcpUrl, scopes.join(' '));
      if (refused.length > 0) grant.rejectResourceScope(options.site.mcpUrl, refused.join(' '));
      const oidcScopes = String(interaction.details.params.scope ?? '')
        .split(' ')
        .filter((s) => s === 'openid' || s === 'offline_access');
      grant.addOIDCScope([...oidcScopes, ...scopes].join(' '));
      if (refused.length > 0) grant.rejectOIDCScope(refused.join(' '));
      await grant.save();
      await grants.create(
        grantId,
        {
          workspaceId,
          agentId,
          userId: user._id,
          clientId,
          clientName: interaction.view.name,
          scopes,
          planId: facts.planId as PlanId,
          rateLimit: { ...facts.rate },
          expiresAt: new Date(now.getTime() + options.grantTtlSeconds * 1000).toISOString(),
        },
        now,
      );
      await deps.outbox.add({
        type: 'oauth.grant.created',
        workspaceId,
        actor: { type: 'user', id: user._id },
        data: { subject: { type: 'oauth-grant', id: grantId }, outcome: 'allowed', agentId },
      });
      reply.hijack();
      await (await provider()).interactionFinished(request.raw, reply.raw, { login: { accountId: user._id }, consent: { grantId } }, { mergeWithLastSubmission: false });
    });

    scope.post<{ Params: { uid: string } }>(`${INTERACTION_PATH}/:uid/abort`, hidden, async (request, reply) => {
      const interaction = await interactionOf(request, reply);
      if (!interaction) return fail(reply, 400, 'invalid_request', 'This sign-in has expired or belongs to another browser.');
      reply.hijack();
      await (await provider()).interactionFinished(request.raw, reply.raw, { error: 'access_denied', error_description: 'The user declined the request' }, { mergeWithLastSubmission: false });
    });
  });
}
