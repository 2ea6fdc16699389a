/**
 * The server-rendered pages of MCP sign-in: sign in, pick a workspace, consent (agent and scopes),
 * and errors. Plain HTML forms, no script; every value is escaped. The routes that serve them
 * send `Content-Security-Policy` (no scripts, no framing) and `Cache-Control: no-store`.
 */
import type { Scope } from '@planning/plans';

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

export const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
} as const;

function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Planning service</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1f2328}
h1{font-size:1.4rem}fieldset{border:1px solid #d0d7de;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
label{display:block;margin:.4rem 0}input[type=text],input[type=email],input[type=password],select{width:100%;padding:.4rem;box-sizing:border-box}
button{padding:.5rem 1.2rem;margin-right:.5rem}.error{color:#b42318;font-weight:600}.muted{color:#59636e;font-size:.9rem}
ul{padding-left:1.2rem}code{background:#f6f8fa;padding:0 .2rem}
</style>
</head>
<body>
${body}
</body>
</html>`;
}

/** The client asking for access, as every page names it. */
export interface ClientView {
  clientId: string;
  name: string | null;
  /** Where the browser goes back to: the redirect URI's origin. */
  redirectOrigin: string | null;
}

function clientLine(client: ClientView): string {
  const name = client.name ? `<strong>${escapeHtml(client.name)}</strong>` : `the application <code>${escapeHtml(client.clientId)}</code>`;
  const back = client.redirectOrigin ? ` <span class="muted">(returns to ${escapeHtml(client.redirectOrigin)})</span>` : '';
  return `<p>${name}${back} asks to use the planning service as one of your agents, over MCP.</p>`;
}

const cancelForm = (uid: string) =>
  `<form method="post" action="/oauth/interaction/${escapeHtml(uid)}/abort"><button type="submit">Cancel</button></form>`;

export function renderSignIn(uid: string, client: ClientView, options: { email?: string; error?: string; mode: string }): string {
  return page(
    'Sign in',
    `<h1>Sign in to continue</h1>
${clientLine(client)}
${options.error ? `<p class="error">${escapeHtml(options.error)}</p>` : ''}
<form method="post" action="/oauth/interaction/${escapeHtml(uid)}/login">
<label>Email <input type="email" name="email" autocomplete="username" required value="${escapeHtml(options.email)}"></label>
<label>Password <input type="password" name="password" autocomplete="current-password" required></label>
<p class="muted">${options.mode === 'cognito' ? 'Your organization signs you in (Amazon Cognito).' : 'Your planning service account.'}</p>
<button type="submit">Sign in</button>
</form>
${cancelForm(uid)}`,
  );
}

export interface WorkspaceChoice {
  id: string;
  name: string;
  role: string;
  /** Why a grant cannot be made there, if it cannot. */
  unavailable?: string;
}

export function renderWorkspacePicker(uid: string, client: ClientView, user: { email: string }, workspaces: readonly WorkspaceChoice[]): string {
  const items = workspaces
    .map((w) =>
      w.unavailable
        ? `<li>${escapeHtml(w.name)} <span class="muted">(${escapeHtml(w.role)}; ${escapeHtml(w.unavailable)})</span></li>`
        : `<li><a href="/oauth/interaction/${escapeHtml(uid)}?workspaceId=${encodeURIComponent(w.id)}">${escapeHtml(w.name)}</a> <span class="muted">(${escapeHtml(w.role)})</span></li>`,
    )
    .join('\n');
  return page(
    'Choose a workspace',
    `<h1>Choose a workspace</h1>
${clientLine(client)}
<p class="muted">Signed in as ${escapeHtml(user.email)}.</p>
${workspaces.length > 0 ? `<ul>${items}</ul>` : '<p>You are not a member of any workspace.</p>'}
${cancelForm(uid)}`,
  );
}

export const SCOPE_DESCRIPTIONS: Readonly<Record<Scope, string>> = {
  'issues:read': 'read tasks, their briefs and guidance (needed for MCP)',
  'issues:write': 'create and change tasks, comments, time, evidence, approvals',
  'agents:read': 'see the ready-work queue',
  'agents:execute': 'claim tasks and work under a claim',
  'projects:read': 'read projects, milestones, programs and initiatives',
  'projects:write': 'change projects, milestones, programs and initiatives',
  'billing:read': 'read usage and quotas',
  admin: 'administer the workspace (keys, imports, exports, diagnostics)',
};

export interface ConsentView {
  workspace: { id: string; name: string; role: string; planId: string };
  /** Scopes the user may grant here and the client asked for: offered, checked. */
  offered: readonly Scope[];
  /** Scopes the client asked for that the user's role or the plan does not allow: never granted. */
  withheld: readonly Scope[];
  agents: readonly string[];
  /** Admins may name a new agent (agent records are created by admins, as with API keys). */
  mayCreateAgent: boolean;
  error?: string;
}

export function renderConsent(uid: string, client: ClientView, user: { email: string }, view: ConsentView): string {
  const agentOptions = view.agents.map((a) => `<option value="${escapeHtml(a)}">${escapeHtml(a)}</option>`).join('');
  const agentField =
    view.agents.length > 0 || view.mayCreateAgent
      ? `<label>Act as agent <select name="agentId">${agentOptions}${view.mayCreateAgent ? '<option value="">a new agent (name it below)</option>' : ''}</select></label>
${view.mayCreateAgent ? '<label>New agent id <input type="text" name="newAgentId" pattern="[a-z0-9][a-z0-9._-]{0,63}" placeholder="e.g. claude-code"></label>' : ''}`
      : '<p class="error">This workspace has no agents yet; ask an admin to create one (or to sign in here).</p>';
  const scopes = view.offered
    .map((s) => `<label><input type="checkbox" name="scope" value="${escapeHtml(s)}" checked> <code>${escapeHtml(s)}</code> — ${escapeHtml(SCOPE_DESCRIPTIONS[s])}</label>`)
    .join('\n');
  const withheld =
    view.withheld.length > 0
      ? `<p class="muted">Also asked for, beyond your role or the plan, and not granted: ${view.withheld.map((s) => `<code>${escapeHtml(s)}</code>`).join(', ')}.</p>`
      : '';
  return page(
    'Allow access',
    `<h1>Allow access to ${escapeHtml(view.workspace.name)}?</h1>
${clientLine(client)}
<p class="muted">Signed in as ${escapeHtml(user.email)} (${escapeHtml(view.workspace.role)}); plan ${escapeHtml(view.workspace.planId)}. <a href="/oauth/interaction/${escapeHtml(uid)}?choose=1">Another workspace</a></p>
${view.error ? `<p class="error">${escapeHtml(view.error)}</p>` : ''}
<form method="post" action="/oauth/interaction/${escapeHtml(uid)}/consent">
<input type="hidden" name="workspaceId" value="${escapeHtml(view.workspace.id)}">
<fieldset><legend>Agent</legend>${agentField}</fieldset>
<fieldset><legend>Permissions</legend>${scopes || '<p>Nothing you may grant was asked for.</p>'}${withheld}</fieldset>
<p class="muted">Requests count against this workspace's API quota and rate limits, like an API key. You can revoke this access at any time (API: <code>DELETE /api/oauth/grants/{id}</code>).</p>
<button type="submit">Allow</button>
</form>
${cancelForm(uid)}`,
  );
}

/** An error page: the OAuth error and its description, nothing internal. */
export function renderErrorPage(out: Record<string, unknown>): string {
  const error = typeof out.error === 'string' ? out.error : 'invalid_request';
  const description = typeof out.error_description === 'string' ? out.error_description : '';
  return page(
    'Sign-in failed',
    `<h1>This sign-in cannot continue</h1>
<p><code>${escapeHtml(error)}</code>${description ? ` — ${escapeHtml(description)}` : ''}</p>
<p class="muted">Start again from your agent's application.</p>`,
  );
}
