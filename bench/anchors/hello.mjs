// Anchor: a bare fastify server answering one small JSON object, the ceiling of the HTTP stack.
import { createRequire } from 'node:module';
import { URL } from 'node:url';

const require = createRequire(new URL('../../libs/runtime/package.json', import.meta.url));
const Fastify = require('fastify');

const app = Fastify({ logger: false });
app.get('/hello', async () => ({ data: { hello: 'world' } }));
await app.listen({ host: '127.0.0.1', port: Number(process.argv[2] ?? 0) });
process.stdout.write(`${app.server.address().port}\n`);
