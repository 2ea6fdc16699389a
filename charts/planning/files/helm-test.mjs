// `helm test`: the gateway is ready, and a sign-in followed by one authenticated request works.
// Runs in the service image (Node, no shell tools); every step prints one line.
const base = process.env.GATEWAY_URL;
const email = process.env.TEST_EMAIL;
const password = process.env.TEST_PASSWORD;

function fail(message) {
  console.error(`FAIL ${message}`);
  process.exit(1);
}

try {
  const ready = await fetch(`${base}/ready`);
  if (ready.status !== 200) fail(`GET /ready answered ${ready.status}: ${await ready.text()}`);
  console.log('ok   GET /ready');

  const login = await fetch(`${base}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (login.status !== 200) fail(`POST /api/auth/login as ${email} answered ${login.status}: ${await login.text()}`);
  const cookie = login.headers
    .getSetCookie()
    .map((value) => value.split(';', 1)[0])
    .join('; ');
  console.log(`ok   POST /api/auth/login as ${email}`);

  const session = await fetch(`${base}/api/auth/session`, { headers: { cookie } });
  if (session.status !== 200) fail(`GET /api/auth/session answered ${session.status}: ${await session.text()}`);
  const body = await session.json();
  if (body?.data?.user?.email?.toLowerCase() !== email.toLowerCase()) fail(`GET /api/auth/session names ${JSON.stringify(body?.data?.user?.email)}, not ${email}`);
  console.log('ok   GET /api/auth/session (authenticated)');
} catch (err) {
  fail(`${base}: ${err instanceof Error ? err.message : String(err)}`);
}
