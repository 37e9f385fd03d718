/**
 * A Triton command line, moved over as it is: Triton's flags that mean something here act,
 * the ones with nothing to act on start the server anyway and are named in a warning.
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess } from '../bench/src/server-process.ts';
import { EXAMPLES } from './support/repository.ts';

describe('Triton command-line flags', () => {
  let repo: string;
  beforeAll(async () => {
    repo = await mkdtemp(join(tmpdir(), 'batchwise-triton-flags-'));
    await cp(join(EXAMPLES, 'simple'), join(repo, 'simple'), { recursive: true });
    await mkdir(join(repo, 'broken', '1'), { recursive: true });
    await writeFile(join(repo, 'broken', '1', 'model.onnx'), 'not an onnx model');
  });
  afterAll(() => rm(repo, { recursive: true, force: true }));

  it('--strict-readiness=false keeps the server ready beside a broken model; flags without effect are warned about', async () => {
    const server = await startServerProcess([
      '--model-repository', repo,
      '--strict-readiness=false',
      '--exit-on-error=false',
      '--disable-auto-complete-config=false',
      '--log-info=true',
      '--grpc-address', '127.0.0.1',
      '--metrics-address', '127.0.0.1',
      '--grpc-keepalive-time', '10000',
      '--model-load-thread-count', '4',
      '--backend-config', 'onnxruntime,enable-global-threadpool=1',
    ]);
    try {
      expect((await fetch(`${server.httpUrl}/v2/health/ready`)).status).toBe(200);
      expect((await fetch(`${server.httpUrl}/v2/models/simple/ready`)).status).toBe(200);
      expect((await fetch(`${server.httpUrl}/v2/models/broken/ready`)).status).not.toBe(200);
      const warnings = server.logs.filter((l) => l['level'] === 40).map((l) => l['msg']);
      expect(warnings).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^--model-load-thread-count has no effect in Batchwise: models load concurrently/),
          expect.stringMatching(/^--backend-config has no effect in Batchwise/),
        ]),
      );
    } finally {
      await server.stop();
    }
  });

  it('strict readiness (the default) reports not ready while a model is broken', async () => {
    const server = await startServerProcess(['--model-repository', repo]);
    try {
      expect((await fetch(`${server.httpUrl}/v2/health/ready`)).status).toBe(400);
      expect((await fetch(`${server.httpUrl}/v2/health/live`)).status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it('--exit-on-error stops the server when a model fails to load, naming it', async () => {
    await expect(startServerProcess(['--model-repository', repo, '--exit-on-error'])).rejects.toThrow(
      /server exited \(1\)[\s\S]*--exit-on-error: model 'broken' failed to load/,
    );
  });

  it('--disable-auto-complete-config is --strict-model-config: a model without config.pbtxt fails', async () => {
    const server = await startServerProcess(['--model-repository', repo, '--disable-auto-complete-config', '--strict-readiness=false']);
    try {
      const index = (await (await fetch(`${server.httpUrl}/v2/repository/index`, { method: 'POST' })).json()) as { name: string; reason?: string }[];
      expect(index.find((m) => m.name === 'broken')?.reason).toMatch(/no config.pbtxt; it is required with --strict-model-config=true/);
    } finally {
      await server.stop();
    }
  });
});
