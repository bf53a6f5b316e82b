import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    setupFiles: ['test/setup-fast-check.ts'],
    // Safety nets for a hung test, not budgets: tests wait on conditions, and a busy machine (CPU hogs beside the
    // suite, other jobs) only makes them slower. Timing claims live in bench/.
    testTimeout: 15 * 60_000,
    hookTimeout: 15 * 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
