/**
 * The request path over HTTP: the all-in-one production bundle (`node dist/main.mjs`) beside two
 * anchors run in the same session — a bare fastify hello (the ceiling of the HTTP stack) and
 * fastify → grpc-js stub (one loopback gRPC call per request, no application work) — in
 * interleaved rounds, 50 connections each, with enterprise API keys (one per connection). Then an
 * open loop of 50 agents at 4 requests/s each, idle RSS and RSS after 100,000 writes, and in
 * distributed mode two gateway processes against one on the read route.
 *
 * Load comes from autocannon in this process, on the same machine: every row pays for it alike.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon, { type AutocannonOptions, type AutocannonRequest, type AutocannonResult } from 'autocannon';
import { createClaimsHarness } from '@planning/agents-claims/testing/claims-harness';
import { createKey, createWorkspace, type TestKey } from '../test/support/auth.js';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../test/support/cluster.js';
import { eventually, login, request } from '../test/support/http.js';
import { createSqliteStore } from '@planning/store';
import { getFreePort, parsePrometheusText } from '@planning/testing';
import { ROOT } from '../test/support/service-process.js';
import { machine, ms, summarize, type Bench } from './support.js';
// @ts-expect-error plain ESM script without type declarations
import { BUNDLE_ENV, BUNDLE_NODE_FLAGS } from '../scripts/node-flags.mjs';

const CONNECTIONS = 50;
const ROUNDS = Number(process.env.HTTP_BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.HTTP_BENCH_SECONDS ?? 5);
/**
 * HTTP_BENCH_WARMUP=<seconds> (default 3; 0: none): before the first round, every row runs this
 * long unrecorded, so the rounds measure the servers with their code compiled (a cold first round
 * measured V8 compiling the request path: in a quick run, 835 PATCHes/s in the first round
 * against 1,421 and 1,402 in the next two, with V8's background threads busy compiling).
 */
const WARMUP_SECONDS = Number(process.env.HTTP_BENCH_WARMUP ?? 3);
/** How long a closed-loop row runs now: SECONDS, or WARMUP_SECONDS in the warm-up round. */
let rowSeconds = SECONDS;
const WRITES = Number(process.env.HTTP_BENCH_WRITES ?? 100_000);
const OPEN_LOOP_SECONDS = 20;
/** HTTP_BENCH_QUICK=1: only the closed-loop rows (for comparing builds or settings quickly); the section is not rewritten. */
const QUICK = process.env.HTTP_BENCH_QUICK === '1';
/** HTTP_BENCH_ONLY=byId,patch: only these closed-loop rows (with QUICK); HTTP_BENCH_ONLY=distributed: only the distributed phase; HTTP_BENCH_ONLY=memory: only the idle memory breakdown; HTTP_BENCH_ONLY=retained: that breakdown, then HTTP_BENCH_WRITES writes and where the memory is after them (HEAP_PROBE_SNAPSHOTS=<folder>: heap snapshots too); HTTP_BENCH_QUICK=1 HTTP_BENCH_ONLY=loop: only the two open-loop runs. */
const ONLY = new Set((process.env.HTTP_BENCH_ONLY ?? '').split(',').filter(Boolean));
/** HTTP_BENCH_PROFILE=<folder>: the bundle runs with --cpu-prof into that folder (one profile per thread). */
const PROFILE = process.env.HTTP_BENCH_PROFILE;
const AGENT_RATE = 4;
const SCOPES = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];

interface Run {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  rssMb: number;
  /** The server's CPU time (all threads) per request answered, in µs: steadier than rates on a busy machine. */
  cpuUsPerRequest: number;
  /**
   * How busy the server's JavaScript threads were over the run (CPU time ÷ wall time): the main
   * (gateway's) thread, and the busiest other thread, which with SERVICES_THREAD=on is the
   * services' thread (the others are V8's collector helpers and libuv's pool, where the flushes run).
   * A thread near 100 % bounds the row's rate.
   */
  busy: { main: number; other: number };
  /** Responses by status code, when some were not 2xx. */
  statuses?: Record<string, number>;
}

interface Proc {
  child: ChildProcess;
  port: number;
  url: string;
  stop(): Promise<void>;
}

function rssMb(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return kb / 1024;
  } catch {
    return 0;
  }
}

async function waitFor(url: string): Promise<void> {
  await eventually(
    async () => {
      const res = await fetch(url).catch(() => undefined);
      return res?.ok ? true : undefined;
    },
    60_000,
    url,
  );
}

async function spawnNode(args: string[], env: Record<string, string>, port: number, probe: string): Promise<Proc> {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}${probe}`);
  return {
    child,
    port,
    url,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The size of the files under `dir`, in MB. */
function folderMb(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) bytes += statSync(join(entry.parentPath, entry.name)).size;
  }
  return bytes / 1024 / 1024;
}

/** User + system CPU time in a `/proc/.../stat` file (a process's or one thread's), in ms. */
function statCpuMs(file: string): number {
  const fields = readFileSync(file, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 of the file, in clock ticks (100 per second on Linux).
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/** CPU time the process has used (user + system, all threads), in ms. */
function cpuMs(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    return statCpuMs(`/proc/${pid}/stat`);
  } catch {
    return 0;
  }
}

/** CPU time each thread of the process has used (user + system), in ms, by thread id. */
function threadCpuMs(pid: number | undefined): Map<number, number> {
  const out = new Map<number, number>();
  if (!pid) return out;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        out.set(Number(tid), statCpuMs(`/proc/${pid}/task/${tid}/stat`));
      } catch {
        // The thread ended meanwhile.
      }
    }
  } catch {
    // The process ended.
  }
  return out;
}

/** `busy` of a run (see Run): each thread's CPU time over the run ÷ the run's wall time. */
function busyOf(pid: number | undefined, before: Map<number, number>, after: Map<number, number>, wallMs: number): Run['busy'] {
  const used = (tid: number) => (after.get(tid) ?? 0) - (before.get(tid) ?? 0);
  let other = 0;
  for (const tid of after.keys()) if (tid !== pid) other = Math.max(other, used(tid));
  return wallMs > 0 && pid ? { main: used(pid) / wallMs, other: other / wallMs } : { main: 0, other: 0 };
}

/** Waits until the process has stayed nearly idle (under 10 % of a core) for a second: event consumers caught up. At most 60 s. */
async function quiet(pid: number | undefined): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const before = cpuMs(pid);
    await new Promise((r) => setTimeout(r, 1_000));
    if (cpuMs(pid) - before < 100) return;
  }
}

async function load(url: string, pid: number | undefined, options: Pick<AutocannonOptions, 'setupClient' | 'headers' | 'duration' | 'amount'>): Promise<Run> {
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 250);
  const cpuBefore = cpuMs(pid);
  const threadsBefore = threadCpuMs(pid);
  const started = performance.now();
  try {
    const result = await autocannon({
      url,
      connections: CONNECTIONS,
      ...(options.amount ? { amount: options.amount } : { duration: options.duration ?? rowSeconds }),
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.setupClient ? { setupClient: options.setupClient } : {}),
    });
    return {
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
      ...(result.non2xx > 0 ? { statuses: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, s.count])) } : {}),
      rssMb: Math.max(peak, rssMb(pid)),
      cpuUsPerRequest: result.requests.total > 0 ? ((cpuMs(pid) - cpuBefore) * 1000) / result.requests.total : 0,
      busy: busyOf(pid, threadsBefore, threadCpuMs(pid), performance.now() - started),
    };
  } finally {
    clearInterval(sampler);
  }
}

/** The middle value (the upper one of an even count; 0 for none). */
function mid(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

/** Medians of the rounds (rate, p50, p99), the sums of failures and the peak RSS. */
function median(runs: Run[]): Run {
  return {
    rps: mid(runs.map((r) => r.rps)),
    p50: mid(runs.map((r) => r.p50)),
    p99: mid(runs.map((r) => r.p99)),
    non2xx: runs.reduce((s, r) => s + r.non2xx, 0),
    errors: runs.reduce((s, r) => s + r.errors, 0),
    rssMb: Math.max(...runs.map((r) => r.rssMb)),
    cpuUsPerRequest: mid(runs.map((r) => r.cpuUsPerRequest)),
    busy: { main: mid(runs.map((r) => r.busy.main)), other: mid(runs.map((r) => r.busy.other)) },
  };
}

/**
 * Per connection: its own key (and, through `build`, its own task) for the whole run, handed out
 * in connection order. (Set on autocannon's client: a request's `setupRequest` context is cleared
 * each time the connection starts its list of requests again, so a connection would take the next
 * key and task in turn, and two connections could work one agent's task at once: claims refused
 * as already claimed, the agent's previous claim still on it.)
 */
function perConnection(keys: TestKey[], build: (key: TestKey, index: number) => AutocannonRequest[]): Pick<AutocannonOptions, 'setupClient'> {
  let next = 0;
  return {
    setupClient(client) {
      const index = next++ % keys.length;
      const key = keys[index]!;
      client.setRequests(build(key, index).map((r) => ({ ...r, headers: { ...r.headers, authorization: `Bearer ${key.token}`, 'content-type': 'application/json' } })));
    },
  };
}

/** Each connection moves its own task to ready and back to backlog, as a member (the status-move rows). */
function statusMoves(f: Pick<Fixture, 'writeKeys' | 'patchTasks'>): Pick<AutocannonOptions, 'setupClient'> {
  return perConnection(f.writeKeys, (_key, i) => [
    { method: 'PATCH', path: `/api/issues/${f.patchTasks[i]}`, body: JSON.stringify({ status: 'ready' }) },
    { method: 'PATCH', path: `/api/issues/${f.patchTasks[i]}`, body: JSON.stringify({ status: 'backlog' }) },
  ]);
}

interface Fixture {
  keys: TestKey[];
  writeKeys: TestKey[];
  agentKeys: TestKey[];
  workspaceId: string;
  byId: string;
  ownTasks: string[];
  patchTasks: string[];
  loopTasks: string[][];
}

async function seed(base: string, adminPassword: string, log: (line: string) => void, withLoopTasks: boolean): Promise<Fixture> {
  const admin = await login(base, ADMIN_EMAIL, adminPassword);
  const workspaceId = (await createWorkspace(base, admin, `HTTP bench ${randomBytes(3).toString('hex')}`, 'enterprise')).id as string;
  const project = (await request(base, 'POST', '/api/projects', { cookie: admin, body: { workspaceId, name: 'Bench' } })).body.data.id as string;
  const description = 'Make the thing work end to end, with tests and a short note on what changed and why. '.repeat(3);
  const task = async (title: string, extra: Record<string, unknown> = {}): Promise<string> => {
    const res = await request(base, 'POST', '/api/issues', {
      cookie: admin,
      body: { projectId: project, title, description, status: 'ready', priority: 'high', labels: ['bench'], acceptanceChecks: [{ title: 'Tests pass' }], ...extra },
    });
    if (res.status !== 201) throw new Error(`create task: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  log('seeding keys and tasks');
  const keys: TestKey[] = [];
  const writeKeys: TestKey[] = [];
  const agentKeys: TestKey[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    keys.push(await createKey(base, admin, workspaceId, 'enterprise', SCOPES, `reader-${i}`));
    writeKeys.push(await createKey(base, admin, workspaceId, 'enterprise', SCOPES, `writer-${i}`));
    agentKeys.push(await createKey(base, admin, workspaceId, 'enterprise', SCOPES, `agent-${i}`));
  }
  // 200 ready tasks for the pages (the by-id task among them), plus each claimer's and patcher's own.
  const ready: string[] = [];
  for (let i = 0; i < 200; i++) ready.push(await task(`Ready ${i}`));
  const ownTasks: string[] = [];
  const patchTasks: string[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    ownTasks.push(await task(`Claimed by agent ${i}`, { status: 'backlog' }));
    patchTasks.push(await task(`Patched ${i}`, { status: 'backlog' }));
  }
  const loopTasks: string[][] = [];
  // Two open-loop runs (agents out of step, then in step), each using a task per five requests.
  const perAgent = withLoopTasks ? 2 * (Math.ceil((OPEN_LOOP_SECONDS * AGENT_RATE) / 5) + 2) : 0;
  for (let i = 0; i < CONNECTIONS; i++) {
    const mine: string[] = [];
    for (let j = 0; j < perAgent; j++) mine.push(await task(`Loop ${i}.${j}`, { status: 'backlog', agent: { assignedAgentId: `agent-${i}` } }));
    loopTasks.push(mine);
  }
  return { keys, writeKeys, agentKeys, workspaceId, byId: ready[17]!, ownTasks, patchTasks, loopTasks };
}

