import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['libs/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts', 'src/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Suites start real servers (nats-server, redis-server, service processes); two cores here.
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    globalSetup: ['test/support/global-setup.ts'],
  },
});
