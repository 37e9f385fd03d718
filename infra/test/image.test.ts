import { execFileSync } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App, AssetStaging, IgnoreStrategy, Stack } from 'aws-cdk-lib';
import { DockerImageAsset } from 'aws-cdk-lib/aws-ecr-assets';
import { REPOSITORY_ROOT, SERVER_IMAGE_ASSET } from '../lib/server-image.ts';

/** The repository's tracked files, copied: a checkout to change without touching the real one. */
function copyOfRepository(): string {
  const dir = mkdtempSync(join(tmpdir(), 'batchwise-checkout-'));
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: REPOSITORY_ROOT }).toString().split('\0').filter(Boolean);
  for (const file of files) {
    if (!existsSync(join(REPOSITORY_ROOT, file))) continue; // deleted in the working tree
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    copyFileSync(join(REPOSITORY_ROOT, file), join(dir, file));
  }
  return dir;
}

/** The server image's asset hash as the stack computes it (what names the image and rolls the tasks). */
function assetHash(directory: string): string {
  // CDK caches asset hashes by source path and options, not by content.
  AssetStaging.clearAssetHashCache();
  const stack = new Stack(new App({ context: { 'aws:cdk:disable-asset-staging': true } }), 'Image');
  return new DockerImageAsset(stack, 'Server', { directory, ...SERVER_IMAGE_ASSET }).assetHash;
}

describe('server image context', () => {
  let checkout: string;
  let baseline: string;
  beforeAll(() => {
    checkout = copyOfRepository();
    baseline = assetHash(checkout);
  });
  afterAll(() => rmSync(checkout, { recursive: true, force: true }));

  /** Applies `change` to the checkout, returns the new hash, and undoes the change. */
  function hashAfter(change: Record<string, string | null>): string {
    const saved = new Map<string, string | null>();
    for (const [file, content] of Object.entries(change)) {
      const path = join(checkout, file);
      saved.set(file, existsSync(path) ? readFileSync(path, 'utf8') : null);
      mkdirSync(dirname(path), { recursive: true });
      if (content === null) appendFileSync(path, '\n// touched\n');
      else writeFileSync(path, content);
    }
    try {
      return assetHash(checkout);
    } finally {
      for (const [file, content] of saved) {
        if (content === null) rmSync(join(checkout, file));
        else writeFileSync(join(checkout, file), content);
      }
    }
  }

  it('does not change when infra, bench, tests, examples, workflows or documentation change', () => {
    const unrelated: Record<string, string | null> = {
      'infra/lib/alarms.ts': null,
      'infra/README.md': null,
      'infra/environments/example.json': '{}',
      'cdk.json': '{}',
      'bench/src/cli.ts': null,
      'test/shutdown.test.ts': null,
      'packages/server/src/cli/flags.test.ts': 'a new test',
      'packages/modelgen/src/index.ts': null,
      'examples/model_repository/README.md': 'new',
      '.github/workflows/deploy.yml': null,
      'README.md': null,
      'docs/architecture.md': 'a new document',
      'vitest.config.ts': null,
    };
    for (const [file, content] of Object.entries(unrelated)) {
      expect(hashAfter({ [file]: content }), file).toBe(baseline);
    }
  });

  it('changes when the server, the lockfile or the Dockerfile change', () => {
    for (const file of [
      'packages/server/src/cli/serve.ts',
      'packages/protocol/proto/grpc_service.proto',
      'packages/protocol/src/datatype.ts',
      'packages/backend/src/tensor.ts',
      'packages/client/src/load/index.ts',
      'pnpm-lock.yaml',
      'Dockerfile',
    ]) {
      expect(hashAfter({ [file]: null }), file).not.toBe(baseline);
    }
    expect(hashAfter({ 'packages/server/src/new-module.ts': 'export {};' })).not.toBe(baseline);
  });

  it('holds what the Dockerfile reads: the workspace manifests and lockfile, the sources of the server and the workspace packages it imports, the protos', () => {
    // The same patterns CDK fingerprints with, and Docker sends the build by (.dockerignore).
    const patterns = readFileSync(join(REPOSITORY_ROOT, '.dockerignore'), 'utf8').split('\n').filter(Boolean);
    const ignore = IgnoreStrategy.docker(REPOSITORY_ROOT, [...patterns, '!Dockerfile', '!.dockerignore']);
    const sent = (file: string) => !ignore.ignores(join(REPOSITORY_ROOT, file));
    for (const file of [
      'Dockerfile',
      'package.json',
      'pnpm-lock.yaml',
      'pnpm-workspace.yaml',
      'tsconfig.base.json',
      'packages/server/package.json',
      'packages/server/tsconfig.json',
      'packages/server/src/cli/main.ts',
      'packages/server/src/grpc/server.ts',
      'packages/protocol/package.json',
      'packages/protocol/tsconfig.json',
      'packages/protocol/src/index.ts',
      'packages/protocol/proto/grpc_service.proto',
      'packages/backend/package.json',
      'packages/backend/tsconfig.json',
      'packages/backend/src/index.ts',
      'packages/client/package.json',
      'packages/client/tsconfig.json',
      'packages/client/src/load/index.ts',
    ]) {
      expect(sent(file), file).toBe(true);
    }
    for (const file of [
      'packages/server/src/cli/init-relay.test.ts',
      'packages/server/node_modules/x',
      'packages/server/dist/cli/main.js',
      'packages/protocol/src/json-text.test.ts',
      'packages/protocol/dist/index.js',
      'packages/backend/src/tensor.test.ts',
      'packages/backend/dist/index.js',
      'packages/client/src/http-infer-codec.test.ts',
      'packages/client/dist/index.js',
      'packages/modelgen/src/index.ts',
      'infra/bin/app.ts',
      'bench/src/cli.ts',
      'test/shutdown.test.ts',
      'README.md',
      'cdk.json',
      'examples/model_repository/x',
    ]) {
      expect(sent(file), file).toBe(false);
    }
  });
});
