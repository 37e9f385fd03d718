import { BatchwiseClientError } from '@batchwise/client';
import { mlp } from '@batchwise/modelgen';
import { sleep } from '@batchwise/client/load';
import { writeResult } from '../report.ts';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { benchRepository, cachedModel, fp32Config, inferClient } from '../workload.ts';
import { THREADS, type BatchingModel } from './batching.ts';

/**
 * SIGTERM under steady load: every request the server admitted must complete with 200; the
 * others must be refused at the door (503 while closing, or connection refused or reset while connecting once closed),
 * never cut off half-way.
 */
export async function runShutdown(options: { model: BatchingModel; concurrency: number; loadMs: number; log: (line: string) => void }) {
  const { model, log } = options;
  const file = await cachedModel(`mlp-${model.layers}x${model.width}`, () => mlp({ layers: model.layers, width: model.width }), log);
  const repo = await benchRepository('shutdown', [
    {
      name: 'mlp',
      modelFile: file,
      config: fp32Config('mlp', { width: model.width, maxBatchSize: 64, batching: true, delayUs: 1000, threads: THREADS }),
    },
  ]);
  const server = await startServerProcess(['--model-repository', repo, '--shutdown-grace-secs', '1']);
  const client = inferClient(server, 'http-binary', options.concurrency);
  const data = new Float32Array(model.width).fill(0.5);
  const outcome = { ok: 0, refused503: 0, connectionRefused: 0, lost: 0, lostMessages: [] as string[] };
  let running = true;
  const loops = Array.from({ length: options.concurrency }, async () => {
    while (running) {
      try {
        await client.infer({ model: 'mlp', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, model.width], data }] });
        outcome.ok++;
      } catch (error) {
        const message = (error as Error).message;
        if (error instanceof BatchwiseClientError && error.httpStatus === 503) outcome.refused503++;
        // Refused at the door once the listener closed: no connection (ECONNREFUSED), or one
        // still in the accept backlog when the listener closed, reset while connecting.
        else if (/ECONNREFUSED|connect ECONNRESET/.test(message + String((error as { cause?: { code?: string } }).cause?.code))) {
          outcome.connectionRefused++;
          await sleep(20);
        } else {
          outcome.lost++;
          if (outcome.lostMessages.length < 5) outcome.lostMessages.push(message);
        }
      }
    }
  });
  await sleep(options.loadMs);
  const okBefore = outcome.ok;
  const signalled = performance.now();
  const exitCode = await server.stop();
  const exitMs = performance.now() - signalled;
  running = false;
  await Promise.all(loops);
  await client.close();
  const result = { exitCode, exitMs, completedBeforeSigterm: okBefore, completedAfterSigterm: outcome.ok - okBefore, ...outcome };
  log(
    `SIGTERM under load: exit code ${exitCode} after ${exitMs.toFixed(0)} ms; ${outcome.ok} completed (${result.completedAfterSigterm} after the signal), ${outcome.refused503} refused with 503, ${outcome.connectionRefused} connection refused, ${outcome.lost} lost`,
  );
  await writeResult('shutdown', result);
  return result;
}
