/**
 * A Triton command line, moved over as it is: Triton's flags that mean something here act,
 * the ones with nothing to act on start the server anyway and are named in a warning.
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { connect } from 'node:http2';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, GrpcStatus } from '@batchwise/client';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { MAX_IN_FLIGHT_PER_STREAM } from '../packages/server/src/grpc/stream-infer.ts';
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

  it('--strict-readiness=false keeps the server ready beside a broken model; --id names the server; flags without effect are warned about', async () => {
    const server = await startServerProcess([
      '--model-repository',
      repo,
      '--strict-readiness=false',
      '--exit-on-error=false',
      '--disable-auto-complete-config=false',
      '--log-info=true',
      '--grpc-address',
      '127.0.0.1',
      '--metrics-address',
      '127.0.0.1',
      '--grpc-keepalive-time',
      '10000',
      '--model-load-thread-count',
      '4',
      '--backend-config',
      'onnxruntime,enable-global-threadpool=1',
      '--id',
      'triton',
    ]);
    const grpc = new GrpcClient({ url: server.grpcAddress });
    try {
      expect((await fetch(`${server.httpUrl}/v2/health/ready`)).status).toBe(200);
      // Triton's health_metadata examples check that the server is named 'triton'.
      expect(((await (await fetch(`${server.httpUrl}/v2`)).json()) as { name: string }).name).toBe('triton');
      expect((await grpc.serverMetadata()).name).toBe('triton');
      expect((await fetch(`${server.httpUrl}/v2/models/simple/ready`)).status).toBe(200);
      expect((await fetch(`${server.httpUrl}/v2/models/broken/ready`)).status).not.toBe(200);
      const warnings = server.logs.filter((l) => l['level'] === 40).map((l) => l['msg']);
      expect(warnings).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^--model-load-thread-count has no effect in Batchwise: models load concurrently/),
          expect.stringMatching(/^--backend-config onnxruntime,enable-global-threadpool has no effect in Batchwise/),
        ]),
      );
    } finally {
      grpc.close();
      await server.stop();
    }
  });

  it("--grpc-max-response-pool-size (Triton's L0_decoupled passes it) starts the server, with one warning saying why it has no effect", async () => {
    const server = await startServerProcess(['--model-repository', repo, '--strict-readiness=false', '--grpc-max-response-pool-size', '8']);
    try {
      expect((await fetch(`${server.httpUrl}/v2/health/ready`)).status).toBe(200);
      const warnings = server.logs.filter((l) => l['level'] === 40).map((l) => String(l['msg']));
      const said = warnings.filter((w) => w.startsWith('--grpc-max-response-pool-size '));
      expect(said).toHaveLength(1);
      expect(said[0]).toMatch(
        new RegExp(`^--grpc-max-response-pool-size has no effect in Batchwise: .*at most ${MAX_IN_FLIGHT_PER_STREAM} requests in flight`),
      );
    } finally {
      await server.stop();
    }
  });

  it('--http-keep-alive-timeout-secs sets the keep-alive the HTTP endpoint announces (65 s by default, above the ALB idle timeout)', async () => {
    for (const [args, announced] of [
      [[], 'timeout=65'],
      [['--http-keep-alive-timeout-secs', '90'], 'timeout=90'],
    ] as const) {
      const server = await startServerProcess(['--model-repository', repo, '--strict-readiness=false', ...args]);
      try {
        expect((await fetch(`${server.httpUrl}/v2/health/live`)).headers.get('keep-alive')).toBe(announced);
      } finally {
        await server.stop();
      }
    }
  });

  it('gRPC transport flags reach the gRPC server: keepalive pings on an idle connection, max connection age, max message size', async () => {
    const server = await startServerProcess([
      '--model-repository',
      repo,
      '--strict-readiness=false',
      '--grpc-keepalive-time',
      '100',
      '--grpc-keepalive-timeout',
      '10000',
      '--grpc-max-connection-age',
      '1500',
      '--grpc-max-connection-age-grace',
      '5000',
      '--grpc-max-message-bytes',
      '4096',
      '--allow-gpu-metrics=false',
      '--metrics-interval-ms',
      '1000',
      '--grpc-keepalive-permit-without-calls',
      '1',
      '--grpc-http2-max-pings-without-data',
      '0',
      '--grpc-http2-min-recv-ping-interval-without-data',
      '5000',
      '--grpc-http2-max-ping-strikes',
      '0',
      '--metrics-config',
      'summary_latencies=true',
      '--allow-cpu-metrics',
      'false',
    ]);
    // A bare HTTP/2 connection with no call on it: the server pings it, then sends GOAWAY at max age.
    const session = connect(`http://${server.grpcAddress}`);
    const client = new GrpcClient({ url: server.grpcAddress });
    try {
      const pinged = new Promise<void>((resolve) => session.once('ping', () => resolve()));
      const goaway = new Promise<number>((resolve) => session.once('goaway', (code) => resolve(code)));
      await pinged;
      expect(await goaway).toBe(0);

      const big = { name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 2048], data: new Int32Array(2048) };
      const refused = await client.infer({ model: 'simple', inputs: [big, { ...big, name: 'INPUT1' }] }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(BatchwiseClientError);
      expect((refused as BatchwiseClientError).grpcCode).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
      const small = { name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16).fill(2) };
      const answer = await client.infer({ model: 'simple', inputs: [small, { ...small, name: 'INPUT1' }] });
      expect(answer.outputs.find((o) => o.name === 'OUTPUT0')?.data).toEqual(new Int32Array(16).fill(4));

      const warnings = server.logs.filter((l) => l['level'] === 40).map((l) => l['msg']);
      for (const flag of [
        'grpc-keepalive-permit-without-calls',
        'grpc-http2-max-pings-without-data',
        'grpc-http2-min-recv-ping-interval-without-data',
        'grpc-http2-max-ping-strikes',
        'metrics-config',
      ]) {
        expect(warnings).toContainEqual(expect.stringMatching(new RegExp(`^--${flag} has no effect in Batchwise: \\S`)));
      }
      expect(warnings.join('\n')).not.toMatch(
        /--(allow-gpu-metrics|allow-cpu-metrics|metrics-interval-ms|grpc-max-connection-age|grpc-max-message-bytes) /,
      );
      // --allow-cpu-metrics false leaves Triton's CPU metrics out, as Triton does.
      expect(await (await fetch(server.metricsUrl)).text()).not.toContain('nv_cpu_');
    } finally {
      session.destroy();
      await client.close();
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
      const index = (await (await fetch(`${server.httpUrl}/v2/repository/index`, { method: 'POST' })).json()) as {
        name: string;
        reason?: string;
      }[];
      expect(index.find((m) => m.name === 'broken')?.reason).toMatch(/no config.pbtxt; it is required with --strict-model-config=true/);
    } finally {
      await server.stop();
    }
  });
});
