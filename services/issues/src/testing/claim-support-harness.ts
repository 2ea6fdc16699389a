/**
 * Test support (not exported to production code): the issues service's ClaimSupportService on a
 * planning harness's store, for in-process tests of the agents-claims service.
 */
import { createInProcessBus } from '@planning/bus';
import { createOutbox } from '@planning/outbox';
import type { ClaimSupportService } from '@planning/proto/planning/issues/v1/claim_support_pb';
import type { ServiceImplementation } from '@planning/rpc';
import type { DocumentStore } from '@planning/store';
import { createClaimSupportService } from '../rpc/claim-support.js';
import { createPlanningAccess } from '../rpc/planning-access.js';
import { createLocalAccess } from '../rpc/workspace-service.js';
import { ClaimSupportRepository } from '../store/claim-support.js';
import type { PlanningHarness } from './planning-harness.js';

/** The fence port of agent writes over a ClaimService client (the claims harness plugs the real one in). */
export { createRemoteWriteFences } from '../rpc/write-fences.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** The claim support service over the harness's store and clock (events land in its outbox). */
export async function claimSupportOf(harness: PlanningHarness): Promise<ServiceImplementation<typeof ClaimSupportService>> {
  const outbox = await createOutbox({ store: harness.store as DocumentStore, bus: createInProcessBus(), source: 'issues', logger: quiet });
  const repo = await ClaimSupportRepository.open(outbox, harness.planning.tasks, harness.planning.records, harness.store as DocumentStore);
  return createClaimSupportService({
    repo,
    tasks: harness.planning.tasks,
    access: createPlanningAccess(createLocalAccess(harness.workspaces), harness.workspaces),
    clock: () => new Date(harness.now),
  });
}