/** Moves tasks between `backlog` and `ready` (the rows' own tasks stay out of the 200-task page). */
async function setStatus(base: string, token: string, id: string, status: string): Promise<void> {
  const res = await request(base, 'PATCH', `/api/issues/${id}`, { token, body: { status } });
  if (res.status !== 200) throw new Error(`PATCH ${id} ${status}: ${res.status} ${JSON.stringify(res.body)}`);
}

/** 50 agents, each at `AGENT_RATE` requests per second on a fixed schedule: latency counts from the scheduled time. */
const LOOP_STEPS = ['ready work', 'claim', 'status post', 'evidence', 'move to in-review'] as const;

/**
 * `mixed`: the agents are spread over the five steps (agent i starts i mod 5 intervals late), so at
 * any moment a fifth of them is on each step, as independent agents would be; `in-step`: every
 * agent on the same step at the same time (200 claims per second for a quarter of a second, then
 * 200 status posts, ...), the worst case of a fleet started together. `tasksOf(i)`: agent i's tasks.
 */
async function openLoop(
  base: string,
  f: Fixture,
  mode: 'mixed' | 'in-step',
  tasksOf: (agent: number) => string[],
): Promise<{ samples: number[]; failures: number; requests: number; service: number[][] }> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS * 2 });
  const url = new URL(base);
  const send = (method: string, path: string, token: string, body?: unknown): Promise<{ status: number; json: unknown }> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = httpRequest(
        { host: url.hostname, port: url.port, method, path, agent, headers: { authorization: `Bearer ${token}`, ...(payload ? { 'content-type': 'application/json' } : {}) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let json: unknown;
            try {
              json = JSON.parse(text);
            } catch {
              json = text;
            }
            resolve({ status: res.statusCode ?? 0, json });
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  const samples: number[] = [];
  // Each step's own answer time (from its send, not its schedule): where a backlog comes from.
  const service: number[][] = LOOP_STEPS.map(() => []);
  let failures = 0;
  const started = performance.now();
  const interval = 1000 / AGENT_RATE;
  await Promise.all(
    f.agentKeys.map(async (key, i) => {
      // Spread the agents' schedules over one interval (and, mixed, over the five steps).
      const first = started + (mode === 'mixed' ? interval * (i % LOOP_STEPS.length) : 0) + (interval * i) / CONNECTIONS;
      let due = first;
      const tasks = tasksOf(i);
      let task: string | undefined;
      let fencingToken: number | undefined;
      let step = 0;
      while (due - first < OPEN_LOOP_SECONDS * 1000) {
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        let res: { status: number; json: unknown };
        const sent = performance.now();
        switch (step) {
          case 0:
            task = tasks.shift();
            res = await send('GET', '/api/agents/ready-work?limit=5', key.token);
            break;
          case 1:
            res = await send('POST', '/api/agents/claim', key.token, { issueId: task });
            fencingToken = (res.json as { data?: { claim?: { fencingToken?: number } } }).data?.claim?.fencingToken;
            break;
          case 2:
            res = await send('POST', `/api/agents/claims/${task}/status`, key.token, { message: 'Tests written, implementing', fencingToken });
            break;
          case 3:
            res = await send('POST', `/api/issues/${task}/evidence`, key.token, { kind: 'test-result', title: 'unit tests pass', body: '42 passed' });
            break;
          default:
            res = await send('PATCH', `/api/issues/${task}`, key.token, { status: 'in-review', fencingToken });
        }
        samples.push(performance.now() - due);
        service[step]!.push(performance.now() - sent);
        if (res.status >= 300) failures += 1;
        step = (step + 1) % 5;
        due += interval;
      }
    }),
  );
  agent.destroy();
  return { samples, failures, requests: samples.length, service };
}

/**
 * Claims per second with the claims and issues services called in process (no HTTP, no gateway),
 * 50 agents each claiming and releasing its own task. `file`: each store a SQLite file in a
 * temporary folder, every commit flushed before it resolves, as the bundle keeps its stores;
 * `memory`: SQLite in memory (nothing flushed).
 */
async function inProcessClaimRate(kind: 'file' | 'memory'): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-claims-'));
  let n = 0;
  const h = await createClaimsHarness(kind === 'file' ? { openStore: () => createSqliteStore({ path: join(dir, `store-${n++}.sqlite`) }) } : {});
  try {
    const ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'enterprise' });
    const project = await h.project(ws);
    const agents = Array.from({ length: CONNECTIONS }, (_, i) => h.agent(ws, `inproc-${i}`));
    const own = await Promise.all(agents.map(() => h.task(project)));
    let claims = 0;
    const until = performance.now() + SECONDS * 1000;
    await Promise.all(
      agents.map(async (principal, w) => {
        while (performance.now() < until) {
          await h.rpc.claimWork({ issueId: own[w]! }, { principal });
          await h.rpc.releaseClaim({ issueId: own[w]! }, { principal });
          claims += 1;
        }
      }),
    );
    return claims / SECONDS;
  } finally {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every process under `root` (the benchmark's children and theirs), named by what it runs. */
function processTree(root: number): Map<number, string> {
  const children = new Map<number, number[]>();
  const names = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), pid]);
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const target = args.find((a) => a.startsWith('--target='))?.slice('--target='.length);
      names.set(pid, target ?? (args.some((a) => a.includes('mongo-wire')) ? "mongo-wire (the gateways' store)" : (args[0]?.split(' ')[0]?.split('/').pop() ?? '?')));
    } catch {
      // gone meanwhile
    }
  }
  const tree = new Map<number, string>();
  const walk = (pid: number) => {
    for (const child of children.get(pid) ?? []) {
      tree.set(child, names.get(child) ?? '?');
      walk(child);
    }
  };
  walk(root);
  return tree;
}

