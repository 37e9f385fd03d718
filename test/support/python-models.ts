/**
 * Python backend models the tests write (model.py files in Triton's form) and their configs.
 */

/** OUT = IN * 2.5, FP32 rows; the same computation as modelgen's scaler(2.5) ONNX model. */
export const SCALE_PY = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * np.float32(2.5))]))
        return responses
`;

/** Records initialize(args) and the batch sizes and process of each execute; errors and crashes on request. */
export const PROBE_PY = `
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        with open(os.path.join(args["model_repository"], "init-" + args["model_instance_name"] + ".json"), "w") as f:
            json.dump(args, f)

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            action = int(x.flat[0])
            if action == 1:
                raise pb_utils.TritonModelException("the model refused this batch")
            if action == 2:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("bad row", pb_utils.TritonError.INVALID_ARG)))
                continue
            if action == 3:
                os._exit(3)
            if action == 4:
                time.sleep(30)
            who = "%s@%d" % (self.args["model_instance_name"], os.getpid())
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", x + np.float32(1)),
                pb_utils.Tensor("WHO", np.array([who.encode()] * x.shape[0], dtype=np.object_).reshape(x.shape[0], 1)),
                pb_utils.Tensor("BATCH", np.array([[len(requests)]] * x.shape[0], dtype=np.int32)),
            ]))
        return responses

    def finalize(self):
        open(os.path.join(self.args["model_repository"], "finalized-" + self.args["model_instance_name"]), "w").close()
`;

export const PROBE_CONFIG = `
name: "probe"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [
  { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] },
  { name: "WHO" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "BATCH" data_type: TYPE_INT32 dims: [ 1 ] }
]
instance_group [ { name: "pool" kind: KIND_CPU count: 2 } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
parameters { key: "batchwise_execute_timeout_ms" value: { string_value: "3000" } }
`;

/** A Python model that calls another model (BLS) and returns its answer: the name of the model to call is in MODEL. */
export const BLS_PY = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model = pb_utils.get_input_tensor_by_name(request, "MODEL").as_numpy().flat[0]
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            called = pb_utils.InferenceRequest(model_name=model, inputs=[x], requested_output_names=["OUTPUT0"]).exec()
            if called.has_error():
                responses.append(pb_utils.InferenceResponse(error=called.error()))
                continue
            responses.append(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(called, "OUTPUT0")]))
        return responses
`;

/** Sends IN responses (OUT = 0..IN-1) for each request, then the final flag alone, from a thread. */
export const COUNTER_PY = `
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            sender = request.get_response_sender()
            threading.Thread(target=self.count, args=(n, sender)).start()
        return None

    def count(self, n, sender):
        for i in range(n):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`;

export const COUNTER_CONFIG = `
name: "counter"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
`;

/** Completes its own config (no config.pbtxt tensors): Triton's auto_complete_config. */
export const AUTO_PY = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "A", "data_type": "TYPE_INT32", "dims": [2]})
        config.add_output({"name": "B", "data_type": "TYPE_INT32", "dims": [2]})
        config.set_max_batch_size(4)
        config.set_dynamic_batching()
        return config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("B", pb_utils.get_input_tensor_by_name(r, "A").as_numpy() * 2)]) for r in requests]
`;

/**
 * Answers with its BYTES input reversed element-wise, its request's correlation id, flags and
 * parameters as JSON, and response parameters; logs one line through pb_utils.Logger; segfaults on
 * the text "segfault".
 */
export const ECHO_PY = `
import ctypes, json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            if text.flat[0] == b"segfault":
                ctypes.string_at(0)
            pb_utils.Logger.log_info("echoing %d strings" % text.size)
            meta = json.dumps({
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "parameters": json.loads(request.parameters()),
                "requested": sorted(request.requested_output_names()),
            })
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("REVERSED", np.array([s[::-1] for s in text.flat], dtype=np.object_).reshape(text.shape)),
                pb_utils.Tensor("META", np.array([meta.encode()], dtype=np.object_)),
            ], parameters={"reversed": True, "count": int(text.size), "by": "echo"}))
        return responses
`;

export const ECHO_CONFIG = `
name: "echo"
backend: "python"
max_batch_size: 0
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "REVERSED" data_type: TYPE_STRING dims: [ -1 ] }, { name: "META" data_type: TYPE_STRING dims: [ 1 ] } ]
`;

/** Answers with the interpreter's sys.prefix (which environment it runs in). */
export const PREFIX_PY = `
import sys
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PREFIX", np.array([sys.prefix.encode()], dtype=np.object_))]) for _ in requests]
`;

export const prefixConfig = (name: string, envPath: string) => `
name: "${name}"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PREFIX" data_type: TYPE_STRING dims: [ 1 ] } ]
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "${envPath}" } }
`;

/** A running sum per sequence, kept by correlation_id(); the flags of each request echoed. */
export const SEQUENCE_PY = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            cid = request.correlation_id()
            flags = request.flags()
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                self.sums[cid] = 0
            x = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().flat[0])
            self.sums[cid] += x
            total = self.sums[cid]
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
                del self.sums[cid]
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", np.array([[total]], dtype=np.int32)),
                pb_utils.Tensor("FLAGS", np.array([[flags]], dtype=np.int32)),
                pb_utils.Tensor("CID", np.array([[cid]], dtype=np.uint64)),
            ]))
        return responses
`;

export const SEQUENCE_CONFIG = `
name: "py_sequence"
backend: "python"
max_batch_size: 4
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 2000 }
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [
  { name: "SUM" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "FLAGS" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "CID" data_type: TYPE_UINT64 dims: [ 1 ] }
]
`;

/** Not decoupled: execute() returns None, and a thread answers each request through its sender 50 ms later. */
export const LATE_SENDER_PY = `
import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy().copy()
            sender = request.get_response_sender()
            threading.Thread(target=self.answer, args=(x, sender)).start()
        return None

    def answer(self, x, sender):
        time.sleep(0.05)
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`;

export const LATE_SENDER_CONFIG = `
name: "late_sender"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
`;

/** finalize() raises, or hangs, as FINALIZE says: neither may hold up an unload. */
export const finalizePy = (how: 'raise' | 'hang') => `
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "X")]) for r in requests]

    def finalize(self):
        ${how === 'raise' ? 'raise RuntimeError("finalize went wrong")' : 'time.sleep(60)'}
`;

export const finalizeConfig = (name: string) => `
name: "${name}"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
parameters { key: "batchwise_execute_timeout_ms" value: { string_value: "1000" } }
`;
