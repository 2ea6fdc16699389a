/**
 * Claims under 50 concurrent agents: claims per second and latency, through the whole stack (the
 * all-in-one production bundle over HTTP) and in process (the agents-claims service and the issues
 * service through the protobuf codec, embedded stores). Two workloads: every agent working its own
 * task (claim, release, claim again: throughput), and all 50 racing for one task (contention: one
 * winner per race). The baseline, measured in the same run with the same concurrency, is the write
 * a claim wraps: a plain status move of a task (ready → in-progress → ready) by a member, which
 * takes no claim, meters nothing and checks no race.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createClaimsHarness, type ClaimsHarness } from '@planning/agents-claims/testing/claims-harness';
import { addMember, createKey, createUser, createWorkspace, type TestKey } from '../test/support/auth.js';
import { ADMIN_EMAIL, startAllInOne, type Cluster } from '../test/support/cluster.js';
import { login, request } from '../test/support/http.js';
import { ROOT } from '../test/support/service-process.js';
import { machine, ms, summarize, type Bench, type Latency } from './support.js';

type Principal = ReturnType<ClaimsHarness['agent']>;

const AGENTS = 50;
/** Rounds per agent in the throughput workloads (each round: one measured write and its undo). */
const ROUNDS = 40;
/** Races in the contention workload. */
const RACES = 60;

interface Result {
  label: string;
  ops: number;
  wallMs: number;
  latency: Latency;
  note?: string;
}

/** Runs `rounds` rounds of `step` for each of `workers` concurrent workers; measures `step`'s first part. */
async function concurrently(workers: number, rounds: number, step: (worker: number) => Promise<number>): Promise<{ samples: number[]; wallMs: number }> {
  const samples: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let r = 0; r < rounds; r++) samples.push(await step(w));
    }),
  );
  return { samples, wallMs: performance.now() - started };
}

/**
 * Two workloads interleaved: `blocks` alternating blocks (a, b, a, b, …) of `rounds` rounds per
 * worker each, so both meet the same machine; wall time is summed per workload.
 */
async function interleaved(
  workers: number,
  blocks: number,
  rounds: number,
  a: (worker: number) => Promise<number>,
  b: (worker: number) => Promise<number>,
): Promise<[{ samples: number[]; wallMs: number }, { samples: number[]; wallMs: number }]> {
  const out: [{ samples: number[]; wallMs: number }, { samples: number[]; wallMs: number }] = [
    { samples: [], wallMs: 0 },
    { samples: [], wallMs: 0 },
  ];
  for (let block = 0; block < blocks; block++) {
    const run = await concurrently(workers, rounds, block % 2 === 0 ? a : b);
    const into = block % 2 === 0 ? out[0] : out[1];
    into.samples.push(...run.samples);
    into.wallMs += run.wallMs;
  }
  return out;
}

/** Blocks and rounds per block of the fenced-write workload (each workload: half the blocks). */
const FENCE_BLOCKS = 4;
const FENCE_ROUNDS = 10;
const FENCE_NOTE = 'interleaved with the row above, same tasks and concurrency';

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

function row(r: Result): string {
  const perSecond = (r.ops / r.wallMs) * 1000;
  return `| ${r.label} | ${perSecond.toFixed(0)} | ${ms(r.latency.p50)} | ${ms(r.latency.p99)} | ${r.note ?? ''} |`;
}

// ---- in process ----------------------------------------------------------------------------------