/** CPU time per process of the tree during `work`, and the benchmark process's own (the load generator), in ms. */
async function cpuDuring<T>(work: () => Promise<T>): Promise<{ result: T; cpu: Map<string, number>; wallMs: number }> {
  const tree = processTree(process.pid);
  const before = new Map([...tree.keys()].map((pid) => [pid, cpuMs(pid)]));
  const self = process.cpuUsage();
  const started = performance.now();
  const result = await work();
  const wallMs = performance.now() - started;
  const cpu = new Map<string, number>();
  for (const [pid, name] of tree) {
    const used = cpuMs(pid) - (before.get(pid) ?? 0);
    if (used > 0) cpu.set(name, (cpu.get(name) ?? 0) + used);
  }
  const own = process.cpuUsage(self);
  cpu.set('load generator (autocannon, this process)', (own.user + own.system) / 1000);
  return { result, cpu, wallMs };
}

interface DistributedResult {
  oneGateway?: Run;
  twoGateways?: Run;
  failure?: string;
  /** Cores used per process (CPU time ÷ wall time over the rounds), per phase. */
  cores: { one: Map<string, number>; two: Map<string, number> };
  /** CPU time per request answered, per process, in µs, per phase. */
  perRequest: { one: Map<string, number>; two: Map<string, number> };
}

/**
 * Distributed mode on the read route: one gateway, then two gateway processes, against the same
 * services, NATS, Redis and the gateways' shared store, with the CPU each process used in each phase.
 */
async function distributedPhase(log: (line: string) => void): Promise<DistributedResult> {
  log('distributed: one gateway, then two');
  const cores = { one: new Map<string, number>(), two: new Map<string, number>() };
  const perRequest = { one: new Map<string, number>(), two: new Map<string, number>() };
  const wall = { one: 0, two: 0 };
  const answered = { one: 0, two: 0 };
  const addCpu = (phase: 'one' | 'two', cpu: Map<string, number>, wallMs: number, requests: number) => {
    wall[phase] += wallMs;
    answered[phase] += requests;
    for (const [name, used] of cpu) cores[phase].set(name, (cores[phase].get(name) ?? 0) + used);
  };
  let cluster: Cluster | undefined;
  try {
    // Each process's own Prometheus endpoint would contend for one port: not what is measured here.
    // The gateways share one store (API keys, meters), as replicas share a MongoDB: the test
    // support's mongo-wire server, the embedded store behind MongoDB's wire protocol.
    cluster = await startCluster('distributed', { mongoWire: true, env: { LOG_LEVEL: 'warn', OTEL_METRICS_EXPORTER: 'none' } });
    const base = cluster.baseUrl;
    const admin = await login(base, ADMIN_EMAIL, cluster.adminPassword);
    const ws = (await createWorkspace(base, admin, 'HTTP bench distributed', 'enterprise')).id as string;
    const project = (await request(base, 'POST', '/api/projects', { cookie: admin, body: { workspaceId: ws, name: 'Bench' } })).body.data.id;
    const id = (await request(base, 'POST', '/api/issues', { cookie: admin, body: { projectId: project, title: 'Read me' } })).body.data.id as string;
    const keys: TestKey[] = [];
    for (let i = 0; i < CONNECTIONS; i++) keys.push(await createKey(base, admin, ws, 'enterprise', SCOPES, `dist-${i}`));
    const second = await cluster.addGateway();
    const read = () => perConnection(keys, () => [{ method: 'GET', path: `/api/issues/${id}` }]);
    const ones: Run[] = [];
    const twos: Run[] = [];
    // Half the connections on each gateway, at once.
    const bothGateways = (duration: number) =>
      Promise.all([base, second.baseUrl].map((url) => autocannon({ url, connections: CONNECTIONS / 2, duration, ...read() })));
    // Both gateways (and the services behind them) warm before the rounds, unrecorded.
    if (WARMUP_SECONDS > 0) await bothGateways(WARMUP_SECONDS);
    for (let round = 1; round <= ROUNDS; round++) {
      const one = await cpuDuring(() => load(base, undefined, read()));
      ones.push(one.result);
      addCpu('one', one.cpu, one.wallMs, one.result.rps * SECONDS);
      const two = await cpuDuring(() => bothGateways(SECONDS));
      const [a, b] = two.result as [AutocannonResult, AutocannonResult];
      addCpu('two', two.cpu, two.wallMs, a.requests.total + b.requests.total);
      twos.push({
        rps: a.requests.average + b.requests.average,
        p50: Math.max(a.latency.p50, b.latency.p50),
        p99: Math.max(a.latency.p99, b.latency.p99),
        non2xx: a.non2xx + b.non2xx,
        errors: a.errors + b.errors,
        rssMb: 0,
        cpuUsPerRequest: 0,
        busy: { main: 0, other: 0 },
      });
      log(`distributed round ${round}: one gateway ${fmt(one.result.rps)}/s, two gateways ${fmt(a.requests.average + b.requests.average)}/s`);
    }
    for (const phase of ['one', 'two'] as const) {
      for (const [name, used] of cores[phase]) {
        perRequest[phase].set(name, (used * 1000) / Math.max(1, answered[phase]));
        cores[phase].set(name, used / wall[phase]);
      }
      log(`distributed, ${phase === 'one' ? 'one gateway' : 'two gateways'}: cores used: ${describeCores(cores[phase])}; CPU per request: ${describePerRequest(perRequest[phase])}`);
    }
    return { oneGateway: median(ones), twoGateways: median(twos), cores, perRequest };
  } catch (err) {
    // The all-in-one rows are kept; the section says what could not be measured.
    const failure = (err as Error).message.split('\n')[0];
    log(`distributed phase failed: ${failure}`);
    return { failure: failure ?? 'unknown failure', cores, perRequest };
  } finally {
    await cluster?.stop();
  }
}

/** "gateway 480 µs, issues 260 µs, …" (largest first). */
function describePerRequest(perRequest: Map<string, number>): string {
  return [...perRequest]
    .filter(([, us]) => us >= 1)
    .sort((a, b) => b[1] - a[1])
    .map(([name, us]) => `${name} ${fmt(us)} µs`)
    .join(', ');
}

/**
 * What two gateway processes can give over one on this machine, from the CPU per request of one
 * gateway's phase: one gateway is bound by its own core; two are bound by the machine's cores
 * shared with everything else a request costs (services, stores, the load generator).
 */
function twoGatewayCeiling(perRequest: Map<string, number>): { othersPerGateway: number; ceiling: number } {
  const gateway = perRequest.get('gateway') ?? 0;
  const others = [...perRequest].filter(([name]) => name !== 'gateway').reduce((sum, [, us]) => sum + us, 0);
  const othersPerGateway = gateway > 0 ? others / gateway : 0;
  // One gateway's phase is bound by min(its core, the machine); two gateways' by min(two cores, the machine).
  return { othersPerGateway, ceiling: Math.max(1, Math.min(2, cpus().length / (1 + othersPerGateway))) };
}

/** "gateway 0.62, issues 0.31, …" (cores, largest first), with the total. */
function describeCores(cores: Map<string, number>): string {
  const sorted = [...cores].filter(([, c]) => c >= 0.005).sort((a, b) => b[1] - a[1]);
  const total = sorted.reduce((sum, [, c]) => sum + c, 0);
  return `${sorted.map(([name, c]) => `${name} ${c.toFixed(2)}`).join(', ')}; total ${total.toFixed(2)} of ${cpus().length}`;
}

