import type { Outbox } from '@planning/outbox';
import type { Collection, DocumentStore, Filter, StoreSession, StoredDocument } from '@planning/store';

/** An agent of a workspace (DECISIONS §3): created with the first API key that names it. */
export interface AgentRecord extends StoredDocument {
  workspaceId: string;
  agentId: string;
  createdAt: string;
  /** The user or key id that created it. */
  createdBy: string;
}

export const agentRecordId = (workspaceId: string, agentId: string): string => `${workspaceId}:${agentId}`;

/**
 * The agent directory. Other parts of the issues service check assignments with
 * `exists(workspaceId, agentId)` (pass the transaction's session to check inside it).
 */
export class AgentRepository {
  private constructor(
    readonly agents: Collection<AgentRecord>,
    private readonly outbox: Outbox,
  ) {}

  static async open(store: DocumentStore, outbox: Outbox): Promise<AgentRepository> {
    const agents = store.collection<AgentRecord>('agents');
    await agents.createIndexes([{ name: 'workspace_agent', keys: { workspaceId: 1, agentId: 1 } }]);
    return new AgentRepository(agents, outbox);
  }

  /** Creates the agent unless it exists; `agent.created` is recorded with it. Idempotent. */
  async ensure(
    workspaceId: string,
    agentId: string,
    actor: { type: string; id: string },
    now = new Date(),
  ): Promise<{ agent: AgentRecord; created: boolean }> {
    const id = agentRecordId(workspaceId, agentId);
    const existing = await this.agents.findOne({ _id: id });
    if (existing) return { agent: existing, created: false };
    return this.outbox.transaction(async (session) => {
      const record: AgentRecord = { _id: id, workspaceId, agentId, createdAt: now.toISOString(), createdBy: actor.id };
      const result = await this.agents.updateOne({ _id: id }, { $setOnInsert: record }, { upsert: true, session });
      if (result.upsertedId === undefined) {
        const found = await this.agents.findOne({ _id: id }, { session });
        return { agent: found ?? record, created: false };
      }
      await this.outbox.add(
        { type: 'agent.created', workspaceId, actor, data: { subject: { type: 'agent', id } } },
        { session },
      );
      return { agent: record, created: true };
    });
  }

  /** Does the workspace have this agent? */
  async exists(workspaceId: string, agentId: string, session?: StoreSession): Promise<boolean> {
    const found = await this.agents.findOne({ _id: agentRecordId(workspaceId, agentId) }, session ? { session } : undefined);
    return found !== null;
  }

  get(workspaceId: string, agentId: string): Promise<AgentRecord | null> {
    return this.agents.findOne({ _id: agentRecordId(workspaceId, agentId) });
  }

  /** A page of a workspace's agents ordered by agent id. */
  list(workspaceId: string, options: { limit: number; after?: string }): Promise<AgentRecord[]> {
    const filter: Filter = { workspaceId };
    if (options.after) filter.agentId = { $gt: options.after };
    return this.agents.find(filter, { sort: { agentId: 1 }, limit: options.limit });
  }
}
