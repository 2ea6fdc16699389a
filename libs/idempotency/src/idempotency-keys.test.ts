import { startMongoWireServer } from '@planning/testing';
import { createEmbeddedStore } from '@planning/store';
import { createMongoStore } from '@planning/store/mongo';
import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import { describeIdempotencyContract } from './contract/idempotency-contract.js';

describeIdempotencyContract('embedded store', async () => {
  let now = new Date();
  const store = createEmbeddedStore({ clock: () => now });
  return {
    store,
    expireAt: async (at) => {
      now = at;
      await store.sweepExpired();
    },
  };
});

const server = await startMongoWireServer();
afterAll(() => server.stop());

describeIdempotencyContract('mongodb adapter over mongo-wire', async () => ({
  store: createMongoStore({ uri: server.uri, database: `idem_${randomBytes(5).toString('hex')}`, appName: 'idempotency-contract' }),
}));

// MongoDB itself only where MONGODB_URI points at a replica set (none can be installed on the build machines).
const uri = process.env.MONGODB_URI;
if (uri) {
  describeIdempotencyContract('mongodb', async () => ({
    store: createMongoStore({ uri, database: `planning_idem_test_${randomBytes(5).toString('hex')}`, appName: 'idempotency-contract' }),
  }));
}