interface ThreadHeap {
  thread: 'main' | 'services';
  committed: number;
  used: number;
  /** Memory outside the heap that the isolate's objects hold (array buffers, strings of native addons). */
  external?: number;
  spaces: Record<string, { committed: number; used: number }>;
}

/** The all-in-one bundle's environment on loopback ports of its own, without the demo workspace. */
async function bundleEnv(port: number, adminPassword: string, servicesThread: 'on' | 'off') {
  return {
    // As `pnpm start` and the image give it (scripts/node-flags.mjs).
    ...(BUNDLE_ENV as Record<string, string>),
    PORT: String(port),
    GRPC_PORT: String(await getFreePort()),
    METRICS_PORT: String(await getFreePort()),
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    SERVICE_DEMO: '0',
    SERVICE_ADMIN_PASSWORD: adminPassword,
    SERVICES_THREAD: servicesThread,
  };
}

/** Seconds after `/ready` of the second idle reading: each thread's start-up compaction has run by then (after six quiet seconds). */
const QUIET_SECONDS = Number(process.env.HTTP_BENCH_QUIET_SECONDS ?? 12);
/** Starts of each layout whose idle RSS is read (the median is reported); quick runs read one. */
const IDLE_STARTS = QUICK ? 1 : 3;

interface HeapReading {
  rssMb: number;
  threads: ThreadHeap[];
}

/**
 * Where the idle bundle's memory is: a copy started only for this with bench/heap-probe.mjs
 * (`--import`), read 3 s after `/ready` like the idle RSS and again QUIET_SECONDS after it, each thread's V8 heap spaces. The rest of the resident set is outside the V8 heaps
 * (Node's own code and data, the second isolate, native addons, malloc).
 */
async function heapBreakdown(
  adminPassword: string,
  log: (line: string) => void,
  writes = 0,
): Promise<{ start: HeapReading; settled: HeapReading; writes?: { garbage: HeapReading; retained: HeapReading } } | undefined> {
  const dir = mkdtempSync(join(tmpdir(), 'planning-bench-heap-'));
  const port = await getFreePort();
  const env = {
    ...(await bundleEnv(port, adminPassword, 'on')),
    DATA_DIR: join(dir, 'data'),
    HEAP_PROBE_TRIGGER: join(dir, 'now'),
    HEAP_PROBE_OUT: join(dir, 'heap'),
    ...(process.env.HEAP_PROBE_SNAPSHOTS ? { HEAP_PROBE_SNAPSHOTS: process.env.HEAP_PROBE_SNAPSHOTS } : {}),
  };
  const proc = await spawnNode([...(BUNDLE_NODE_FLAGS as string[]), '--expose-gc', '--import', join(ROOT, 'bench/heap-probe.mjs'), join(ROOT, 'dist/main.mjs')], env, port, '/ready');
  const read = async (label: string): Promise<HeapReading> => {
    writeFileSync(env.HEAP_PROBE_TRIGGER, label);
    const threads = await eventually(
      async () => {
        const files = readdirSync(dir).filter((name) => name.startsWith(`heap.${label}.`) && name.endsWith('.json'));
        return files.length >= 2 ? files.map((name) => JSON.parse(readFileSync(join(dir, name), 'utf8')) as ThreadHeap) : undefined;
      },
      label.endsWith('-snap') ? 300_000 : 10_000,
      'heap probe',
    );
    return { rssMb: rssMb(proc.child.pid), threads: threads.sort((a, b) => a.thread.localeCompare(b.thread)) };
  };
  try {
    await new Promise((r) => setTimeout(r, 3_000));
    const start = await read('start');
    log(`idle memory 3 s after start: ${describeHeaps(start)}`);
    await new Promise((r) => setTimeout(r, (QUIET_SECONDS - 3) * 1000));
    const settled = await read('settled');
    log(`idle memory ${QUIET_SECONDS} s after start: ${describeHeaps(settled)}`);
    if (writes === 0) return { start, settled };
    // The same copy after `writes` status moves: read as they leave it, then after a full garbage
    // collection in each thread (what is retained, not what has not been collected yet).
    const f = await seed(proc.url, adminPassword, log, false);
    log(`${fmt(writes)} writes in the heap probe's copy`);
    const run = await load(proc.url, proc.child.pid, {
      amount: writes,
      ...statusMoves(f),
    });
    log(`writes: ${fmt(run.rps)}/s, ${run.non2xx + run.errors} failed`);
    await new Promise((r) => setTimeout(r, 5_000));
    log(`consumers after the writes: ${await consumerLag(env.METRICS_PORT)}`);
    const garbage = await read('writes');
    log(`after the writes: ${describeHeaps(garbage)}`);
    const retained = await read('writes-gc');
    log(`after the writes and a full collection: ${describeHeaps(retained)}; data ${mb(folderMb(env.DATA_DIR))}`);
    // HEAP_PROBE_SNAPSHOTS=<dir>: each thread also writes a heap snapshot there (after a collection).
    if (process.env.HEAP_PROBE_SNAPSHOTS) await read('writes-gc-snap');
    return { start, settled, writes: { garbage, retained } };
  } catch (err) {
    log(`heap probe failed: ${(err as Error).message}`);
    return undefined;
  } finally {
    await proc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The embedded stores' write-ahead-log flushes so far, from the bundle's /metrics (`planning.store.flush.duration`). */
interface Flushes {
  count: Map<string, number>;
  sum: number;
  /** Cumulative count per bucket bound (seconds), over every store. */
  buckets: Map<number, number>;
}

async function flushes(metricsPort: string): Promise<Flushes> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text().catch(() => '');
  const families = parsePrometheusText(text);
  const family = families.get('planning_store_flush_duration_seconds') ?? families.get('planning_store_flush_duration');
  const out: Flushes = { count: new Map(), sum: 0, buckets: new Map() };
  for (const sample of family?.samples ?? []) {
    const store = sample.labels.planning_store ?? '?';
    out.count.set(store, (out.count.get(store) ?? 0) + (sample.count ?? 0));
    out.sum += sample.sum ?? 0;
    for (const [le, cumulative] of Object.entries(sample.buckets ?? {})) {
      if (le !== '+Inf') out.buckets.set(Number(le), (out.buckets.get(Number(le)) ?? 0) + cumulative);
    }
  }
  return out;
}

/** What the flushes between two readings were: per request, by store, their mean and the bucket bounds of their p50 and p99. */
function describeFlushes(before: Flushes, after: Flushes, requests: number): string {
  const stores = [...after.count.entries()].map(([store, n]) => [store, n - (before.count.get(store) ?? 0)] as const).filter(([, n]) => n > 0);
  const total = stores.reduce((t, [, n]) => t + n, 0);
  if (total === 0 || requests === 0) return 'no flushes recorded';
  const bound = (q: number): string => {
    for (const [le, cumulative] of [...after.buckets.entries()].sort((a, b) => a[0] - b[0])) {
      if (cumulative - (before.buckets.get(le) ?? 0) >= q * total) return `≤ ${ms(le * 1000)}`;
    }
    return '> 1 s';
  };
  return (
    `${(total / requests).toFixed(1)} flushes per request (${stores.map(([store, n]) => `${store} ${(n / requests).toFixed(2)}`).join(', ')}), ` +
    `${ms(((after.sum - before.sum) / total) * 1000)} mean, p50 ${bound(0.5)}, p99 ${bound(0.99)}`
  );
}

/** How far the bus's consumers are behind: mean audit write lag and bus consume lag from the bundle's /metrics. */
async function consumerLag(metricsPort: string): Promise<string> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text().catch(() => '');
  const total = (name: string) => {
    let sum = 0;
    for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'gm'))) sum += Number(m[1]);
    return sum;
  };
  const mean = (name: string) => {
    const count = total(`${name}_count`);
    return count > 0 ? `${(total(`${name}_sum`) / count).toFixed(2)} s mean over ${fmt(count)}` : 'none recorded';
  };
  return `audit write lag ${mean(text.includes('planning_audit_write_lag_seconds') ? 'planning_audit_write_lag_seconds' : 'planning_audit_write_lag')}; bus consume lag ${mean(text.includes('planning_bus_consume_lag_seconds') ? 'planning_bus_consume_lag_seconds' : 'planning_bus_consume_lag')}`;
}

