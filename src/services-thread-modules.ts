/**
 * The modules of an all-in-one process's services thread (SERVICES_THREAD): the services, their
 * infrastructure, and the port to the gateway's thread. Kept apart from modules.ts so the worker
 * loads no gateway code, except the gateway's response views: pure mappers with no run-time
 * imports, which this thread runs to render large answers where they are made (thread-port.ts).
 * The services come without their settings' schemas: the main thread parses the settings and
 * hands them over (services-worker.ts), so this thread never loads zod.
 */
import type { MessagePort } from 'node:worker_threads';
import { agentsClaimsModuleCore } from '@planning/agents-claims/definition-core';
import { auditModule } from '@planning/audit';
import { importsExportsModuleCore } from '@planning/imports-exports/definition-core';
import { GATEWAY_VIEWS } from '@planning/gateway/views';
import { issuesModuleCore } from '@planning/issues/definition-core';
import { busModule, createThreadPortModule, rpcClientsModule, rpcServerModule, type AnyModuleDefinition } from '@planning/runtime';

export const SERVICES_THREAD_ROOTS = ['issues', 'agents-claims', 'imports-exports', 'audit'] as const;

export function servicesThreadModules(port: MessagePort, onListening: (grpcAddress: string) => void): AnyModuleDefinition[] {
  return [busModule, rpcServerModule, rpcClientsModule, issuesModuleCore, agentsClaimsModuleCore, importsExportsModuleCore, auditModule, createThreadPortModule(port, onListening, GATEWAY_VIEWS)];
}
