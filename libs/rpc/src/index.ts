export { createRpcServer, type RpcServer, type RpcServerOptions } from './server.js';
export { createRpcClient, type RpcClientOptions } from './client.js';
export { beginClientCall, createDirectClient, createLocalServices, endClientSpan, type DirectClientOptions, type LocalCall, type LocalServices } from './direct.js';
export type { HandlerOutcome } from './invoke.js';
export { checkedCopy, copyMessage } from './isolate.js';
export {
  callOptionsFrom,
  type CallContext,
  type RpcCallOptions,
  type RpcClient,
  type ServiceImplementation,
  type UnaryHandler,
  resolveDeadline,
} from './types.js';
export {
  ANONYMOUS_PRINCIPAL,
  PRINCIPAL_HEADER,
  PRINCIPAL_SIGNATURE_HEADER,
  SYSTEM_PRINCIPAL,
  copyPrincipal,
  createPrincipalSigner,
  createPrincipalVerifier,
  type Principal,
  type PrincipalSecret,
  type PrincipalSigner,
  type PrincipalSignerOptions,
  type PrincipalType,
  type PrincipalVerifier,
  type PrincipalVerifierOptions,
  type SignedPrincipal,
} from './principal.js';
export { ERROR_CODE_HEADER, ERROR_DETAILS_HEADER, grpcCodeName } from './errors.js';
export { BytePool, pooledAnswer, POOLED_MAX_BYTES, POOLED_MIN_BYTES, RenderedResponse, renderedBody, renderView, viewRegistry, type ByteAllocator, type ResponseView } from './views.js';