/** "main thread: 80 MB of heap (new 32, old 44, …); services thread: …; outside the V8 heaps 70 MB". */
function describeHeaps(heaps: HeapReading): string {
  const m = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
  const threads = heaps.threads.map((t) => {
    const spaces = Object.entries(t.spaces)
      .filter(([, s]) => s.committed >= 512 * 1024)
      .map(([name, s]) => `${name.replace(/_/g, ' ')} ${m(s.committed)} (${m(s.used)} in use)`)
      .join(', ');
    const external = t.external ? `; external ${m(t.external)}` : '';
    return `the ${t.thread === 'main' ? "gateway's (main)" : "services'"} thread's V8 heap ${m(t.committed)} MB committed: ${spaces}${external}`;
  });
  const heapMb = heaps.threads.reduce((sum, t) => sum + t.committed, 0) / 1024 / 1024;
  return `${threads.join('; ')}; outside the V8 heaps (Node's own code and data, the second isolate, SQLite and the other native addons, malloc) ${Math.max(0, heaps.rssMb - heapMb).toFixed(0)} MB of ${heaps.rssMb.toFixed(0)} MB`;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const mb = (n: number) => `${Math.round(n)} MB`;
const pct = (n: number) => `${Math.round(n * 100)} %`;

const bench: Bench = {
  name: 'http',
  async run(log) {
    const startedLoad = loadavg()[0]!.toFixed(2);
    const header = machine();
    if (!existsSync(join(ROOT, 'dist', 'main.mjs')) || process.env.PLANNING_SKIP_BUILD !== '1') {
      log('building dist/main.mjs');
      execFileSync(process.execPath, [join(ROOT, 'scripts/build.mjs')], { cwd: ROOT, stdio: 'ignore' });
    }

    if (ONLY.size === 1 && ONLY.has('distributed')) {
      // HTTP_BENCH_ONLY=distributed: that phase alone (the section is not rewritten).
      const only = await distributedPhase(log);
      const bound = twoGatewayCeiling(only.perRequest.one);
      log(
        `distributed: one gateway ${fmt(only.oneGateway?.rps ?? 0)}/s, two ${fmt(only.twoGateways?.rps ?? 0)}/s (${((only.twoGateways?.rps ?? 0) / (only.oneGateway?.rps ?? 1)).toFixed(2)} ×); ` +
          `the rest costs ${bound.othersPerGateway.toFixed(2)} × the gateway's CPU per request: ceiling ${bound.ceiling.toFixed(2)} × on ${cpus().length} cores`,
      );
      return null;
    }
    if (ONLY.size === 1 && ONLY.has('memory')) {
      // HTTP_BENCH_ONLY=memory: where the idle bundle's memory is, alone (the section is not rewritten).
      await heapBreakdown(`pw-${randomBytes(12).toString('hex')}`, log);
      return null;
    }
    if (ONLY.size === 1 && ONLY.has('retained')) {
      // HTTP_BENCH_ONLY=retained: the idle breakdown, then where the memory is after WRITES writes.
      await heapBreakdown(`pw-${randomBytes(12).toString('hex')}`, log, WRITES);
      return null;
    }
    const quickSummary = () =>
      [...rows.entries()].map(([label, runs]) => `${label}: ${fmt(median(runs).rps)}/s p99 ${ms(median(runs).p99)}`).join('\n');
    // ---- all-in-one beside the anchors ------------------------------------------------------------
    const helloPort = await getFreePort();
    const stubPort = await getFreePort();
    const hello = await spawnNode([join(ROOT, 'bench/anchors/hello.mjs'), String(helloPort)], {}, helloPort, '/hello');
    const stub = await spawnNode([join(ROOT, 'bench/anchors/grpc-stub.mjs'), String(stubPort)], {}, stubPort, '/stub/warm');
    const adminPassword = `pw-${randomBytes(12).toString('hex')}`;
    /** The bundle with a layout (SERVICES_THREAD), on loopback ports and a data folder of its own, as `pnpm start` and the image start it (scripts/node-flags.mjs). */
    const launch = async (layout: 'on' | 'off', nodeArgs: string[] = []) => {
      const port = await getFreePort();
      const env = {
        ...(await bundleEnv(port, adminPassword, layout)),
        // Stores on disk, as `pnpm start` keeps them (durable commits included), in a folder of
        // the benchmark's own that is removed afterwards: the resident set then shows the
        // process, not the data, and the data's own size is the folder's.
        DATA_DIR: mkdtempSync(join(tmpdir(), `planning-bench-${layout}-`)),
        ...(process.env.RPC_TRANSPORT ? { RPC_TRANSPORT: process.env.RPC_TRANSPORT } : {}),
      };
      const proc = await spawnNode([...(BUNDLE_NODE_FLAGS as string[]), ...nodeArgs, join(ROOT, 'dist/main.mjs')], env, port, '/ready');
      return { proc, dataDir: env.DATA_DIR, metricsPort: env.METRICS_PORT };
    };
    /** The bundle the rows load, seeded with its own workspace. */
    const startApp = async (layout: 'on' | 'off', loopTasks: boolean) => {
      const nodeArgs = PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}/${layout}`] : [];
      if (process.env.HTTP_BENCH_NODE_ARGS) nodeArgs.push(...process.env.HTTP_BENCH_NODE_ARGS.split(' '));
      const { proc, dataDir, metricsPort } = await launch(layout, nodeArgs);
      const { idle, quiet } = await idleReadings(proc, layout);
      return { proc, idle, quiet, dataDir, metricsPort, f: await seed(proc.url, adminPassword, log, loopTasks) };
    };
    /** RSS 3 s after `/ready`, and again once the process has been quiet long enough for its start-up compaction (each thread collects once after six quiet seconds: libs/runtime/src/quiet-compaction.ts). */
    const idleReadings = async (proc: Proc, layout: 'on' | 'off') => {
      await new Promise((r) => setTimeout(r, 3_000));
      const idle = rssMb(proc.child.pid);
      await new Promise((r) => setTimeout(r, (QUIET_SECONDS - 3) * 1000));
      const quiet = rssMb(proc.child.pid);
      log(`SERVICES_THREAD=${layout}: idle RSS ${idle.toFixed(0)} MB 3 s after start, ${quiet.toFixed(0)} MB after ${QUIET_SECONDS} s`);
      return { idle, quiet };
    };
    /** A start of the bundle only to read its idle RSS (the idle figures are medians over IDLE_STARTS starts per layout, alternated). */
    const idleStart = async (layout: 'on' | 'off') => {
      const { proc, dataDir } = await launch(layout);
      try {
        return await idleReadings(proc, layout);
      } finally {
        await proc.stop();
        rmSync(dataDir, { recursive: true, force: true });
      }
    };
    const rows = new Map<string, Run[]>();
    const want = (row: string) => ONLY.size === 0 || ONLY.has(row);
    const record = (label: string, run: Run) => {
      log(`${label}: ${fmt(run.rps)}/s p50 ${ms(run.p50)} p99 ${ms(run.p99)} cpu ${fmt(run.cpuUsPerRequest)} µs/req busy ${pct(run.busy.main)} main, ${pct(run.busy.other)} busiest other thread, rss ${mb(run.rssMb)} failed ${run.non2xx + run.errors}${run.statuses ? ` (statuses ${JSON.stringify(run.statuses)})` : ''}`);
      rows.set(label, [...(rows.get(label) ?? []), run]);
    };
    let afterWritesRss: number;
    let dataMb: number;
    let heapNote: string;
    let lagNote: string;
    // The in-process claim rates of every round: their medians are the baseline, as the rows' are theirs.
    const claimRates: number[] = [];
    const claimRatesMemory: number[] = [];
    let loop: Awaited<ReturnType<typeof openLoop>> | undefined;
    let loopInStep: Awaited<ReturnType<typeof openLoop>> | undefined;
    let loopFlushes: string | undefined;
    let loopInStepFlushes: string | undefined;
    const heaps = QUICK ? undefined : await heapBreakdown(adminPassword, log);
    const two = await startApp('on', !QUICK || ONLY.has('loop'));
    const one = await startApp('off', false);
    const app = two.proc;
    try {
      for (let round = WARMUP_SECONDS > 0 ? 0 : 1; round <= ROUNDS; round++) {
        // Round 0: the warm-up, every row for WARMUP_SECONDS, nothing recorded.
        const add = round === 0 ? () => {} : record;
        rowSeconds = round === 0 ? WARMUP_SECONDS : SECONDS;
        log(round === 0 ? `warm-up: every row for ${WARMUP_SECONDS} s, unrecorded` : `round ${round} of ${ROUNDS}`);
        if (want('hello')) add('hello', await load(`${hello.url}/hello`, hello.child.pid, {}));
        if (want('stub')) add('stub', await load(`${stub.url}/stub/tsk_1`, stub.child.pid, {}));
        for (const [suffix, { proc, f }] of [['', two], [':one', one]] as const) {
          const ready200 = `/api/issues?workspaceId=${f.workspaceId}&status=ready&limit=200`;
          const ready50 = `/api/issues?workspaceId=${f.workspaceId}&status=ready&limit=50`;
          const pid = proc.child.pid;
          if (want('byId')) add(`byId${suffix}`, await load(proc.url, pid, perConnection(f.keys, () => [{ method: 'GET', path: `/api/issues/${f.byId}` }])));
          if (want('ready')) add(`ready${suffix}`, await load(proc.url, pid, perConnection(f.agentKeys, () => [{ method: 'GET', path: '/api/agents/ready-work?limit=5' }])));
          if (want('page200')) add(`page200${suffix}`, await load(proc.url, pid, perConnection(f.keys, () => [{ method: 'GET', path: ready200 }])));
          if (want('page50')) add(`page50${suffix}`, await load(proc.url, pid, perConnection(f.keys, () => [{ method: 'GET', path: ready50 }])));
          if (want('patch')) add(`patch${suffix}`, await load(proc.url, pid, statusMoves(f)));
          if (!want('claim')) continue;
          // Claim and release: each connection an agent with its own ready task.
          for (let i = 0; i < CONNECTIONS; i++) await setStatus(proc.url, f.writeKeys[i]!.token, f.ownTasks[i]!, 'ready');
          const claim = await load(proc.url, pid, {
            ...perConnection(f.agentKeys, (_key, i) => [
              { method: 'POST', path: '/api/agents/claim', body: JSON.stringify({ issueId: f.ownTasks[i] }) },
              { method: 'POST', path: `/api/agents/claims/${f.ownTasks[i]}/release`, body: '{}' },
            ]),
          });
          add(`claim${suffix}`, { ...claim, rps: claim.rps / 2 });
          for (let i = 0; i < CONNECTIONS; i++) {
            // A run can stop between claim and release, and a claim the load generator abandoned
            // at the end of the row can still land after this release: release what is held,
            // park the task, and try again while a late claim holds it.
            for (let attempt = 1; ; attempt++) {
              await request(proc.url, 'POST', `/api/agents/claims/${f.ownTasks[i]}/release`, { token: f.agentKeys[i]!.token, body: {} });
              try {
                await setStatus(proc.url, f.writeKeys[i]!.token, f.ownTasks[i]!, 'backlog');
                break;
              } catch (err) {
                if (attempt >= 10) throw err;
                await new Promise((r) => setTimeout(r, 200));
              }
            }
          }
        }
        if (QUICK || round === 0) continue;
        log('in-process claim rate');
        claimRates.push(await inProcessClaimRate('file'));
        claimRatesMemory.push(await inProcessClaimRate('memory'));
        log(`in-process claims/s: stores on disk ${fmt(claimRates.at(-1) ?? 0)}, in memory ${fmt(claimRatesMemory.at(-1) ?? 0)}`);
      }
      await one.proc.stop();

      const f = two.f;
      if (QUICK && !ONLY.has('loop')) {
        log(`quick run:\n${quickSummary()}`);
        return null;
      }
      log('open loop: 50 agents at 4 requests/s');
      for (const [i, tasks] of f.loopTasks.entries()) for (const id of tasks) await setStatus(app.url, f.agentKeys[i]!.token, id, 'ready');
      const half = (i: number, second: boolean): string[] => {
        const tasks = f.loopTasks[i]!;
        return second ? tasks.slice(tasks.length / 2) : tasks.slice(0, tasks.length / 2);
      };
      // Each run starts once the bundle is idle (the status moves' events handled by audit and claims).
      await quiet(app.child.pid);
      let before = await flushes(two.metricsPort);
      loop = await openLoop(app.url, f, 'mixed', (i) => half(i, false));
      loopFlushes = describeFlushes(before, await flushes(two.metricsPort), loop.requests);
      await quiet(app.child.pid);
      before = await flushes(two.metricsPort);
      loopInStep = await openLoop(app.url, f, 'in-step', (i) => half(i, true));
      loopInStepFlushes = describeFlushes(before, await flushes(two.metricsPort), loopInStep.requests);
      log(`open loop flushes of the write-ahead logs (mixed): ${loopFlushes}; (in step): ${loopInStepFlushes}`);
      for (const [label, run] of [['mixed', loop], ['in step', loopInStep]] as const) {
        log(`open loop (${label}): p50 ${ms(summarize(run.samples).p50)} p99 ${ms(summarize(run.samples).p99)}`);
        for (const [i, name] of LOOP_STEPS.entries()) {
          const st = summarize(run.service[i] ?? []);
          log(`open loop (${label}) ${name}: p50 ${ms(st.p50)} p99 ${ms(st.p99)}`);
        }
      }
      if (QUICK) {
        log(`quick run:\n${quickSummary()}`);
        return null;
      }

      log(`${WRITES} writes`);
      const writeRun = await load(app.url, app.child.pid, {
        amount: WRITES,
        ...statusMoves(f),
      });
      record('writes', writeRun);
      // Let the outbox relay and the consumers catch up, then read the resident set.
      await new Promise((r) => setTimeout(r, 5_000));
      afterWritesRss = rssMb(app.child.pid);
      dataMb = folderMb(two.dataDir);
      lagNote = await consumerLag(two.metricsPort);
      log(`consumers after the writes: ${lagNote}`);
      heapNote = `${fmt(writeRun.rps)} writes/s over the run, ${writeRun.non2xx} non-2xx`;
    } finally {
      await app.stop();
      await one.proc.stop();
      for (const dir of [two.dataDir, one.dataDir]) rmSync(dir, { recursive: true, force: true });
      await hello.stop();
      await stub.stop();
    }
    // More starts only to read the idle RSS (one reading swings by a few MB from start to start):
    // each layout's figure is the median of IDLE_STARTS starts, alternated, the above included.
    const idleRuns = { on: [{ idle: two.idle, quiet: two.quiet }], off: [{ idle: one.idle, quiet: one.quiet }] };
    for (let i = 1; i < IDLE_STARTS; i++) for (const layout of ['on', 'off'] as const) idleRuns[layout].push(await idleStart(layout));
    const idleRss = mid(idleRuns.on.map((x) => x.idle));
    const idleRssOne = mid(idleRuns.off.map((x) => x.idle));
    const quietRss = mid(idleRuns.on.map((x) => x.quiet));
    const quietRssOne = mid(idleRuns.off.map((x) => x.quiet));
    const starts = (layout: 'on' | 'off') => idleRuns[layout].map((x) => mb(x.quiet)).join(', ');

    const distributed = await distributedPhase(log);
    const { oneGateway, twoGateways, failure: distributedFailure } = distributed;
    const ceiling = twoGatewayCeiling(distributed.perRequest.one);

    // ---- the section ------------------------------------------------------------------------------
    const r = (key: string) => median(rows.get(key) ?? []);
    const hello1 = r('hello');
    const stub1 = r('stub');
    const byId = r('byId');
    const line = (label: string, run: Run, ratio: string, target: string, anchor = false) =>
      `| ${label} | ${fmt(run.rps)} | ${ms(run.p50)} | ${ms(run.p99)} | ${fmt(run.cpuUsPerRequest)} µs | ${anchor ? pct(run.busy.main) : `${pct(run.busy.main)} / ${pct(run.busy.other)}`} | ${mb(run.rssMb)} | ${run.non2xx + run.errors} | ${ratio} | ${target} |`;
    const x = (a: number, b: number) => `${(a / b).toFixed(2)} ×`;
    const loopStats = summarize(loop?.samples ?? []);
    const inStepStats = summarize(loopInStep?.samples ?? []);
    const stepTimes = (run: typeof loop): string =>
      LOOP_STEPS.map((name, i) => {
        const st = summarize(run?.service[i] ?? []);
        return `${name} ${ms(st.p50)} / ${ms(st.p99)}`;
      }).join('; ');
    const endLoad = loadavg()[0]!.toFixed(2);
    const claimRate = mid(claimRates);
    const claimRateMemory = mid(claimRatesMemory);
    return [
      '## HTTP request path: the all-in-one bundle beside its anchors',
      '',
      `${header} (load average ${startedLoad} at the start, ${endLoad} at the end; other work shares this machine, so compare rows of this run only). ` +
        `${ROUNDS} interleaved rounds of ${SECONDS} s per row${WARMUP_SECONDS > 0 ? ` after a warm-up round (every row ${WARMUP_SECONDS} s, unrecorded: the servers' code compiled before it is measured)` : ''}, ${CONNECTIONS} connections, medians of the rounds; RSS is the server process's peak during the row. ` +
        'The bundle is `node dist/main.mjs` (all-in-one, embedded backends, ' +
        `RPC_TRANSPORT=${process.env.RPC_TRANSPORT ?? 'direct'}); every request carries an enterprise API key (one key per connection), so authentication, the rate limiter and the request meter run on each. ` +
        'Anchors in the same rounds: a bare fastify server answering `{ data: { hello } }`, and fastify whose route makes one grpc-js unary call to a stub server in the same process. Load: autocannon, in the benchmark process on the same two cores.',
      '',
      '| route | req/s | p50 | p99 | server CPU per request | threads busy: gateway / services | server RSS | non-2xx + errors | ratio | target |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---|---|',
      line('bare fastify hello (anchor)', hello1, '—', '', true),
      line('fastify → grpc-js stub (anchor)', stub1, `${x(stub1.rps, hello1.rps)} hello`, '', true),
      line('`GET /api/issues/{id}`', byId, `${x(byId.rps, stub1.rps)} stub, ${x(byId.rps, hello1.rps)} hello`, '≥ 1.0 × stub; stretch 0.25 × hello'),
      line('`GET /api/agents/ready-work?limit=5` (an agent\'s next work)', r('ready'), `${x(r('ready').rps, byId.rps)} by-id`, ''),
      line('`GET /api/issues?status=ready&limit=200` (200 tasks)', r('page200'), `${x(r('page200').rps, byId.rps)} by-id`, '≥ 0.2 × by-id'),
      line('same, `limit=50`', r('page50'), `${x(r('page50').rps, byId.rps)} by-id`, '≥ 0.5 × by-id'),
      line('`PATCH /api/issues/{id}` status move', r('patch'), `${x(r('patch').rps, byId.rps)} by-id`, '≥ 0.5 × by-id'),
      line('claim + release, 50 agents (claims/s)', r('claim'), `${x(r('claim').rps, claimRate)} in-process (${fmt(claimRate)} claims/s, the median of the rounds' in-process runs, stores on disk as the bundle's; ${x(r('claim').rps, claimRateMemory)} the ${fmt(claimRateMemory)}/s with stores in memory)`, '≥ 0.8 × in-process'),
      '',
      "Threads busy: each thread's CPU time over the row's wall time (from /proc, per thread; medians of the rounds): the gateway's (main) thread, and the services' thread (the busiest of the process's other threads; the rest are V8's collector helpers and libuv's pool, where the flushes run). A thread near 100 % bounds the row's rate: a route can go no faster than the work its busiest thread does per request, whatever the other core does meanwhile. An anchor is one thread.",
      '',
      'The same rows with the services in the gateway\'s thread (`SERVICES_THREAD=off`: one event loop for everything, as before), measured in the same rounds:',
      '',
      '| route | req/s | p50 | p99 | server CPU per request | thread busy | server RSS | non-2xx + errors | two threads ÷ one |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...(['byId', 'page200', 'page50', 'patch', 'claim'] as const).map((k) => {
        const o = r(`${k}:one`);
        const labels = { byId: '`GET /api/issues/{id}`', page200: '200-task page', page50: '50-task page', patch: '`PATCH` status move', claim: 'claim + release (claims/s)' };
        return `| ${labels[k]} | ${fmt(o.rps)} | ${ms(o.p50)} | ${ms(o.p99)} | ${fmt(o.cpuUsPerRequest)} µs | ${pct(o.busy.main)} | ${mb(o.rssMb)} | ${o.non2xx + o.errors} | ${(r(k).rps / o.rps).toFixed(2)} × |`;
      }),
      '',
      `Open loop: ${CONNECTIONS} agents, each sending ${AGENT_RATE} requests/s on a fixed schedule for ${OPEN_LOOP_SECONDS} s (ready work, claim, status post, evidence, move to in-review under the claim; latency from the scheduled send time, so a slow answer delays and counts against the next). ` +
        `Agents working independently (spread over the five steps: at any moment a fifth of them is on each, ${fmt((CONNECTIONS * AGENT_RATE) / LOOP_STEPS.length)} claims/s): ` +
        `${fmt(loop?.requests ?? 0)} requests, p50 ${ms(loopStats.p50)}, **p99 ${ms(loopStats.p99)}** (target ≤ 50 ms), ${loop?.failures ?? 0} non-2xx; each step's own answer time (p50 / p99, from its send): ${stepTimes(loop)}; the embedded stores' write-ahead-log flushes meanwhile (planning.store.flush.duration from the bundle's /metrics): ${loopFlushes ?? 'not measured'}. ` +
        `The same agents all in step (every agent on the same step at once: ${fmt(CONNECTIONS * AGENT_RATE)} claims/s for a quarter of a second, then as many status posts, ...; the earlier runs of this benchmark measured only this): ` +
        `${fmt(loopInStep?.requests ?? 0)} requests, p50 ${ms(inStepStats.p50)}, p99 ${ms(inStepStats.p99)}, ${loopInStep?.failures ?? 0} non-2xx; per step: ${stepTimes(loopInStep)}; flushes: ${loopInStepFlushes ?? 'not measured'}. ` +
        'Where the tail comes from (measured on 2026-11-28, a day of slower disk flushes, with preloads that time calls in both threads; not part of the benchmark): at this load every request is answered in a few milliseconds of CPU, and what lands in the p99 is the threads being held up, not work queued. ' +
        "Each write is answered once its commit is flushed (`fdatasync` on libuv's thread pool; the commits of one request go to up to three stores, one after another, and the audit records of its events to a fourth). How many flushes that makes depends on the disk: commits that arrive while a flush runs share the next one, so with flushes of about 0.5 ms at the median the services' thread flushed a store's log about 700 times a second at this load (3.5 a request), and when this machine's shared disk answered in 5 to 12 ms on average (later the same day) 0.6 to 0.9 times a request, and every write waited that long. Starting a flush, a call that only hands the job to a pool thread, took over 0.5 ms in about 3 % of the calls and up to 16 ms, and so did `postMessage` between the two threads (up to 15 ms); in a small program alone on this machine the same calls took 0.04 ms at the median and 7 to 18 ms at the most. " +
        "Besides, the services' thread collects its young generation (3 to 8 ms each, a few times a second) and a busy stretch runs 15 to 60 ms now and then. Run alternately with the flushes made no-ops (not durable, for comparison only), the mixed run's p50 fell from 8 to 9 ms to 3 to 5 ms, and its p99 was 30 and 75 ms against 79 and 97 ms: the flushes add latency to every write, and the p99 varies from run to run by more than the flushes' share.",
      '',
      `Memory: idle RSS of the bundle ${QUIET_SECONDS} s after start, once each thread's start-up compaction has run (one full collection after six quiet seconds, which lets V8 shrink a new space grown while the modules loaded), medians of ${IDLE_STARTS} starts per layout, alternated: **${mb(quietRss)}** with the services' thread (${starts('on')}), ${mb(quietRssOne)} with one thread (${starts('off')}) (target ≤ 120 MB); 3 s after start, before it, ${mb(idleRss)} and ${mb(idleRssOne)}; after ${fmt(WRITES)} more writes (status moves, ${heapNote}) and 5 s to settle ${mb(afterWritesRss)}, with ${mb(dataMb)} of data on disk (target: within 2 × idle plus the data's own size: ${mb(2 * idleRss + dataMb)}); the event consumers by then (from the bundle's /metrics): ${lagNote}.`,
      '',
      (heaps
        ? `Where the idle memory is (a copy of the bundle started for this with bench/heap-probe.mjs, the same layout): 3 s after start, RSS ${mb(heaps.start.rssMb)}: ${describeHeaps(heaps.start)}. ` +
          `The same process ${QUIET_SECONDS} s after start, once each thread's start-up compaction has run (libs/runtime/src/quiet-compaction.ts: V8 shrinks a new space back to 1 MB after a full collection when allocation has stayed low for five seconds; its own memory reducer did so after about two idle minutes): RSS **${mb(heaps.settled.rssMb)}**: ${describeHeaps(heaps.settled)}. `
        : 'Where the idle memory is: not measured in this run. ') +
        'Loaded only on first use: the OAuth authorization server (oidc-provider with Koa, on the first `/oauth/` request, sign-in page or OAuth access token), the MCP SDK (on the first `POST /api/mcp`: services/gateway/src/mcp/engine.ts; held at start it was about 7 MB of the idle RSS, 134 / 137 / 133 MB against 127 / 127 / 122 MB in alternated starts), the Redis, NATS, MongoDB and AWS clients and the OTLP exporters (when configured; the exporters, libs/telemetry/src/otlp-exporters.ts, are about 0.5 MB of heap per thread). ' +
        "The store loads mingo's query operators and updater, not its index, which builds one context of every operator mingo has (expressions, pipeline stages, accumulators) when imported: about 1.5 MB of heap in each thread, 2 to 3 MB of the idle RSS (121 / 122 / 123 MB against 118 / 121 / 119 MB). " +
        "The services' thread, the busy one under writes, runs with V8's 16 MB semi-spaces (a 48 MB young generation; the flag raised before the worker starts): measured in quick runs, alternated, two each, against 4 MB it scavenged a third as often under the PATCH load and answered about 9 % more PATCHes and 4 to 6 % more claims, for about 15 MB more RSS 3 s after start and none once the start-up compaction has run (tried: giving glibc's malloc a fixed trim threshold saved about 4 MB idle and cost 6 to 20 % of the page and PATCH rows; full minification of the bundle saved nothing). " +
        `The gateway's thread cannot be given a nursery from inside the process (V8 fixes the main isolate's semi-space limit when Node creates it, before any of the bundle runs), so every start command passes ${(BUNDLE_NODE_FLAGS as string[]).join(' ')} to node (scripts/node-flags.mjs; the copies measured here too): without it the main thread's new space grows to 2 × 16 MB while the modules load (about 23 MB until the compaction), and with ${Object.entries(BUNDLE_ENV as Record<string, string>).map(([k, v]) => `${k}=${v}`).join(' ')} in its environment (glibc's malloc keeps two arenas instead of one per allocating thread: about 16 MB of the idle RSS with the services' thread). ` +
        "The gateway compiles a route's request validators and response serializers when the route is first used (1,088 of them; compiled at start they cost about 5 MB of live heap and 12 MB committed in the gateway's thread, and 0.3 s of start-up). " +
        "What stays is code and the objects modules build when imported: each thread holds its own copy of what both import (the embedded store's query engine, protobuf descriptors, the OpenTelemetry SDK, pino), and each only what it runs besides: the gateway's thread the HTTP server (fastify, ajv, the OpenAPI document and /docs), the environment's schemas (zod: it parses the process's and every module's settings and hands the services' thread its modules' values, parsed; zod held in the services' thread too was about 5 MB of the idle RSS, 122 / 120 / 121 / 123 MB against 114 / 117 / 117 / 117 MB in alternated starts) and only the services' module definitions (name, dependencies, settings: what the entry point checks before it starts the worker; each service's implementation is loaded with import() in the thread that runs it), the services' thread the services and grpc-js (loaded on first use: the gateway's thread reaches the services through the MessagePort and makes no gRPC call). test/e2e/main-thread.test.ts reads each thread's list of compiled scripts and holds it to that. The OpenTelemetry SDK is registered without @opentelemetry/sdk-node, which brought declarative configuration with a YAML parser, the logs SDK and auto-instrumentation (about 0.8 MB of code per thread, unused). The second isolate itself costs about 12 MB (an idle Node worker).",
      '',
      'Reading the rows: internal calls no longer go through loopback gRPC (no protobuf encoding, no principal signing, no HTTP/2 framing inside the process). ' +
        "With the services' thread the gateway's half of a request (HTTP parsing, authentication, rate limit, request meter, JSON) and the services' half (access check, store reads and writes, outbox) run on different cores, so under load they overlap instead of queueing on one event loop; " +
        "a call crosses between the threads as a structured clone, except a page of issues and an issue's detail, which the services' thread renders as their REST JSON and passes across as one string (the detail) or as UTF-8 bytes transferred without a copy (a page; no copy of the answer as objects, no mapping, serialising or encoding in the gateway's thread; once its socket has written a page of 64 KiB or more, the gateway's thread transfers the buffer back and later pages are written into it: a new buffer per page, external memory in both threads, had set off a full collection in the gateway's thread every few dozen pages, and reusing them answered 29 to 35 % more 200-task pages and 21 to 40 % more 50-task pages in quick alternated runs), and the second isolate costs memory (the idle RSS above). " +
        "A page read again costs little more than its query, and while no task has been written since, not even that: the store answers a query it ran before, with no write to the collection since, from the rows it found then (`keptResults`, 64 queries per collection); it hands the page's tasks out readonly (the one frozen copy it keeps per row version, no copy per read), the issues service keeps one frozen view per task version, kind of caller and stretch of time the view holds for (until a claim, an approval or a due date expires, or the task turns stale), and the page view keeps each view's JSON bytes and joins them. " +
        'The anchors bound what the machine gives this run: a request cannot be cheaper than the bare hello, and the stub shows what one loopback gRPC hop alone costs.',
      '',
      "Per request on these rows: the gateway reuses an API key it looked up for `API_KEY_CACHE_MS` (2 s; a revoke applies at once on the replica that made it, docs/auth.md) instead of reading the key store each time; " +
        "a claim makes two calls to the issues service (the task's target, its start) and meters under the plan the token's principal carries; " +
        "an agent's `PATCH` of a task no claim ever started on does not ask agents-claims for its fence (the write's transaction still checks the task's claim mirror). " +
        "Writes made in the same turn of the services' event loop (the requests' transactions, the outbox relay's deletes, the audit records, the meters) are applied together in one SQLite transaction, a savepoint each, so the index pages and the log tails they share go to the write-ahead log once; the outbox relay takes no lease (the embedded store is this process's alone): it reads a batch of events, publishes it and deletes it. " +
        "Every durable write waits for its group commit, and a read for the flush of the commits that changed the collection it reads (not for every commit: an audit record's or an outbox event's flush does not hold up a task read); the audit consumer gathers the events of 20 ms into one batch (one commit and one flush; its records are written at most that much later), since every flush, of any store's file, takes its turn at the same disk; a claim waits for three commits one after the other (the claim and its run's metering in one transaction of the claims store, the task's start in the issues store, the claim marked started), a release for two before it is answered (the task's end in the issues store, the claim's end in the claims store) and one more after.",
      '',
      distributedFailure
        ? `Distributed mode: not measured in this run (${distributedFailure}).`
        : `Distributed mode (one process per service, NATS JetStream, Redis, embedded stores, the gateways' store shared through the mongo-wire test server; \`GET /api/issues/{id}\`, ${CONNECTIONS} connections): ` +
        `one gateway ${fmt(oneGateway?.rps ?? 0)} req/s (p99 ${ms(oneGateway?.p99 ?? 0)}), two gateway processes ${fmt(twoGateways?.rps ?? 0)} req/s (p99 ${ms(twoGateways?.p99 ?? 0)}): ` +
        `**${x(twoGateways?.rps ?? 0, oneGateway?.rps ?? 1)}** (target ≥ 1.6 ×; ${(oneGateway?.non2xx ?? 0) + (twoGateways?.non2xx ?? 0)} non-2xx). ` +
        `Where the CPU went (every process of the cluster and the load generator, CPU time per request answered): one gateway: ${describePerRequest(distributed.perRequest.one)}; ` +
        `two gateways: ${describePerRequest(distributed.perRequest.two)} (cores in use: ${describeCores(distributed.cores.one)} with one, ${describeCores(distributed.cores.two)} with two). ` +
        `One gateway process is one event loop, so its phase is bound by the gateway's core; a second gateway only helps as far as the other cores are free. ` +
        `Everything else a read costs (the issues service's gRPC handler and store read, the gateways' shared store for the API key, Redis for the rate limit, the load generator) is ${ceiling.othersPerGateway.toFixed(2)} × the gateway's own CPU per request, ` +
        `so on ${cpus().length} cores two gateways can give at most max(1, min(2, ${cpus().length} ÷ (1 + ${ceiling.othersPerGateway.toFixed(2)}))) = **${ceiling.ceiling.toFixed(2)} ×** one. ` +
        (ceiling.ceiling < 1.6
          ? `1.6 × needs the rest of a request to cost at most ${(cpus().length / 1.6 - 1).toFixed(2)} × the gateway's CPU on ${cpus().length} cores, or about ${Math.ceil(1.6 * (1 + ceiling.othersPerGateway))} cores at this split: the target is about the gateway scaling out, which this machine cannot show.`
          : 'The machine leaves room for 1.6 ×; what the measured ratio misses of the ceiling is contention between the processes (scheduling, the shared store and Redis).'),
    ].join('\n');
  },
};

export default bench;