async function inProcess(log: (line: string) => void): Promise<Result[]> {
  // The harness's clock stands still: no lease expires while the benchmark runs.
  const h: ClaimsHarness = await createClaimsHarness();
  const ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'enterprise' });
  await h.planning.addMember(ws, 'usr_member', 'member');
  const project = await h.project(ws);
  const agents: Principal[] = Array.from({ length: AGENTS }, (_, i) => h.agent(ws, `bench-${i}`));
  const member: Principal = { type: 'user', id: 'usr_member', userId: 'usr_member', isAdmin: false, scopes: [] };
  const own = await Promise.all(agents.map(() => h.task(project)));
  const baselineTasks = await Promise.all(agents.map(() => h.task(project)));
  const results: Result[] = [];

  log('in process: baseline status moves');
  const base = await concurrently(AGENTS, ROUNDS, async (w) => {
    const id = baselineTasks[w]!;
    const t = await timed(() => h.planning.tasks.updateTask({ id, patch: { status: 'in-progress' } }, member));
    await h.planning.tasks.updateTask({ id, patch: { status: 'ready' } }, member);
    return t;
  });
  results.push({ label: 'baseline: status move ready → in-progress (member)', ops: base.samples.length, wallMs: base.wallMs, latency: summarize(base.samples) });

  log('in process: claims, each agent its own task');
  const own1 = await concurrently(AGENTS, ROUNDS, async (w) => {
    const issueId = own[w]!;
    const t = await timed(() => h.rpc.claimWork({ issueId }, { principal: agents[w]! }));
    await h.rpc.releaseClaim({ issueId }, { principal: agents[w]! });
    return t;
  });
  results.push({ label: 'claim (each agent its own task)', ops: own1.samples.length, wallMs: own1.wallMs, latency: summarize(own1.samples) });

  log('in process: 50 agents racing for one task');
  const prize = await h.task(project);
  const raceSamples: number[] = [];
  const started = performance.now();
  let won = 0;
  for (let race = 0; race < RACES; race++) {
    const outcomes = await Promise.all(
      agents.map(async (a) => {
        const t = performance.now();
        const ok: Principal | undefined = await h.rpc.claimWork({ issueId: prize }, { principal: a }).then(
          () => a,
          () => undefined,
        );
        raceSamples.push(performance.now() - t);
        return ok;
      }),
    );
    const winners = outcomes.filter((o) => o !== undefined);
    if (winners.length !== 1) throw new Error(`race ${race}: ${winners.length} winners`);
    won += 1;
    await h.rpc.releaseClaim({ issueId: prize }, { principal: winners[0]! });
  }
  results.push({
    label: 'claim race (50 agents, one task; every attempt)',
    ops: won,
    wallMs: performance.now() - started,
    latency: summarize(raceSamples),
    note: `${RACES} races, exactly one winner each; rate column: races (winning claims) per second`,
  });

  log('in process: time entries, a member unfenced beside each agent under its claim (fenced)');
  const held = await Promise.all(agents.map(async (a, w) => (await h.rpc.claimWork({ issueId: own[w]! }, { principal: a })).claim!.fencingToken));
  const [unfenced, fenced] = await interleaved(
    AGENTS,
    FENCE_BLOCKS,
    FENCE_ROUNDS,
    (w) => timed(() => h.planning.records.logTime({ issueId: own[w]!, minutes: 1 }, member)),
    (w) => timed(() => h.planning.records.logTime({ issueId: own[w]!, minutes: 1, fencingToken: held[w]! }, agents[w]!)),
  );
  results.push({ label: 'baseline: time entry on a claimed task (member, not fenced)', ops: unfenced.samples.length, wallMs: unfenced.wallMs, latency: summarize(unfenced.samples) });
  results.push({ label: 'time entry under its claim with `fencingToken` (agent, fenced)', ops: fenced.samples.length, wallMs: fenced.wallMs, latency: summarize(fenced.samples), note: FENCE_NOTE });
  await h.close();
  return results;
}

// ---- through HTTP ---------------------------------------------------------------------------------

