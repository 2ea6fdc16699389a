/**
 * Test support (not exported): the planning services over an in-memory embedded store, called
 * the way the gRPC server calls them, with every request and response passed through the
 * protobuf codec so tests see exactly what a gRPC client would. The clock is a variable.
 */
import { create, fromBinary, toBinary, type DescMessage, type DescService, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import type { EventEnvelope } from '@planning/bus';
import { createInProcessBus } from '@planning/bus';
import { createOutbox } from '@planning/outbox';
import type { Role } from '@planning/access';
import type { PlanId } from '@planning/plans';
import { ProgramService } from '@planning/proto/planning/issues/v1/programs_pb';
import { ProjectService } from '@planning/proto/planning/issues/v1/projects_pb';
import { TaskRecordService } from '@planning/proto/planning/issues/v1/task_records_pb';
import { TaskService } from '@planning/proto/planning/issues/v1/tasks_pb';
import { WorkspaceService } from '@planning/proto/planning/issues/v1/workspaces_pb';
import type { CallContext, Principal, ServiceImplementation } from '@planning/rpc';
import { createEmbeddedStore, type DocumentStore, type EmbeddedDocumentStore } from '@planning/store';
import { conflict } from '@planning/errors';
import { openPlanning, type Planning } from '../planning.js';
import type { WriteFences } from '../rpc/write-fences.js';
import { createLocalAccess, createWorkspaceService } from '../rpc/workspace-service.js';
import { AgentRepository } from '../store/agents.js';
import { WorkspaceRepository } from '../store/workspaces.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

type Methods<S extends DescService> = S['method'];
type In<S extends DescService, K extends keyof Methods<S>> = MessageInitShape<Methods<S>[K]['input']>;
type Out<S extends DescService, K extends keyof Methods<S>> = MessageShape<Methods<S>[K]['output']>;

/** A typed caller of one service: `client.searchTasks(request, principal)`. */
export type TestClient<S extends DescService> = {
  [K in keyof Methods<S>]: (request: In<S, K>, principal: Principal) => Promise<Out<S, K>>;
};

function clientOf<S extends DescService>(service: S, impl: ServiceImplementation<S>): TestClient<S> {
  const client: Record<string, unknown> = {};
  for (const method of service.methods) {
    client[method.localName] = async (request: unknown, principal: Principal) => {
      const input = method.input as DescMessage;
      const output = method.output as DescMessage;
      const req = fromBinary(input, toBinary(input, create(input, request as never)));
      const ctx = { principal, deadline: undefined, signal: new AbortController().signal } as unknown as CallContext;
      const handler = (impl as unknown as Record<string, (r: unknown, c: CallContext) => Promise<unknown>>)[method.localName]!;
      const res = await handler(req, ctx);
      return fromBinary(output, toBinary(output, create(output, res as never)));
    };
  }
  return client as TestClient<S>;
}

/** The answer of agents-claims for tasks it holds no claims of. */
const UNCLAIMED_FENCES: WriteFences = {
  async check(_ctx, request) {
    return new Map(
      request.issueIds.map((id) => [
        id,
        request.fencingToken === undefined ? {} : conflict('stale-claim', `Fencing token ${request.fencingToken} is stale: the issue is not under an active claim`),
      ]),
    );
  },
};

export interface PlanningHarness {
  store: EmbeddedDocumentStore;
  planning: Planning;
  workspaces: WorkspaceRepository;
  agents: AgentRepository;
  workspaceRpc: TestClient<typeof WorkspaceService>;
  projects: TestClient<typeof ProjectService>;
  programs: TestClient<typeof ProgramService>;
  tasks: TestClient<typeof TaskService>;
  records: TestClient<typeof TaskRecordService>;
  /** The services' clock; tests move it. */
  now: Date;
  admin: Principal;
  user(id: string): Principal;
  token(workspaceId: string, scopes: string[], agentId?: string): Principal;
  /** A workspace owned by `ownerId` (a user principal for it is `user(ownerId)`). */
  workspace(options?: { ownerId?: string; planId?: PlanId; name?: string }): Promise<string>;
  addMember(workspaceId: string, userId: string, role: Role): Promise<void>;
  addAgent(workspaceId: string, agentId: string): Promise<void>;
  /** Events recorded through the outbox so far (oldest first). */
  events(type?: string): Promise<EventEnvelope[]>;
  /**
   * Where agent writes get their fences. By default, what agents-claims answers for tasks it has
   * no claims of (no claim to write under; a presented token is stale); the claims harness plugs
   * in the real agents-claims service.
   */
  setWriteFences(fences: WriteFences): void;
  close(): Promise<void>;
}

export async function createPlanningHarness(options: { store?: EmbeddedDocumentStore; now?: Date } = {}): Promise<PlanningHarness> {
  const store = options.store ?? createEmbeddedStore();
  const bus = createInProcessBus();
  const outbox = await createOutbox({ store: store as DocumentStore, bus, source: 'issues', logger: quiet });
  const workspaces = await WorkspaceRepository.open(store, outbox);
  const agents = await AgentRepository.open(store, outbox);
  const access = createLocalAccess(workspaces);
  const harness = {} as PlanningHarness;
  harness.now = options.now ?? new Date('2025-06-02T10:00:00.000Z');
  let fenceSource: WriteFences = UNCLAIMED_FENCES;
  const fences: WriteFences = { check: (ctx, request) => fenceSource.check(ctx, request) };
  const planning = await openPlanning({ store, outbox, workspaces, agents, access, fences, clock: () => new Date(harness.now) });
  let n = 0;
  Object.assign(harness, {
    store,
    planning,
    workspaces,
    agents,
    workspaceRpc: clientOf(WorkspaceService, createWorkspaceService({ workspaces, clock: () => new Date(harness.now) })),
    projects: clientOf(ProjectService, planning.services.projects),
    programs: clientOf(ProgramService, planning.services.programs),
    tasks: clientOf(TaskService, planning.services.tasks),
    records: clientOf(TaskRecordService, planning.services.taskRecords),
    admin: { type: 'user', id: 'usr_admin', userId: 'usr_admin', isAdmin: true, scopes: [] } satisfies Principal,
    user: (id: string): Principal => ({ type: 'user', id, userId: id, isAdmin: false, scopes: [] }),
    token: (workspaceId: string, scopes: string[], agentId?: string): Principal => ({
      type: 'api-key',
      id: `key_${agentId ?? 'x'}`,
      keyId: `key_${agentId ?? 'x'}`,
      workspaceId,
      ...(agentId ? { agentId } : {}),
      isAdmin: false,
      scopes,
    }),
    async workspace(o: { ownerId?: string; planId?: PlanId; name?: string } = {}) {
      const record = await workspaces.create(
        { name: o.name ?? `Workspace ${++n}`, ownerId: o.ownerId ?? 'usr_owner', planId: o.planId ?? 'pro', actor: { type: 'system', id: 'system' } },
        new Date(harness.now),
      );
      return record._id;
    },
    async addMember(workspaceId: string, userId: string, role: Role) {
      await workspaces.addMember(workspaceId, userId, role, { type: 'system', id: 'system' }, new Date(harness.now));
    },
    async addAgent(workspaceId: string, agentId: string) {
      await agents.ensure(workspaceId, agentId, { type: 'system', id: 'system' }, new Date(harness.now));
    },
    async events(type?: string) {
      const rows = await store.collection<{ _id: string; event: EventEnvelope }>('outbox').find(type ? { 'event.type': type } : {}, { sort: { _id: 1 } });
      return rows.map((r) => r.event);
    },
    setWriteFences(f: WriteFences) {
      fenceSource = f;
    },
    async close() {
      await outbox.stop();
      await store.close();
    },
  });
  return harness;
}
