export { createRpcServer, type RpcServer, type RpcServerOptions } from './server.js';
export { createRpcClient, type RpcClientOptions } from './client.js';
export {
  callOptionsFrom,
  type CallContext,
  type RpcCallOptions,
  type RpcClient,
  type ServiceImplementation,
  type UnaryHandler,
} from './types.js';
export {
  ANONYMOUS_PRINCIPAL,
  PRINCIPAL_HEADER,
  PRINCIPAL_SIGNATURE_HEADER,
  SYSTEM_PRINCIPAL,
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
export { ERROR_CODE_HEADER, ERROR_DETAILS_HEADER } from './errors.js';
