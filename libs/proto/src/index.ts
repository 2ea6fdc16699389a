/**
 * The protobuf runtime the generated code is built on, re-exported so services need only
 * `@planning/proto` (one pinned @bufbuild/protobuf for the whole codebase). The generated
 * messages and services themselves are imported per file through subpath exports:
 *
 *   import { WorkspaceService, type Workspace } from '@planning/proto/planning/issues/v1/workspaces_pb';
 */
export {
  clone,
  create,
  equals,
  fromBinary,
  fromJson,
  isMessage,
  toBinary,
  toJson,
  type DescMessage,
  type DescMethod,
  type DescService,
  type JsonValue,
  type Message,
  type MessageInitShape,
  type MessageShape,
} from '@bufbuild/protobuf';
