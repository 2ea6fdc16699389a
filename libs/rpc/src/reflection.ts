import { toBinary, type DescFile, type DescService } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import type { Server } from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { service as healthService } from 'grpc-health-check';

type PackageDefinition = ConstructorParameters<typeof ReflectionService>[0];

export const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

/**
 * Registers gRPC server reflection (v1 and v1alpha, via @grpc/reflection) for the given services
 * and the health service, so `grpcurl` works without proto files. @grpc/reflection reads
 * serialized FileDescriptorProtos from a proto-loader package definition; protobuf-es keeps the
 * same descriptors, so they are handed over in that shape.
 */
export function addReflection(server: Pick<Server, 'addService'>, services: readonly DescService[]): void {
  const files = new Map<string, Buffer>();
  const visit = (file: DescFile): void => {
    const name = file.proto.name;
    if (files.has(name)) return;
    files.set(name, Buffer.from(toBinary(FileDescriptorProtoSchema, file.proto)));
    for (const dependency of file.dependencies) visit(dependency);
  };
  for (const service of services) visit(service.file);

  const definition: PackageDefinition = {};
  const fileDescriptorProtos = [...files.values()];
  for (const service of services) {
    definition[service.typeName] = { format: 'Protocol Buffer 3 DescriptorProto', type: {}, fileDescriptorProtos };
  }
  const healthCheck = healthService.Check;
  if (healthCheck) definition['grpc.health.v1.HealthCheckRequest'] = healthCheck.requestType;

  new ReflectionService(definition, {
    services: [...services.map((s) => s.typeName), HEALTH_SERVICE_NAME],
  }).addToServer(server);
}
