import { defineConfig } from 'vitest/config';

/**
 * Tests whose assertions are about time (a deadline met, a health check answered while a batch
 * runs, a p99, a share of turns): they run after the others, one file at a time, so that no
 * other test takes the cores they measure on.
 */
const TIMED = [
  'test/event-loop.test.ts',
  'test/batching-e2e.test.ts',
  'test/ensemble-lifecycle.test.ts',
  'test/latency-objective.test.ts',
  'test/rate-limiter.test.ts',
  'test/shutdown.test.ts',
  // Concurrent requests must meet in one batch at a step model: on a loaded machine they arrive apart.
  'test/ensemble.test.ts',
  'test/many-models.test.ts',
  // A refusal within a second of a 100 MB body's last byte: beside the other e2e files on two cores it took 2 s.
  'test/many-elements.test.ts',
  // Rounds of 8 requests that must take well under the model's 400 ms queue delay.
  'test/closed-loop-batching.test.ts',
];

/** The compiled CLI the e2e tests' child servers run is built first (unit tests need none of it). */
const BUILD = './vitest.global-setup.ts';

/**
 * Three projects: `unit` (the tests beside each package's sources and infra's, `pnpm test:unit`),
 * `e2e` (the black-box tests in test/ and bench's smoke tests, which start real servers and child
 * processes) and `timed` (the e2e tests in TIMED). `vitest run` (in `pnpm test`) runs unit and e2e
 * side by side on three workers (most of an e2e test's time is spent waiting on servers and
 * sockets, so three keep two cores busy), then `timed` on one.
 */
export default defineConfig({
  test: {
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 3,
    // Servers the tests start as child processes (test/, bench smoke, tune's candidates) run the compiled CLI.
    env: { BATCHWISE_SERVER_CLI: 'compiled' },
    projects: [
      {
        extends: true,
        // A unit test file shares its worker's modules with the files before it (no test mocks modules or
        // leaves globals changed): loading them again for each file took half of the project's CPU time.
        test: {
          name: 'unit',
          isolate: false,
          include: ['packages/*/src/**/*.test.ts', 'examples/src/**/*.test.ts', 'infra/test/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          globalSetup: [BUILD],
          include: ['test/**/*.test.ts', 'bench/**/*.test.ts'],
          exclude: ['**/node_modules/**', ...TIMED],
        },
      },
      { extends: true, test: { name: 'timed', globalSetup: [BUILD], include: TIMED, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
  },
});
