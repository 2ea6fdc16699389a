/**
 * Test support (not part of the service): the agents-claims core over its own embedded store,
 * talking to a real issues service (the planning harness and its claim support) through the
 * protobuf codec, as over gRPC. Several cores may share one claims store: replicas racing.
 */
import { create, fromBinary, toBinary, type DescMessage, type DescService } from '@bufbuild/protobuf';
import type { EventEnvelope } from '@planning/bus';
import { createInProcessBus } from '@planning/bus';
import { claimSupportOf, createRemoteWriteFences } from '@planning/issues/testing/claim-support-harness';
import { createPlanningHarness, type PlanningHarness } from '@planning/issues/testing/planning-harness';
import { createRemoteAccess } from '@planning/access';
import { IdempotencyKeys } from '@planning/idempotency';
import { createUsageMeter, type UsageMeter } from '@planning/metering';
import { createOutbox } from '@planning/outbox';
import { ClaimSupportService } from '@planning/proto/planning/issues/v1/claim_support_pb';
import { ANONYMOUS_PRINCIPAL, type CallContext, type Principal, type RpcCallOptions, type RpcClient, type ServiceImplementation } from '@planning/rpc';
import { createEmbeddedStore, type DocumentStore, type EmbeddedDocumentStore } from '@planning/store';
import { ClaimsCore, type IssuesClient } from '../claims-core.js';
import { IDEMPOTENCY_COLLECTION } from '../core/context.js';
import { ClaimService, createClaimService } from '../rpc/claim-service.js';
import { ClaimRepository } from '../store/claims.js';
import { PolicyRepository } from '../store/policies.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** Hooks around the issues calls of the claims core (tests: crashes, slow calls, lost answers). */
export interface IssuesHooks {
  /** Runs before each call; throwing fails the call before it reaches the issues service. */
  before?: (method: string) => Promise<void>;
  /**
   * Wraps each call: `call` runs the real one. E.g. answer `unavailable` at once while the real
   * call is kept and made later (a call that timed out while its transaction still ran).
   */
  around?: (method: string, call: () => Promise<unknown>) => Promise<unknown>;
}

/** A client of an in-process implementation: every request and response passes the codec. */
export function rpcClientOf<S extends DescService>(service: S, impl: ServiceImplementation<S>, hooks: IssuesHooks = {}): RpcClient<S> {
  const client: Record<string, unknown> = { close() {} };
  for (const method of service.methods) {
    client[method.localName] = async (request: unknown, options: RpcCallOptions = {}) => {
      await hooks.before?.(method.localName);
      const input = method.input as DescMessage;
      const output = method.output as DescMessage;
      const req = fromBinary(input, toBinary(input, create(input, request as never)));
      const ctx = {
        principal: options.principal ?? ANONYMOUS_PRINCIPAL,
        deadline: options.deadline,
        signal: options.signal ?? new AbortController().signal,
      } as unknown as CallContext;
      const handler = (impl as unknown as Record<string, (r: unknown, c: CallContext) => Promise<unknown>>)[method.localName]!;
      const call = async () => fromBinary(output, toBinary(output, create(output, (await handler(req, ctx)) as never)));
      return hooks.around ? hooks.around(method.localName, call) : call();
    };
  }
  return client as RpcClient<S>;
}

export interface ClaimsReplica {
  core: ClaimsCore;
  /** The ClaimService as a gRPC client would call it. */
  rpc: RpcClient<typeof ClaimService>;
}

export interface ClaimsHarness {
  planning: PlanningHarness;
  store: EmbeddedDocumentStore;
  claims: ClaimRepository;
  meter: UsageMeter;
  /** The first replica. */
  core: ClaimsCore;
  rpc: RpcClient<typeof ClaimService>;
  /** Another replica on the same claims store (and issues service). */
  replica(): Promise<ClaimsReplica>;
  /** Hooks on the issues client the replicas use (e.g. to crash, to delay, to lose an answer). */
  issuesHooks: IssuesHooks;
  /** An agent's API token for a workspace. */
  agent(workspaceId: string, agentId: string, scopes?: string[]): Principal;
  project(workspaceId: string): Promise<string>;
  task(projectId: string, fields?: Record<string, unknown>): Promise<string>;
  /** Feeds task status events the claims core has not seen yet to its consumer handler. */
  deliverStatusEvents(): Promise<number>;
  /** The task as the issues service stores it. */
  taskRecord(issueId: string): ReturnType<PlanningHarness['planning']['tasks']['get']>;
  /** Events the agents-claims outbox recorded (oldest first). */
  claimEvents(type?: string): Promise<EventEnvelope[]>;
  close(): Promise<void>;
}

