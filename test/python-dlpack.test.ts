/**
 * Triton's DLPack API in Python models on a real server (one stub process per instance, Debian's numpy):
 * pb_utils.Tensor.to_dlpack / from_dlpack / is_cpu round trips of every fixed-size datatype (batched,
 * through HTTP and gRPC), a model reading its inputs with np.from_dlpack, one building its outputs with
 * pb_utils.Tensor.from_dlpack, Triton's refusals, a GPU output where no CUDA library can copy it, and
 * KIND_GPU Python instances on a host without a GPU (a load error in Triton's words, or
 * --allow-cpu-fallback). The API's own unit tests: packages/server/src/backends/python/dlpack.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, HttpClient, type TypedArray } from '@batchwise/client';
import { visibleGpuIds } from '../packages/server/src/backends/gpu-detect.ts';
import { hostPython } from '../packages/server/src/backends/python/interpreter.ts';
import { makeRepository } from './support/repository.ts';
import { getJson, postJson, startTestServer } from './support/server.ts';

const DATATYPES = [
  'FP32',
  'FP64',
  'FP16',
  'BF16',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'BOOL',
] as const;
type FixedType = (typeof DATATYPES)[number];

/** Each output is the input of its datatype through to_dlpack and from_dlpack (Triton's qa dlpack_identity), checked in place. */
const IDENTITY_PY = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for tensor in request.inputs():
                if not tensor.is_cpu() or tensor.__dlpack_device__() != (1, 0):
                    raise pb_utils.TritonModelException("input %s is not in CPU memory" % tensor.name())
                out = pb_utils.Tensor.from_dlpack(tensor.name().replace("INPUT", "OUTPUT"), tensor.to_dlpack())
                if out.triton_dtype() != tensor.triton_dtype() or out.shape() != tensor.shape():
                    raise pb_utils.TritonModelException("%s changed its dtype or shape" % tensor.name())
                if tensor.name() not in ("INPUT_BF16", "INPUT_BOOL"):
                    # Zero-copy: the output is the input's memory, which np.from_dlpack views too
                    # (numpy has no bfloat16, and no DLPack bool before 1.25).
                    view = np.from_dlpack(tensor)
                    if not (np.shares_memory(view, tensor.as_numpy()) and np.shares_memory(out.as_numpy(), tensor.as_numpy())):
                        raise pb_utils.TritonModelException("%s was copied" % tensor.name())
                outputs.append(out)
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
`;

const identityConfig = () => `
name: "dlpack_identity"
backend: "python"
max_batch_size: 16
input [ ${DATATYPES.map((t) => `{ name: "INPUT_${t}" data_type: TYPE_${t} dims: [ -1 ] }`).join(', ')} ]
output [ ${DATATYPES.map((t) => `{ name: "OUTPUT_${t}" data_type: TYPE_${t} dims: [ -1 ] }`).join(', ')} ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
`;

/**
 * Reads its input with np.from_dlpack (a read-only view, no copy) and answers IN * 2.5 and the rows
 * reversed, as pb_utils.Tensor.from_dlpack of numpy arrays (a read-only one for a single row).
 */
const NUMPY_PY = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            x = np.from_dlpack(tensor)
            assert np.shares_memory(x, tensor.as_numpy())
            if x.shape[0] > 1 and x[0, 0] == -1:
                # Triton refuses a non-contiguous DLPack tensor.
                pb_utils.Tensor.from_dlpack("SCALED", x.T)
            scaled = pb_utils.Tensor.from_dlpack("SCALED", x * np.float32(2.5))
            reversed_rows = pb_utils.Tensor.from_dlpack("REVERSED", np.ascontiguousarray(x[::-1]))
            responses.append(pb_utils.InferenceResponse([scaled, reversed_rows]))
        return responses
`;

const NUMPY_CONFIG = `
name: "dlpack_numpy"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "SCALED" data_type: TYPE_FP32 dims: [ -1, -1 ] }, { name: "REVERSED" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
`;

/** An output whose DLPack capsule says it is on CUDA device 0 (its memory is host memory; nothing reads it as such). */
const GPU_OUTPUT_PY = `
import numpy as np
import _bw_dlpack
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().copy()
            capsule = _bw_dlpack.export(x.__array_interface__["data"][0], x.shape, "FP32", (2, 0), x)
            out = pb_utils.Tensor.from_dlpack("OUTPUT0", capsule)
            assert not out.is_cpu()
            if x[0] != -1:
                responses.append(pb_utils.InferenceResponse([out]))
                continue
            # Through the response sender: its send() raises, and the model answers with the reason.
            sender = request.get_response_sender()
            try:
                sender.send(pb_utils.InferenceResponse([out]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                message = "sent"
            except pb_utils.TritonModelException as error:
                message = "send() raised: " + str(error)
            sender.send(
                pb_utils.InferenceResponse(error=pb_utils.TritonError(message)),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
            responses.append(None)
        return responses
`;

const GPU_OUTPUT_CONFIG = `
name: "gpu_output"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`;

/** Records initialize(args), as a torch model reads them: torch.device(f"cuda:{args['model_instance_device_id']}"). */
const KIND_GPU_PY = `
import json, os
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        with open(os.path.join(args["model_repository"], "init-" + args["model_instance_name"] + ".json"), "w") as f:
            json.dump(args, f)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
`;

const KIND_GPU_CONFIG = `
name: "torch_on_gpu"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { name: "on_gpu" kind: KIND_GPU count: 2 gpus: [ 0 ] } ]
`;

/** Whether the models' interpreter can import a CUDA library that would copy GPU_OUTPUT_PY's output (then it is not refused). */
const cudaLibrary = ['torch', 'cupy'].some((module) => {
  try {
    execFileSync(hostPython(), ['-c', `import ${module}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
});
const noGpu = visibleGpuIds().length === 0;

function sample(datatype: FixedType, n: number, seed: number): TypedArray {
  const value = (i: number) => ((seed * 7919 + i * 104729) % 251) - 125;
  switch (datatype) {
    case 'FP32':
      return Float32Array.from({ length: n }, (_, i) => value(i) / 8);
    case 'FP64':
      return Float64Array.from({ length: n }, (_, i) => value(i) / 3);
    case 'FP16':
    case 'BF16':
    case 'UINT16':
      return Uint16Array.from({ length: n }, (_, i) => (value(i) * 263) & 0xffff);
    case 'INT8':
      return Int8Array.from({ length: n }, (_, i) => value(i));
    case 'INT16':
      return Int16Array.from({ length: n }, (_, i) => value(i) * 200);
    case 'INT32':
      return Int32Array.from({ length: n }, (_, i) => value(i) * 1_000_003);
    case 'INT64':
      return BigInt64Array.from({ length: n }, (_, i) => BigInt(value(i)) * 10_000_000_019n);
    case 'UINT8':
      return Uint8Array.from({ length: n }, (_, i) => value(i) + 125);
    case 'UINT32':
      return Uint32Array.from({ length: n }, (_, i) => (value(i) + 125) * 16_000_057);
    case 'UINT64':
      return BigUint64Array.from({ length: n }, (_, i) => BigInt(value(i) + 125) * 72_057_594_037_927_93n);
    case 'BOOL':
      return Uint8Array.from({ length: n }, (_, i) => value(i) & 1);
  }
}

const bytesOf = (data: unknown): Buffer => {
  const view = data as ArrayBufferView;
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength);
};

describe('the DLPack API in Python models', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let http: HttpClient;
  let grpc: GrpcClient;

  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'dlpack_identity', config: identityConfig(), files: { '1/model.py': IDENTITY_PY } },
      { name: 'dlpack_numpy', config: NUMPY_CONFIG, files: { '1/model.py': NUMPY_PY } },
      { name: 'gpu_output', config: GPU_OUTPUT_CONFIG, files: { '1/model.py': GPU_OUTPUT_PY } },
    ]);
    server = await startTestServer([repo.dir]);
    http = new HttpClient({ url: server.url });
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  }, 120_000);

  afterAll(async () => {
    await grpc?.close();
    await http?.close();
    await server?.close();
    await repo?.remove();
  });

  it('to_dlpack then from_dlpack returns every fixed-size datatype bit for bit, in place, in batches of concurrent requests', async () => {
    const requests = Array.from({ length: 10 }, (_, r) => {
      const rows = 1 + (r % 3);
      const width = 1 + ((r * 5) % 7);
      return DATATYPES.map((datatype) => ({
        name: `INPUT_${datatype}`,
        datatype,
        shape: [rows, width],
        data: sample(datatype, rows * width, r + 1),
      }));
    });
    const answers = await Promise.all(requests.map((inputs, r) => (r % 2 ? http : grpc).infer({ model: 'dlpack_identity', inputs })));
    answers.forEach((answer, r) => {
      for (const input of requests[r]!) {
        const output = answer.outputs.find((o) => o.name === input.name.replace('INPUT', 'OUTPUT'))!;
        expect(output.datatype).toBe(input.datatype);
        expect(output.shape).toEqual(input.shape);
        expect(bytesOf(output.data).equals(bytesOf(input.data)), `${input.datatype} of request ${r}`).toBe(true);
      }
    });
    const stats = await http.modelStatistics('dlpack_identity');
    expect(Number(stats[0]!.execution_count)).toBeLessThan(Number(stats[0]!.inference_count));
  });

  it('np.from_dlpack reads an input in place and pb_utils.Tensor.from_dlpack of numpy arrays builds the outputs', async () => {
    const data = Float32Array.from({ length: 12 }, (_, i) => (i * 37) / 7 - 20);
    const answer = await http.infer({ model: 'dlpack_numpy', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4, 3], data }] });
    const scaled = answer.outputs.find((o) => o.name === 'SCALED')!;
    const reversed = answer.outputs.find((o) => o.name === 'REVERSED')!;
    expect(scaled.shape).toEqual([4, 3]);
    expect([...(scaled.data as Float32Array)]).toEqual([...data].map((x) => Math.fround(x * 2.5)));
    expect([...(reversed.data as Float32Array)]).toEqual([
      ...data.subarray(9, 12),
      ...data.subarray(6, 9),
      ...data.subarray(3, 6),
      ...data.subarray(0, 3),
    ]);
  });

  it("refuses a non-contiguous DLPack tensor in Triton's words", async () => {
    const failed = await http
      .infer({ model: 'dlpack_numpy', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 3], data: [-1, 1, 2, 3, 4, 5] }] })
      .catch((e: BatchwiseClientError) => e);
    expect(failed).toBeInstanceOf(BatchwiseClientError);
    expect((failed as Error).message).toContain(
      'DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are supported.',
    );
  });

  it.skipIf(cudaLibrary)('fails a GPU output that no CUDA library (torch, cupy) can copy to the host, saying so', async () => {
    const failed = await http
      .infer({ model: 'gpu_output', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [3], data: [1, 2, 3] }] })
      .catch((e: BatchwiseClientError) => e);
    expect(failed).toBeInstanceOf(BatchwiseClientError);
    expect((failed as Error).message).toMatch(/Tensor 'OUTPUT0' is in GPU memory \(CUDA device 0\) and cannot be copied to the host/);
    expect((failed as Error).message).toMatch(/neither torch nor cupy can be imported/);
    const viaSender = await http
      .infer({ model: 'gpu_output', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [3], data: [-1, 2, 3] }] })
      .catch((e: BatchwiseClientError) => e);
    expect((viaSender as Error).message).toMatch(/^send\(\) raised: Tensor 'OUTPUT0' is in GPU memory \(CUDA device 0\)/);
    // The process is still serving.
    const ok = await http.infer({ model: 'dlpack_numpy', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [2] }] });
    expect([...(ok.outputs[0]!.data as Float32Array)]).toEqual([5]);
  });
});

describe.skipIf(!noGpu)('KIND_GPU Python models on a host without a GPU', () => {
  it("fail to load in Triton's words, saying what to do", async () => {
    const repo = await makeRepository([{ name: 'torch_on_gpu', config: KIND_GPU_CONFIG, files: { '1/model.py': KIND_GPU_PY } }]);
    const server = await startTestServer([repo.dir]);
    try {
      const { json } = await postJson(`${server.url}/v2/repository/index`, {});
      const row = json.find((r: { name: string }) => r.name === 'torch_on_gpu');
      expect(row.state).toBe('UNAVAILABLE');
      expect(row.reason).toMatch(/instance group on_gpu of model torch_on_gpu has kind KIND_GPU but no GPUs are available/);
      expect(row.reason).toMatch(/--allow-cpu-fallback/);
    } finally {
      await server.close();
      await repo.remove();
    }
  });

  it('run as KIND_CPU with --allow-cpu-fallback, visibly', async () => {
    const repo = await makeRepository([{ name: 'torch_on_gpu', config: KIND_GPU_CONFIG, files: { '1/model.py': KIND_GPU_PY } }]);
    const server = await startTestServer([repo.dir], { allowCpuFallback: true });
    try {
      const meta = await getJson(`${server.url}/v2/models/torch_on_gpu`);
      expect(meta.parameters.cpu_fallback_reason).toMatch(/has kind KIND_GPU but no GPUs are available/);
      for (const name of ['on_gpu_0', 'on_gpu_1']) {
        const args = JSON.parse(await readFile(join(repo.dir, 'torch_on_gpu', `init-${name}.json`), 'utf8'));
        expect([args.model_instance_kind, args.model_instance_device_id]).toEqual(['CPU', '0']);
      }
    } finally {
      await server.close();
      await repo.remove();
    }
  });
});
