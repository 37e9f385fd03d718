import { defineConfig } from 'vitest/config';

/**
 * Two projects: `unit` (the tests beside each package's sources and infra's, `pnpm test:unit`)
 * and `e2e` (the black-box tests in test/ and bench's smoke tests, which start real servers and
 * child processes). `vitest run` (in `pnpm test`) runs both.
 */
export default defineConfig({
  test: {
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    globalSetup: ['./vitest.global-setup.ts'],
    // Servers the tests start as child processes (test/, bench smoke, tune's candidates) run the compiled CLI.
    env: { BATCHWISE_SERVER_CLI: 'compiled' },
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['packages/*/src/**/*.test.ts', 'examples/src/**/*.test.ts', 'infra/test/**/*.test.ts'] },
      },
      { extends: true, test: { name: 'e2e', include: ['test/**/*.test.ts', 'bench/**/*.test.ts'] } },
    ],
  },
});