async function throughHttp(log: (line: string) => void): Promise<Result[]> {
  if (!existsSync(join(ROOT, 'dist', 'main.mjs')) || process.env.PLANNING_SKIP_BUILD !== '1') {
    log('building dist/main.mjs');
    execFileSync(process.execPath, [join(ROOT, 'scripts/build.mjs')], { cwd: ROOT, stdio: 'ignore' });
  }
  const cluster: Cluster = await startAllInOne({ env: { LOG_LEVEL: 'error' } });
  try {
    const base = cluster.baseUrl;
    const admin = await login(base, ADMIN_EMAIL, cluster.adminPassword);
    const ws = (await createWorkspace(base, admin, 'Claims bench', 'enterprise')).id;
    const member = await createUser(base, admin, 'bench-member');
    await addMember(base, admin, ws, member.id, 'member');
    const project = (await request(base, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Bench' } })).body.data.id;
    const newTask = async () => (await request(base, 'POST', '/api/issues', { cookie: admin, body: { projectId: project, title: 'Bench task' } })).body.data.id as string;
    const scopes = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];
    const keys: TestKey[] = [];
    for (let i = 0; i < AGENTS; i++) keys.push(await createKey(base, admin, ws, 'enterprise', scopes, `http-bench-${i}`));
    const own: string[] = [];
    const baselineTasks: string[] = [];
    for (let i = 0; i < AGENTS; i++) {
      own.push(await newTask());
      baselineTasks.push(await newTask());
    }
    const expectStatus = (res: { status: number; body: unknown }, status: number) => {
      if (res.status !== status) throw new Error(`expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
    };
    const results: Result[] = [];

    log('http: baseline status moves');
    const baseline = await concurrently(AGENTS, ROUNDS, async (w) => {
      const id = baselineTasks[w]!;
      let res!: Awaited<ReturnType<typeof request>>;
      const t = await timed(async () => (res = await request(base, 'PATCH', `/api/issues/${id}`, { cookie: member.cookie, body: { status: 'in-progress' } })));
      expectStatus(res, 200);
      expectStatus(await request(base, 'PATCH', `/api/issues/${id}`, { cookie: member.cookie, body: { status: 'ready' } }), 200);
      return t;
    });
    results.push({ label: 'baseline: `PATCH /api/issues/{id}` ready → in-progress (member)', ops: baseline.samples.length, wallMs: baseline.wallMs, latency: summarize(baseline.samples) });

    log('http: claims, each agent its own task');
    const claims = await concurrently(AGENTS, ROUNDS, async (w) => {
      const issueId = own[w]!;
      const key = keys[w]!;
      let res!: Awaited<ReturnType<typeof request>>;
      const t = await timed(async () => (res = await request(base, 'POST', '/api/agents/claim', { token: key.token, body: { issueId } })));
      expectStatus(res, 200);
      expectStatus(await request(base, 'POST', `/api/agents/claims/${issueId}/release`, { token: key.token }), 200);
      return t;
    });
    results.push({ label: '`POST /api/agents/claim` (each agent its own task)', ops: claims.samples.length, wallMs: claims.wallMs, latency: summarize(claims.samples) });

    log('http: 50 agents racing for one task');
    const prize = await newTask();
    const samples: number[] = [];
    const started = performance.now();
    for (let race = 0; race < RACES; race++) {
      const answers = await Promise.all(
        keys.map(async (key) => {
          const t = performance.now();
          const res = await request(base, 'POST', '/api/agents/claim', { token: key.token, body: { issueId: prize } });
          samples.push(performance.now() - t);
          return { key, res };
        }),
      );
      const winners = answers.filter((a) => a.res.status === 200);
      if (winners.length !== 1) throw new Error(`race ${race}: ${winners.length} winners`);
      expectStatus(await request(base, 'POST', `/api/agents/claims/${prize}/release`, { token: winners[0]!.key.token }), 200);
    }
    results.push({
      label: '`POST /api/agents/claim` race (50 agents, one task; every attempt)',
      ops: RACES,
      wallMs: performance.now() - started,
      latency: summarize(samples),
      note: `${RACES} races, exactly one winner each; rate column: races (winning claims) per second`,
    });

    log('http: time entries, a member unfenced beside each agent under its claim (fenced)');
    const held: number[] = [];
    for (let w = 0; w < AGENTS; w++) {
      const res = await request(base, 'POST', '/api/agents/claim', { token: keys[w]!.token, body: { issueId: own[w]! } });
      expectStatus(res, 200);
      held.push(res.body.data.claim.fencingToken as number);
    }
    const timeEntry = async (w: number, auth: { cookie?: string; token?: string }, body: Record<string, unknown>) => {
      let res!: Awaited<ReturnType<typeof request>>;
      const t = await timed(async () => (res = await request(base, 'POST', `/api/issues/${own[w]!}/time-entries`, { ...auth, body: { minutes: 1, ...body } })));
      expectStatus(res, 201);
      return t;
    };
    const [unfenced, fenced] = await interleaved(
      AGENTS,
      FENCE_BLOCKS,
      FENCE_ROUNDS,
      (w) => timeEntry(w, { cookie: member.cookie }, {}),
      (w) => timeEntry(w, { token: keys[w]!.token }, { fencingToken: held[w]! }),
    );
    results.push({ label: 'baseline: `POST /api/issues/{id}/time-entries` on a claimed task (member, not fenced)', ops: unfenced.samples.length, wallMs: unfenced.wallMs, latency: summarize(unfenced.samples) });
    results.push({ label: 'the same under its claim with `fencingToken` (agent, fenced)', ops: fenced.samples.length, wallMs: fenced.wallMs, latency: summarize(fenced.samples), note: FENCE_NOTE });
    return results;
  } finally {
    await cluster.stop();
  }
}

/** The fenced row's rate over its baseline's (the last two rows of a table), as a percentage. */
function fenceRatio(rows: Result[]): string {
  const [base, fenced] = rows.slice(-2);
  if (!base || !fenced) return 'n/a';
  const rate = (r: Result) => r.ops / r.wallMs;
  return `${((rate(fenced) / rate(base)) * 100).toFixed(0)} %`;
}

const bench: Bench = {
  name: 'claims',
  async run(log) {
    const before = machine();
    const http = await throughHttp(log);
    const local = await inProcess(log);
    const table = (rows: Result[]) => ['| workload | ops/s | p50 | p99 | note |', '|---|---:|---:|---:|---|', ...rows.map(row)];
    return [
      '## Claims under 50 concurrent agents',
      '',
      `${before} at the start. ${AGENTS} agents work at once. Throughput rows: each agent runs ${ROUNDS} rounds of ` +
        'one measured write and its undo (claim then release; or the baseline status move then the move back), so the ' +
        'rate counts measured writes per second of wall time while the undo runs too. Race rows: all agents claim the ' +
        `same task at once, ${RACES} times; the winner releases it before the next race; latency is over every attempt ` +
        '(winners and 409s). Baseline: the write a claim wraps, a plain status move by a member (no claim, no metering, ' +
        'no race decided), at the same concurrency in the same run.',
      '',
      'Through the whole stack (the all-in-one production bundle, `dist/main.mjs`, over HTTP on loopback: gateway, ' +
        'authentication and rate limiting, in-process calls to the agents-claims and issues services (in the services\' thread), embedded stores):',
      '',
      ...table(http),
      '',
      'In process (the agents-claims and issues services called through the protobuf codec, embedded stores; no HTTP, ' +
        'no gRPC transport):',
      '',
      ...table(local),
      '',
      'Reading the table: a claim is the baseline status move plus a read of the task, the claim insert that decides ' +
        'the race (against two partial unique indexes), the agent-run counter and the claim updated in one transaction, ' +
        'the move itself with the claim mirrored on the task, and the claim marked started with its event. Claims of one ' +
        'workspace meter in turns per process (they all write the counter of the month; in parallel the transactions ' +
        'would mostly collide and retry): the claims that arrive while a turn\'s transaction runs are metered together in the next one, ' +
        'each decided as alone; the next turn starts as soon as the previous one has committed, not once its commit is on disk, so turns share flushes. A lost race ' +
        'stops at the first check that sees the winner (the task read or the insert), so race attempts are cheaper than ' +
        'winning claims.',
      '',
      `The fence rows (issue #14): every agent holds the claim of its own task and logs time on it with its fencing token, ` +
        `while a member logs time on the same tasks, in ${FENCE_BLOCKS} alternating blocks of ${FENCE_ROUNDS} rounds per agent. ` +
        'An agent\'s write asks agents-claims for its fence (one call: the task\'s latest claims read, the rule applied) before ' +
        'the issues transaction, and the transaction checks the task\'s claim mirror against it; a member without a token ' +
        `skips both. The ratio of the two rows in one run is the price of the fence: fenced writes ran at ${fenceRatio(http)} ` +
        `of the unfenced rate over HTTP, ${fenceRatio(local)} in process (where the extra call is a larger part of a cheaper write).`,
    ].join('\n');
  },
};

export default bench;
