/**
 * A Python model's process is memory of the server's: what it holds once initialized (its resident
 * set, measured) is counted in the memory guard's baseline while its version is loaded, and given
 * back at unload.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { readMetric } from './support/metrics.ts';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';

const HEAVY_PY = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.table = np.ones(200 * 1024 * 1024 // 8)  # 200 MiB held for the model's life

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "X")]) for r in requests]
`;
const CONFIG = `backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]`;

let repo: Awaited<ReturnType<typeof makeRepository>>;
let server: Awaited<ReturnType<typeof startTestServer>>;
let http: HttpClient;

beforeAll(async () => {
  repo = await makeRepository([{ name: 'heavy', config: CONFIG, files: { '1/model.py': HEAVY_PY } }]);
  server = await startTestServer([repo.dir], { modelControlMode: 'explicit' });
  http = new HttpClient({ url: server.url });
});

afterAll(async () => {
  await http?.close();
  await server?.close();
  await repo?.remove();
});

const baseline = () => readMetric(server.metricsPort, 'batchwise_memory_baseline_bytes');

it("counts the process's measured memory while the version is loaded, and gives it back at unload", async () => {
  const before = await baseline();
  await http.loadModel('heavy');
  const loaded = await baseline();
  expect(loaded - before).toBeGreaterThan(200 * 1024 * 1024);
  await http.unloadModel('heavy');
  await waitFor(async () => (await baseline()) < loaded - 200 * 1024 * 1024);
});
