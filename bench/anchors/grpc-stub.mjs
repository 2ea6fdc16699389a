// Anchor: fastify whose route makes one grpc-js unary call over loopback to a stub server in the
// same process (the shape of the old all-in-one request path, without any application work).
import { Buffer } from 'node:buffer';
import { createRequire } from 'node:module';
import { URL } from 'node:url';

const require = createRequire(new URL('../../libs/runtime/package.json', import.meta.url));
const Fastify = require('fastify');
const grpc = require(require.resolve('@grpc/grpc-js', { paths: [new URL('../../libs/rpc/', import.meta.url).pathname] }));

const encode = (value) => Buffer.from(JSON.stringify(value));
const decode = (bytes) => JSON.parse(bytes.toString());
const definition = {
  get: { path: '/stub.Stub/Get', requestStream: false, responseStream: false, requestSerialize: encode, requestDeserialize: decode, responseSerialize: encode, responseDeserialize: decode },
};
const server = new grpc.Server();
server.addService(definition, { get: (call, callback) => callback(null, { id: call.request.id, title: 'stub' }) });
const grpcPort = await new Promise((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
);
const Client = grpc.makeGenericClientConstructor(definition, 'Stub');
const client = new Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());

const app = Fastify({ logger: false });
app.get('/stub/:id', (request) =>
  new Promise((resolve, reject) =>
    client.get({ id: request.params.id }, { deadline: Date.now() + 10_000 }, (err, res) => (err ? reject(err) : resolve({ data: res }))),
  ),
);
await app.listen({ host: '127.0.0.1', port: Number(process.argv[2] ?? 0) });
process.stdout.write(`${app.server.address().port}\n`);