export const AGENT_SCOPES = ['issues:read', 'issues:write', 'agents:read', 'agents:execute'];

export async function createClaimsHarness(
  options: {
    leaseSeconds?: number;
    startTimeoutMs?: number;
    idempotencyLeaseMs?: number;
    /** Opens each store the harness needs (issues, agents-claims); default: in-memory embedded stores (benchmarks pass others). */
    openStore?: () => EmbeddedDocumentStore;
  } = {},
): Promise<ClaimsHarness> {
  const planning = await createPlanningHarness(options.openStore ? { store: options.openStore() } : {});
  const support = await claimSupportOf(planning);
  const issuesHooks: ClaimsHarness['issuesHooks'] = {};
  const issues: IssuesClient = rpcClientOf(ClaimSupportService, support, issuesHooks);
  const access = createRemoteAccess({ getAccess: (request, opts) => planning.workspaceRpc.getAccess(request, opts?.principal ?? ANONYMOUS_PRINCIPAL) });
  const store = options.openStore?.() ?? createEmbeddedStore();
  const outbox = await createOutbox({ store: store as DocumentStore, bus: createInProcessBus(), source: 'agents-claims', logger: quiet });
  const meter = await createUsageMeter(store, { clock: () => new Date(planning.now) });
  const claims = await ClaimRepository.open(store, outbox);
  const cores: ClaimsCore[] = [];
  const replica = async (): Promise<ClaimsReplica> => {
    const core = new ClaimsCore({
      claims: await ClaimRepository.open(store, outbox),
      idempotency: await IdempotencyKeys.open(store, { collection: IDEMPOTENCY_COLLECTION }),
      policies: await PolicyRepository.open(store, options.leaseSeconds ?? 1_800),
      meter,
      access,
      issues,
      clock: () => new Date(planning.now),
      logger: quiet,
      startTimeoutMs: options.startTimeoutMs ?? 15_000,
      idempotencyLeaseMs: options.idempotencyLeaseMs ?? 30_000,
    });
    cores.push(core);
    return { core, rpc: rpcClientOf(ClaimService, createClaimService(core)) };
  };
  const first = await replica();
  // The issues service asks agents-claims for the fence of every agent write, as over gRPC.
  planning.setWriteFences(createRemoteWriteFences(first.rpc));
  const delivered = new Set<string>();
  let projects = 0;
  let tasks = 0;
  return {
    planning,
    store,
    claims,
    meter,
    core: first.core,
    rpc: first.rpc,
    replica,
    issuesHooks,
    agent: (workspaceId, agentId, scopes = AGENT_SCOPES) => ({
      type: 'api-key',
      id: `key_${agentId}`,
      keyId: `key_${agentId}`,
      workspaceId,
      agentId,
      isAdmin: false,
      scopes,
    }),
    async project(workspaceId) {
      const res = await planning.projects.createProject({ workspaceId, name: `Project ${++projects}` }, planning.admin);
      return res.project!.id;
    },
    async task(projectId, fields = {}) {
      const res = await planning.tasks.createTask({ projectId, title: `Task ${++tasks}`, ...fields }, planning.admin);
      return res.task!.task!.id;
    },
    async deliverStatusEvents() {
      let n = 0;
      for (const event of await planning.events('task.status-changed')) {
        if (delivered.has(event.id)) continue;
        delivered.add(event.id);
        await first.core.onTaskStatusChanged(event);
        n += 1;
      }
      return n;
    },
    taskRecord: (issueId) => planning.planning.tasks.get(issueId),
    async claimEvents(type) {
      const rows = await store.collection<{ _id: string; event: EventEnvelope }>('outbox').find(type ? { 'event.type': type } : {}, { sort: { _id: 1 } });
      return rows.map((r) => r.event);
    },
    async close() {
      await Promise.all(cores.map((c) => c.settle()));
      await outbox.stop();
      await store.close();
      await planning.close();
    },
  };
}
