/**
 * The modules of an all-in-one process's services thread (SERVICES_THREAD): the services, their
 * infrastructure, and the port to the gateway's thread. Kept apart from modules.ts so the worker
 * loads no gateway code, except the gateway's response views: pure mappers with no run-time
 * imports, which this thread runs to render large answers where they are made (thread-port.ts).
 */
import type { MessagePort } from 'node:worker_threads';
import { agentsClaimsModule } from '@planning/agents-claims';
import { auditModule } from '@planning/audit';
import { importsExportsModule } from '@planning/imports-exports';
import { GATEWAY_VIEWS } from '@planning/gateway/views';
import { issuesModule } from '@planning/issues';
import { busModule, createThreadPortModule, rpcClientsModule, rpcServerModule, type AnyModuleDefinition } from '@planning/runtime';

export const SERVICES_THREAD_ROOTS = ['issues', 'agents-claims', 'imports-exports', 'audit'] as const;

export function servicesThreadModules(port: MessagePort, onListening: (grpcAddress: string) => void): AnyModuleDefinition[] {
  return [busModule, rpcServerModule, rpcClientsModule, issuesModule, agentsClaimsModule, importsExportsModule, auditModule, createThreadPortModule(port, onListening, GATEWAY_VIEWS)];
}
